#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/metrics.h"
#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/core/clock.h"
#include "daemon/core/event_throttle.h"
#include "daemon/store/database.h"

namespace armhive {

// One row of the audit log.
struct AuditEntry {
  int64_t id = 0;
  TimePoint at;
  std::string actor;
  std::string action;
  std::string lease_id;
  std::string detail;
};

struct AuditOptions {
  // Rows older than this are deleted ([audit] keep); 0 keeps them for ever.
  Seconds keep{90LL * 24 * 3600};
  Seconds prune_every{3600};  // how often the writer thread prunes
  // Strangers' entries waiting for the writer; past it the oldest are dropped (counted in
  // armhive_audit_dropped_total and in one "audit.dropped" row).
  size_t queue_capacity = 4096;
  EventThrottleOptions strangers;  // what record_stranger() admits
};

// The audit log (table audit): who did what, newest first. Two ways in:
//
// - record(): an action of an authenticated caller or of armhived itself (lease create, exec,
//   a forward opened), written synchronously, never dropped or throttled.
// - record_stranger(): what anyone who reaches a public port can cause without a token (a
//   request refused on a public route, a badly signed webhook). Throttled per (action,
//   source) by an EventThrottle, so a flood writes a few rows and one summary row a minute
//   ("1995 more http.refused from 1 source in 60 s ..."), and queued without blocking: the
//   writer thread writes the queue in one transaction at a time, off the request path and off
//   the I/O threads. The queue is bounded: when full the oldest entry is dropped and counted.
//
// Retention: rows older than `keep` are deleted every `prune_every` by the writer thread, so
// the table does not grow for ever beside the leases (which share SQLite's one writer).
//
// Ownership: borrows the Database and Clock (which outlive it) and the Metrics (nullable);
// owns the writer thread. Threading: every method is thread-safe; record_stranger() never
// blocks on SQLite. flush() takes the queue under mu_ and writes it after releasing it, so
// two flushes at once (the writer's and a test's) each write what they took.
class AuditLog {
 public:
  // Applies the "audit" schema migrations (table audit(at, actor, action, lease_id, detail)).
  static Result<std::unique_ptr<AuditLog>> open(Database& db, const Clock& clock,
                                                AuditOptions options = {},
                                                Metrics* metrics = nullptr);
  ~AuditLog() noexcept;  // stop()
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  Status record(std::string_view actor, std::string_view action, std::string_view lease_id,
                std::string_view detail = {});
  // Queues the entry when the throttle admits (action, source); returns whether it did. A
  // caller also skips its own log line or event for an entry that was not admitted: the
  // summary row stands for it. `source` is the address that caused it (no port).
  bool record_stranger(std::string_view actor, std::string_view action, std::string_view source,
                       std::string_view lease_id, std::string_view detail) EXCLUDES(mu_);

  // Starts the writer thread (the queue as entries arrive, the summaries due once a second,
  // prune() every prune_every). Without it, flush() and prune() run only when called (tests).
  void start() EXCLUDES(mu_);
  // Stops the writer thread after a last flush(). Idempotent.
  void stop() EXCLUDES(mu_);
  // Writes the queued entries, the summaries whose window has ended by the clock's now, and an
  // "audit.dropped" row when entries were dropped since the last flush.
  Status flush() EXCLUDES(mu_);
  // Deletes the rows older than `keep` (by the clock); returns how many.
  Result<int64_t> prune();

  // Newest first; `lease_id` empty: all leases.
  Result<std::vector<AuditEntry>> recent(size_t limit, const std::string& lease_id = {});

 private:
  AuditLog(Database& db, const Clock& clock, AuditOptions options, Metrics* metrics);
  void run() EXCLUDES(mu_);

  Database& db_;
  const Clock& clock_;
  const AuditOptions options_;
  Metrics* const metrics_;
  EventThrottle strangers_;

  Mutex mu_;  // the queue and the writer's state; never held across SQLite
  std::deque<AuditEntry> queue_ GUARDED_BY(mu_);
  uint64_t dropped_ GUARDED_BY(mu_) = 0;  // since the last flush
  bool stopping_ GUARDED_BY(mu_) = false;
  std::condition_variable_any wake_;
  std::thread writer_;  // started and joined by start()/stop() (one owner thread)
};

}  // namespace armhive
