#pragma once

#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <string>
#include <thread>

#include "base/result.h"
#include "base/thread_annotations.h"

namespace armhive {

// Checkpoints a WAL database from a thread and a connection of its own, so that no request
// pays for it. With SQLite's automatic checkpoint, the commit that crossed 1,000 WAL pages
// copied them into the database file and fdatasync'ed it while holding Database's mutex: the
// tail of the hand-out latency (BENCHMARKS.md, "Scale of the state"). A PASSIVE checkpoint
// runs beside readers and writers of other connections and never blocks them.
//
// PASSIVE checkpoints alone do not bound the WAL: SQLite rewinds it only when a writer
// begins while every frame has been copied, which under a steady stream of commits almost never
// happens, so the file grew without bound (870 MB in 15 s of 1,500 POST /v1/leases per second;
// BENCHMARKS.md, "Open loop"). Once the WAL holds more than `max_wal_pages`, the
// checkpointer runs a RESTART checkpoint: it waits (up to ~1 s) for the writer of the moment,
// copies what is left and rewinds the WAL, so its file stays near that size. Writers wait for
// that one checkpoint only; below the cap nothing blocks them.
//
// Ownership: owns its sqlite3 connection and thread. Threading: start() and the destructor
// from the owner's thread; the worker touches only its own connection. The destructor wakes
// the worker, joins it, and runs a last checkpoint (noexcept).
class WalCheckpointer {
 public:
  static constexpr int kDefaultMaxWalPages = 16384;  // 64 MiB of 4 KiB pages

  static Result<std::unique_ptr<WalCheckpointer>> start(const std::string& path,
                                                        std::chrono::milliseconds period,
                                                        int max_wal_pages = kDefaultMaxWalPages);
  ~WalCheckpointer() noexcept;
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  // Checkpoints that copied at least one page, and those that rewound the WAL (for tests and
  // metrics).
  uint64_t checkpoints() const EXCLUDES(mu_);
  uint64_t restarts() const EXCLUDES(mu_);

 private:
  struct Outcome {
    bool copied = false;
    bool restarted = false;
  };
  WalCheckpointer(sqlite3* db, std::chrono::milliseconds period, int max_wal_pages)
      : db_(db), period_(period), max_wal_pages_(max_wal_pages) {}
  void run() EXCLUDES(mu_);
  Outcome checkpoint_once();

  sqlite3* db_;
  std::chrono::milliseconds period_;
  int max_wal_pages_;
  mutable Mutex mu_;
  std::condition_variable_any wake_;
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t checkpoints_ GUARDED_BY(mu_) = 0;
  uint64_t restarts_ GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace armhive
