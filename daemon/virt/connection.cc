#include "daemon/virt/connection.h"

#include <libvirt/virterror.h>

#include <string>
#include <utility>

#include "daemon/virt/error.h"
#include "daemon/virt/event_loop.h"

namespace armhive {

namespace {

// The close callback's opaque pointer, owned by the connection's deleter (see open_raw). It
// shares the flag with Connection, so a late callback never touches freed memory.
struct CloseCookie {
  std::shared_ptr<std::atomic<bool>> closed;
};

void on_close(virConnectPtr /*conn*/, int /*reason*/, void* opaque) {
  static_cast<CloseCookie*>(opaque)->closed->store(true);
}

struct Opened {
  ConnectPtr conn;
  std::shared_ptr<std::atomic<bool>> closed;
};

Result<Opened> open_raw(const std::string& uri) {
  ARMHIVE_RETURN_IF_ERROR(init_libvirt());
  virConnectPtr raw = virConnectOpen(uri.c_str());
  if (raw == nullptr) {
    Status s = libvirt_error("open libvirt connection", uri);
    // Whatever libvirt said, a connection that cannot be opened is an environment failure.
    return Status(ErrorCode::kUnavailable, s.message(), uri);
  }
  auto closed = std::make_shared<std::atomic<bool>>(false);
  // We own the cookie, not libvirt: drivers without close callbacks (test:///) accept the
  // registration without storing it and would never call a free function, so it is freed by
  // the deleter below, after the callback is unregistered (libvirt no longer calls it then).
  auto* cookie = new CloseCookie{closed};
  if (virConnectRegisterCloseCallback(raw, on_close, cookie, nullptr) < 0) virResetLastError();
  // Interval 5 s, 3 unanswered probes: libvirtd gone for ~15 s closes the connection. Drivers
  // without keepalive (test:///) report an error or 1: not fatal.
  if (virConnectSetKeepAlive(raw, 5, 3) < 0) virResetLastError();
  ConnectPtr conn(raw, [cookie](virConnectPtr c) {
    if (virConnectUnregisterCloseCallback(c, on_close) < 0) virResetLastError();
    virConnectClose(c);
    delete cookie;
  });
  return Opened{std::move(conn), std::move(closed)};
}

}  // namespace

struct Connection::State {
  std::string uri;
  mutable std::mutex mu;  // guards conn and closed only; never held across a libvirt call
  ConnectPtr conn;
  std::shared_ptr<std::atomic<bool>> closed;
};

Connection::Connection(std::unique_ptr<State> state) : state_(std::move(state)) {}
Connection::Connection(Connection&& other) noexcept = default;
Connection& Connection::operator=(Connection&& other) noexcept = default;
Connection::~Connection() noexcept = default;

Result<Connection> Connection::open(std::string_view uri) {
  ARMHIVE_ASSIGN_OR_RETURN(Opened opened, open_raw(std::string(uri)));
  auto state = std::make_unique<State>();
  state->uri = std::string(uri);
  state->conn = std::move(opened.conn);
  state->closed = std::move(opened.closed);
  return Connection(std::move(state));
}

ConnectPtr Connection::get() const {
  std::lock_guard lock(state_->mu);
  return state_->conn;
}

const std::string& Connection::uri() const { return state_->uri; }

bool Connection::disconnected() const {
  ConnectPtr conn;
  std::shared_ptr<std::atomic<bool>> closed;
  {
    std::lock_guard lock(state_->mu);
    conn = state_->conn;
    closed = state_->closed;
  }
  if (closed->load()) return true;
  int alive = virConnectIsAlive(conn.get());
  if (alive < 0) virResetLastError();
  return alive == 0;
}

Status Connection::reconnect() {
  ARMHIVE_ASSIGN_OR_RETURN(Opened opened, open_raw(state_->uri));
  ConnectPtr old;
  {
    std::lock_guard lock(state_->mu);
    old = std::exchange(state_->conn, std::move(opened.conn));
    state_->closed = std::move(opened.closed);
  }
  old.reset();  // closes here, outside the lock, unless a caller still holds it
  wake_event_loop();
  return Status::ok();
}

Result<DomainHandle> Connection::lookup_domain(std::string_view name) const {
  ConnectPtr conn = get();
  std::string n(name);
  virDomainPtr dom = virDomainLookupByName(conn.get(), n.c_str());
  if (dom == nullptr) return libvirt_error("look up domain", n);
  return DomainHandle(dom);
}

}  // namespace armhive
