#include "daemon/virt/connection.h"

#include <libvirt/virterror.h>

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "base/thread_annotations.h"
#include "daemon/virt/error.h"
#include "daemon/virt/event_loop.h"

namespace armhive {

namespace {

// How long a thread waits for another thread's open while libvirtd answers (threads using a
// host for the first time at once): an open that takes longer is libvirtd not answering.
constexpr std::chrono::seconds kOpenWait{10};

// In-process drivers: no RPC client, so no reason (and, for test:///PATH, no way) to have more
// than one connection.
bool in_process(std::string_view uri) { return uri.rfind("test:", 0) == 0; }

bool alive(const ConnectPtr& conn) {
  if (!conn) return false;
  int a = virConnectIsAlive(conn.get());
  if (a < 0) virResetLastError();
  return a == 1;
}

Result<ConnectPtr> open_raw(const std::string& uri) {
  ARMHIVE_RETURN_IF_ERROR(init_libvirt());
  virConnectPtr raw = virConnectOpen(uri.c_str());
  if (raw == nullptr) {
    Status s = libvirt_error("open libvirt connection", uri);
    // Whatever libvirt said, a connection that cannot be opened is an environment failure.
    return Status(ErrorCode::kUnavailable, s.message(), uri);
  }
  // Interval 5 s, 3 unanswered probes: libvirtd gone for ~15 s closes the connection. Drivers
  // without keepalive (test:///) report an error or 1: not fatal.
  if (virConnectSetKeepAlive(raw, 5, 3) < 0) virResetLastError();
  return ConnectPtr(raw, [](virConnectPtr c) {
    if (virConnectClose(c) < 0) virResetLastError();
  });
}

}  // namespace

struct Connection::State {
  std::string uri;
  bool shared = false;       // in_process(uri): every thread uses `newest`
  std::timed_mutex open_mu;  // one open at a time; held across virConnectOpen only
  mutable Mutex mu;          // never held across a libvirt call
  std::map<std::thread::id, ConnectPtr> by_thread GUARDED_BY(mu);
  // The connection opened last: alive unless libvirtd went away since.
  ConnectPtr newest GUARDED_BY(mu);
};

Connection::Connection(std::unique_ptr<State> state) : state_(std::move(state)) {}
Connection::Connection(Connection&& other) noexcept = default;
Connection& Connection::operator=(Connection&& other) noexcept = default;
Connection::~Connection() noexcept = default;

Result<Connection> Connection::open(std::string_view uri) {
  auto state = std::make_unique<State>();
  state->uri = std::string(uri);
  state->shared = in_process(uri);
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, open_raw(state->uri));
  {
    MutexLock lock(state->mu);  // not shared yet: uncontended, but the contract holds
    state->by_thread[std::this_thread::get_id()] = conn;
    state->newest = std::move(conn);
  }
  return Connection(std::move(state));
}

Result<ConnectPtr> Connection::get() const {
  State& s = *state_;
  const std::thread::id me = std::this_thread::get_id();
  ConnectPtr mine;
  ConnectPtr newest;
  {
    MutexLock lock(s.mu);
    if (s.shared) return s.newest;
    if (auto it = s.by_thread.find(me); it != s.by_thread.end()) mine = it->second;
    newest = s.newest;
  }
  if (alive(mine)) return mine;
  // An open is under way on another thread: worth waiting for while libvirtd answers (threads
  // calling a host for the first time, or catching up after it came back), not while the last
  // connection anyone opened is closed too (libvirtd gone or frozen: that open may hang).
  std::unique_lock opening(s.open_mu, std::defer_lock);
  if (!opening.try_lock() && (!alive(newest) || !opening.try_lock_for(kOpenWait))) {
    return unavailable("reconnecting to libvirt", s.uri);
  }
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr opened, open_raw(s.uri));
  {
    MutexLock lock(s.mu);
    mine = std::exchange(s.by_thread[me], opened);  // the closed one, closed below
    s.newest = opened;
  }
  opening.unlock();
  mine.reset();
  wake_event_loop();  // its keepalive timer joins the loop's next wait
  return opened;
}

Result<ConnectPtr> Connection::open_dedicated() const {
  {
    MutexLock lock(state_->mu);
    if (state_->shared) return state_->newest;
  }
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, open_raw(state_->uri));
  wake_event_loop();
  return conn;
}

const std::string& Connection::uri() const { return state_->uri; }

bool Connection::disconnected() const {
  ConnectPtr newest;
  {
    MutexLock lock(state_->mu);
    newest = state_->newest;
  }
  return !alive(newest);
}

Status Connection::reconnect() {
  State& s = *state_;
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, open_raw(s.uri));
  ConnectPtr old;
  {
    MutexLock lock(s.mu);
    if (s.shared) {
      old = std::exchange(s.newest, std::move(conn));
    } else {
      old = std::exchange(s.by_thread[std::this_thread::get_id()], conn);
      s.newest = std::move(conn);
    }
  }
  old.reset();  // closes here, outside the lock, unless a caller still holds it
  wake_event_loop();
  return Status::ok();
}

Result<DomainHandle> Connection::lookup_domain(std::string_view name) const {
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, get());
  std::string n(name);
  virDomainPtr dom = virDomainLookupByName(conn.get(), n.c_str());
  if (dom == nullptr) return libvirt_error("look up domain", n);
  return DomainHandle(dom);
}

}  // namespace armhive
