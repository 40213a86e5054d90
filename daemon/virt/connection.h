#pragma once

#include <libvirt/libvirt.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/libvirt_uri.h"
#include "base/result.h"
#include "daemon/virt/handles.h"

namespace armhive {

// The shared, reference-counted libvirt connection pointer. Callers take one with
// Connection::get() for the duration of a call; reconnect() swaps in a new one without
// invalidating pointers already handed out.
using ConnectPtr = std::shared_ptr<virConnect>;

// is_remote_uri(uri): base/libvirt_uri.h.

// One libvirt connection (normally shared by the whole daemon for one host).
//
// Ownership: owns the connection; moved-from objects are empty. Threading: every method may be
// called from any thread; libvirt calls themselves are thread-safe and no lock is held across
// one. The close callback only sets a flag (disconnected()); whoever notices it calls
// reconnect().
class Connection {
 public:
  // Opens `uri` read-write (after init_libvirt()), enables keepalive (5 s interval, 3 missed
  // probes; drivers without keepalive such as test:/// are fine) and registers the close
  // callback. kUnavailable if libvirtd cannot be reached.
  static Result<Connection> open(std::string_view uri);

  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() noexcept;

  // The current connection; never null for an opened Connection.
  ConnectPtr get() const;
  const std::string& uri() const;

  // True once libvirt reported the connection closed (daemon gone, keepalive lost), or
  // virConnectIsAlive says it is dead.
  bool disconnected() const;

  // Opens a fresh connection to the same URI and swaps it in. Event subscriptions registered on
  // the old connection are not carried over (DomainEvents::attach again).
  Status reconnect();

  // virDomainLookupByName; kNotFound naming the domain when there is none.
  Result<DomainHandle> lookup_domain(std::string_view name) const;

 private:
  struct State;
  explicit Connection(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace armhive
