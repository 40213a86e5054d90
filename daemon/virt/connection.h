#pragma once

#include <libvirt/libvirt.h>

#include <memory>
#include <string>
#include <string_view>

#include "base/libvirt_uri.h"
#include "base/result.h"
#include "daemon/virt/handles.h"

namespace armhive {

// A libvirt connection pointer as Connection hands it out: its holder keeps the connection open
// (the last reference closes it). A pointer from Connection::get() belongs to the thread that
// asked for it; one from open_dedicated() to whoever holds it.
using ConnectPtr = std::shared_ptr<virConnect>;

// is_remote_uri(uri): base/libvirt_uri.h.

// The connections to one libvirt URI (normally one Connection per host and user of it).
//
// Why more than one: the RPC client of libvirt 9.0 (Debian 12's) must never be used by two
// threads at once. A thread waiting for its reply registers a watch on the connection's
// private GLib context with a pointer into its own stack frame; when another thread wakes it
// early (a concurrent call on the same connection, or the keepalive timer closing it) the watch
// stays registered after that thread has returned, and the next thread to wait on the context
// runs it against the dead frame (CVE-2024-4418, fixed in libvirt 10.3). armhived died of it
// when a frozen libvirtd came back (issue 29). So every thread gets a connection of its own from
// get(), and whatever lives across calls or threads (event subscriptions, console streams) opens
// one with open_dedicated() and is its only user. Every handle (domain, pool, stream…) made
// from a connection calls libvirt through it: use it on the thread that got the connection.
// In-process drivers (test:///) have no RPC client: they share one connection, as a private
// test:///PATH.xml keeps its state per connection.
//
// Ownership: owns the connections it handed to threads (a thread's stays open until the
// Connection goes; a thread that ended leaves its connection open until then). Threading:
// every method may be called from any thread; no lock is held across a libvirt call except
// the one serialising opens after a loss (see get()).
class Connection {
 public:
  // Opens `uri` read-write (after init_libvirt()) with keepalive (5 s interval, 3 missed
  // probes; drivers without keepalive such as test:/// are fine) to check it answers, and
  // keeps that connection as the calling thread's. kUnavailable if libvirtd cannot be reached.
  static Result<Connection> open(std::string_view uri);

  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() noexcept;

  // The calling thread's connection, opened now if it has none or its last one was closed
  // (libvirtd restarted, keepalive lost). One thread opens at a time. While the connection
  // opened last is closed too (libvirtd gone or frozen: an open may hang) the others get
  // kUnavailable ("reconnecting to libvirt") at once instead of queueing behind it; otherwise
  // they wait for it, up to 10 s.
  Result<ConnectPtr> get() const;
  // A connection of its own for a user that outlives one call or moves between threads (it
  // must then be its only user). The shared one for in-process drivers.
  Result<ConnectPtr> open_dedicated() const;
  const std::string& uri() const;

  // True when the connection opened last (by any thread) has been closed: libvirtd went away
  // and no thread has reached it since.
  bool disconnected() const;

  // Replaces the calling thread's connection by a new one.
  Status reconnect();

  // virDomainLookupByName on the calling thread's connection; kNotFound naming the domain when
  // there is none.
  Result<DomainHandle> lookup_domain(std::string_view name) const;

 private:
  struct State;
  explicit Connection(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace armhive
