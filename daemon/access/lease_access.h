#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <thread>

#include "daemon/access/forward_table.h"
#include "daemon/engine/lease_service.h"

namespace armhive {

// Where a client reaches a ready lease's SSH through the host.
struct SshEndpoint {
  std::string host;
  int port = 0;
};

// Keeps the forwards in step with the leases, from the outside of the engine: it only reads
// LeaseService (get_lease, list_leases, events_since).
//   ready lease     -> its SSH forward is opened (at the first event, or when the API first
//                      shows the lease, whichever comes first: a warm hand-out's JSON already
//                      carries the forward)
//   lease ends      -> its forwards are closed and their connections cut (releasing, released,
//                      expired, failed)
// At start every ready lease gets its forward back (after a daemon restart).
//
// Ownership: borrows the LeaseService and the ForwardTable (both outlive it); owns one watcher
// thread. Threading: ssh_endpoint() is thread-safe (HTTP workers); start()/stop() from the
// controlling thread.
class LeaseAccess {
 public:
  LeaseAccess(LeaseService& leases, ForwardTable& forwards, int guest_ssh_port = 22);
  ~LeaseAccess() noexcept;  // stop()
  LeaseAccess(const LeaseAccess&) = delete;
  LeaseAccess& operator=(const LeaseAccess&) = delete;

  void start();
  void stop();

  // The SSH endpoint of `lease` through the host: nullopt unless it is ready (and then opens
  // the forward if the watcher has not yet). kUnavailable when no port is free.
  Result<std::optional<SshEndpoint>> ssh_endpoint(const Lease& lease);

  // Handles one engine event (exposed for tests that drive it without the thread).
  void on_event(const Event& event);

 private:
  void watch();

  LeaseService& leases_;
  ForwardTable& forwards_;
  int guest_ssh_port_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace armhive
