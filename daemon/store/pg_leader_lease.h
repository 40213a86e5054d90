#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/core/cluster_view.h"
#include "daemon/store/database.h"

namespace armhive {

// The leader lease of the armhived instances that share one PostgreSQL database (issue 36): one
// row (table `leader`, id 1) naming the holder, its epoch, its API URL and when its lease ends
// in the database's clock. Only the leader acts on the lab (libvirt, leases); the others wait
// to take over. LeaderTerm (daemon/core/leader_term.h) decides from the renewals whether this
// instance may act.
//
// Renewing is one statement: it takes the row when the holder is us or the holder's lease has
// ended, and leaves it otherwise. A new holder gets epoch + 1, and so does the same holder
// after its own lease had ended (it stopped acting then: a new term). Times are the database's
// (clock_timestamp()), so the instances' clocks never need to agree.
//
// `since` (step 2) is when the current epoch began: set when the epoch changes, kept by the
// holder's renewals (a term that began before the step existed gets the time of its first
// renewal after it).
//
// Membership (table `cluster_members`): each renewal, leader's and standby's alike, also
// records its instance (holder, API URL, role, started_at, last_contact, database clock) in one
// more statement, which deletes the rows of members silent for longer than
// kMemberSilenceLeases leases. A member that died thus shows a growing age until then.
// read_view() is GET /v1/cluster's reading of both tables.
//
// Fencing: PgDatabase::set_fence(holder, epoch) makes every write transaction of the store
// first lock this row FOR SHARE and check that it is still ours, with our epoch, unexpired. A
// stale leader's write then fails (kUnavailable) instead of landing after a takeover, and a
// takeover waits for the leader's writes in flight.
//
// Threading: renew() and release() from one election thread, on a connection of its own (a
// renewal must not wait behind the store's statements); set_url() from any.
class PgLeaderLease {
 public:
  struct Renewal {
    bool ours = false;
    int64_t epoch = 0;     // ours: our term's epoch; else the holder's
    std::string holder;    // who holds the lease now
    std::string url;       // the holder's API URL
    int64_t since_ms = 0;  // when the holder's epoch began (database clock)
    // The membership row's write: its failure is reported here, not as the renewal's (a
    // leader keeps its term over a row that only informs).
    Status membership;
  };

  // `db` must be a PostgreSQL database; migrates component "leader".
  static Result<std::unique_ptr<PgLeaderLease>> open(Database& db, std::string holder,
                                                     std::string url,
                                                     std::chrono::milliseconds lease);
  Result<Renewal> renew();
  // Ends our lease now (a clean stop): a standby takes over at its next renewal instead of
  // waiting for the lease to run out. Only our own term is touched.
  Status release(int64_t epoch);
  // Who leads and the members heard from within kMemberSilenceLeases * `lease`, from `db` (a
  // PostgreSQL database; any connection: a standby reads on its own). Not fenced: a read.
  static Result<ClusterView> read_view(Database& db, std::chrono::milliseconds lease);
  // The API URL the next renewals publish (the real one once the API listens). Thread-safe.
  void set_url(std::string url) EXCLUDES(mu_);

 private:
  PgLeaderLease(Database& db, std::string holder, std::string url, std::chrono::milliseconds lease)
      : db_(db), holder_(std::move(holder)), lease_(lease), url_(std::move(url)) {}
  std::string url() const EXCLUDES(mu_);
  Status record_member(const std::string& url, bool leading);
  Database& db_;
  const std::string holder_;
  const std::chrono::milliseconds lease_;
  mutable Mutex mu_;
  std::string url_ GUARDED_BY(mu_);
};

}  // namespace armhive
