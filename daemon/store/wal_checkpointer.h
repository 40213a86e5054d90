#pragma once

#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/result.h"

namespace armhive {

// Checkpoints a WAL database from a thread and a connection of its own, so that no request
// pays for it. With SQLite's automatic checkpoint, the commit that crossed 1,000 WAL pages
// copied them into the database file and fdatasync'ed it while holding Database's mutex: the
// tail of the hand-out latency (BENCHMARKS.md, "Scale of the state"). A PASSIVE checkpoint
// runs beside readers and writers of other connections and never blocks them.
//
// Ownership: owns its sqlite3 connection and thread. Threading: start() and the destructor
// from the owner's thread; the worker touches only its own connection. The destructor wakes
// the worker, joins it, and runs a last checkpoint (noexcept).
class WalCheckpointer {
 public:
  static Result<std::unique_ptr<WalCheckpointer>> start(const std::string& path,
                                                        std::chrono::milliseconds period);
  ~WalCheckpointer() noexcept;
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  // Checkpoints that copied at least one page (for tests and metrics).
  uint64_t checkpoints() const;

 private:
  WalCheckpointer(sqlite3* db, std::chrono::milliseconds period) : db_(db), period_(period) {}
  void run();
  bool checkpoint_once();

  sqlite3* db_;
  std::chrono::milliseconds period_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;     // guarded by mu_
  uint64_t checkpoints_ = 0;  // guarded by mu_
  std::thread thread_;
};

}  // namespace armhive
