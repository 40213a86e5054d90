#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_annotations.h"
#include "daemon/access/expiry_warnings.h"
#include "daemon/access/forward_table.h"
#include "daemon/engine/lease_service.h"

namespace armhive {

// Where a client reaches a ready lease's SSH through the host.
struct SshEndpoint {
  std::string host;
  int port = 0;
  // The VM's SSH host public keys ("TYPE BASE64"): the lease's, read by the engine through the
  // guest agent before it was ready (empty for a pool without sshd).
  std::vector<std::string> host_keys;
  // The forwards of the extra guest ports the lease asked for.
  std::vector<ForwardInfo> extra;
};

// Keeps the forwards in step with the leases, from the outside of the engine: it only reads
// LeaseService (get_lease, list_leases, events_since).
//   ready lease     -> its SSH forward is opened (at the first event, or when the API first
//                      shows the lease, whichever comes first: a warm hand-out's JSON already
//                      carries the forward)
//   lease ends      -> its forwards are closed and their connections cut (releasing, released,
//                      expired, failed)
// At start every ready lease gets its forward back (after a daemon restart). Events can be
// missed (the engine's event buffer is bounded; a watcher that falls behind loses the oldest),
// so sweep() also runs every sweep period, and at once when the event sequence skips: it closes
// the forwards (and tunnels) of every lease that ended, or whose VM address changed. A forward
// never opens from a lease read older than its last close (ForwardTable::Ticket): a reader
// racing a release gets no forward rather than reopening the one the release closed.
//
// Ownership: borrows the LeaseService and the ForwardTable (both outlive it); owns one watcher
// thread. Threading: ssh_endpoint() is thread-safe (HTTP workers); start()/stop() from the
// controlling thread.
class LeaseAccess {
 public:
  // `clock` (null: the system clock) times the developer leases' expiry warnings.
  LeaseAccess(LeaseService& leases, ForwardTable& forwards, int max_extra_ports = 4,
              int guest_ssh_port = 22, const Clock* clock = nullptr);
  ~LeaseAccess() noexcept;  // stop()
  LeaseAccess(const LeaseAccess&) = delete;
  LeaseAccess& operator=(const LeaseAccess&) = delete;

  void start();
  void stop();

  // The SSH endpoint of `lease` through the host: nullopt unless it is ready (and then opens
  // the forwards if the watcher has not yet). Host keys are the lease's own (the engine read
  // them before the lease was ready); never waits for the guest. kUnavailable when no port is
  // free.
  Result<std::optional<SshEndpoint>> ssh_endpoint(const Lease& lease);

  // Where an API tunnel to `port` of `lease` goes: the guest's bridge address and the port, which
  // must be the SSH port or one the lease asked for (kInvalidArgument naming "port" otherwise).
  // Opens the lease's forwards if the watcher has not yet, so ForwardTable::attach ties the
  // tunnel to them (kConflict when the lease is not ready). Never waits for the guest.
  struct TunnelTarget {
    std::string address;
    int port = 0;
  };
  Result<TunnelTarget> tunnel_target(const Lease& lease, int port);

  // Checks the extra guest ports a lease of `pool` asks for: each allowed by the pool's
  // access_ports, no duplicates, at most the pool's max_extra_ports when it sets one, else the
  // daemon's (kInvalidArgument naming "ports[i]" or "ports", the latter saying the cap and the
  // pool whose cap it is). An unknown pool is held to the daemon's cap only (creating the lease
  // reports the pool).
  Status check_ports(const std::string& pool, const std::vector<int>& ports);
  // A reload ([access] max_extra_ports): leases asking from now on are held to it; a lease's
  // ports already granted stay. Thread-safe.
  void set_max_extra_ports(int max) { max_extra_ports_.store(max); }
  // Records them for the lease: forwarded as soon as it is ready (with SSH). Kept in memory:
  // after a daemon restart a ready lease gets its SSH forward back, not its extra ports.
  void set_ports(const std::string& lease_id, const std::vector<int>& ports);

  // Whether this machine can reach a lease's guest at its address: ok, or why not. Set before
  // start(); unset, every guest can. A guest it cannot reach gets no forward (ssh_endpoint:
  // nullopt) and no tunnel (kConflict with the reason): a VM on another host behind that
  // host's own NAT or isolated network has that host's private address, which here may even
  // be another guest's.
  void set_reach(std::function<Status(const Lease&)> reach) { reach_ = std::move(reach); }

  // The SSH user CA guests of ready leases trust ("TYPE BASE64 COMMENT"); set before start().
  // Empty: no trust is written (certificates are not offered).
  void set_user_ca(std::string public_key);
  // Writes the lease's SSH trust into its guest through the agent: the CA as TrustedUserCAKeys
  // and lease_principal(id) as the only authorized principal (the tiny image's sshd_config
  // names both files). Done once per lease (at ready, and before its first certificate is
  // handed out, whichever comes first). Blocks on the guest agent: never call it on an I/O
  // thread. kUnavailable when the guest did not take it.
  Status install_trust(const Lease& lease);

  // Developer leases (purpose dev) with a forward: writes expiry_warning_text to every terminal
  // of the guest (its /dev/pts, as wall does) at the marks of expiry_warnings.h. Called by the
  // watcher every few seconds (exposed for tests). Blocks on the guest agent.
  void warn_expiring();

  // Handles one engine event (exposed for tests that drive it without the thread).
  void on_event(const Event& event);

  // Closes the forwards, and so the tunnels, of every lease that is no longer ready (ended,
  // gone, never ready) or whose VM address is no longer the one they relay to (reopened at the
  // new one), or that this machine can no longer reach. A lease whose host is unreachable keeps
  // them: its VM keeps its address until the lease ends (`lost` closes them). Reads the leases
  // of open forwards only; runs guest commands only for a changed VM. Called by the watcher
  // every sweep period (exposed for tests).
  void sweep();
  // How often the watcher sweeps; set before start(). Default kSweepPeriod.
  static constexpr std::chrono::seconds kSweepPeriod{10};
  void set_sweep_period(std::chrono::milliseconds period) { sweep_period_ = period; }

 private:
  void watch();
  void forget(const std::string& lease_id);  // its extra ports and trust, once it ended

  LeaseService& leases_;
  ForwardTable& forwards_;
  std::atomic<int> max_extra_ports_;  // a reload changes it (set_max_extra_ports)
  int guest_ssh_port_;
  const Clock& clock_;
  std::string user_ca_;                                   // set before start(), read-only after
  std::function<Status(const Lease&)> reach_;             // likewise
  std::chrono::milliseconds sweep_period_{kSweepPeriod};  // likewise
  Mutex mu_;  // never held across a guest command or a bind
  std::map<std::string, std::vector<int>> ports_ GUARDED_BY(mu_);  // lease id -> extra ports
  std::set<std::string> trusted_ GUARDED_BY(mu_);                  // leases whose guest has the CA
  std::map<std::string, ExpiryWarningState> warned_;               // watcher thread only
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace armhive
