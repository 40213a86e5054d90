#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/core/leader_term.h"
#include "daemon/store/pg_database.h"
#include "daemon/store/pg_leader_lease.h"

namespace armhive {

// One armhived of several sharing a PostgreSQL database ([store] url): it waits until it holds
// the leader lease (daemon/store/pg_leader_lease.h), then keeps renewing it from a thread of
// its own, on a connection of its own. Only the leader acts on the lab.
//
// Losing the term — the lease not renewed in time (the database unreachable, this process
// paused) or another instance holding it — ends this process at once (exit status 75,
// EX_TEMPFAIL; systemd's Restart=on-failure starts it again, as a standby): a leader that
// cannot prove it leads must not call libvirt one more time, and stopping the engine cleanly
// would. The store's writes are fenced besides (PgDatabase::set_fence), so nothing this process
// still writes lands after a takeover. The VMs keep running; the new leader adopts them as a
// restarted armhived does.
//
// Threading: win() and the destructor run on the daemon's start/stop thread; two threads of
// its own renew and watch the term (mu_ guards what they share).
class LeaderElection {
 public:
  struct Options {
    std::string url;      // [store] url
    std::string holder;   // this instance, unique among those sharing the database
    std::string api_url;  // where this instance's API is, shown to the others
    std::chrono::milliseconds lease{std::chrono::seconds(10)};
  };
  // Sleeps up to the given time between tries; false when armhived is to stop instead.
  using Pause = std::function<bool(std::chrono::milliseconds)>;
  // Says what the wait is about ("standby: armhived@hc1 leads"), once per change.
  using Note = std::function<void(std::string_view)>;
  // Each renewal that found another instance leading (a standby's server points there).
  using Observe = std::function<void(const PgLeaderLease::Renewal&)>;

  // Renews until the lease is ours (kCancelled when `pause` says stop). Database errors while
  // waiting are logged and retried.
  static Result<std::unique_ptr<LeaderElection>> win(const Options& options, const Pause& pause,
                                                     const Note& note, const Observe& observe = {});
  // Starts the renewal thread; `on_lost` runs on it when the term ends (default: log, exit 75).
  void start(std::function<void(const std::string& why)> on_lost = {});
  // Stops renewing and releases the lease, so that a standby takes over at once.
  ~LeaderElection() noexcept;

  int64_t epoch() const { return epoch_; }
  // When this term's epoch began, in ms since the Unix epoch (the database's clock).
  int64_t since_ms() const { return since_ms_; }
  // The API URL the lease row shows the others, once the API listens (port 0: the real port).
  void set_api_url(std::string url) { lease_->set_url(std::move(url)); }
  const std::string& holder() const { return options_.holder; }

 private:
  LeaderElection(Options options, std::unique_ptr<PgDatabase> db,
                 std::unique_ptr<PgLeaderLease> lease, LeaderTerm term, int64_t epoch,
                 int64_t since_ms)
      : options_(std::move(options)),
        db_(std::move(db)),
        lease_(std::move(lease)),
        epoch_(epoch),
        since_ms_(since_ms),
        term_(term) {}
  void renew_loop();
  void deadline_loop(const std::function<void(const std::string&)>& on_lost);

  const Options options_;
  std::unique_ptr<PgDatabase> db_;
  std::unique_ptr<PgLeaderLease> lease_;
  const int64_t epoch_;
  const int64_t since_ms_;
  Mutex mu_;  // never held across a database call
  std::condition_variable_any wake_;
  LeaderTerm term_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::string lost_ GUARDED_BY(mu_);  // why the term ended, when another instance holds it
  // Renews every fifth of the lease; the other ends the process when the term runs out, even
  // while a renewal is blocked on the database.
  std::thread renewals_;
  std::thread deadline_;
};

}  // namespace armhive
