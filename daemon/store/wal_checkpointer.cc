#include "daemon/store/wal_checkpointer.h"

#include <unistd.h>

namespace armhive {

Result<std::unique_ptr<WalCheckpointer>> WalCheckpointer::start(const std::string& path,
                                                                std::chrono::milliseconds period,
                                                                int max_wal_pages) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close(raw);
    return unavailable("cannot open database for checkpoints: " + msg, path);
  }
  // SQLite's own busy timeout sleeps 1, 2, 5, 10… ms between tries: a writer committing without
  // pause takes the lock back in its microseconds-long gaps, and a RESTART checkpoint would wait
  // for a whole second while the WAL grew on. Short, even tries catch those gaps.
  sqlite3_busy_handler(
      raw,
      [](void*, int tries) -> int {
        if (tries >= 5000) return 0;  // ~1 s: give up, the next period tries again
        usleep(200);
        return 1;
      },
      nullptr);
  // SQLite opens files lazily: until this connection has read the database it does not know the
  // file is in WAL mode, and a checkpoint would be a silent no-op.
  char* err = nullptr;
  if (sqlite3_exec(raw, "PRAGMA journal_mode=WAL", nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errmsg(raw);
    sqlite3_free(err);
    sqlite3_close(raw);
    return unavailable("cannot open database for checkpoints: " + msg, path);
  }
  std::unique_ptr<WalCheckpointer> c(new WalCheckpointer(raw, period, max_wal_pages));
  c->thread_ = std::thread([p = c.get()] { p->run(); });
  return c;
}

WalCheckpointer::~WalCheckpointer() noexcept {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  (void)checkpoint_once();
  sqlite3_close_v2(db_);
}

uint64_t WalCheckpointer::checkpoints() const {
  MutexLock lock(mu_);
  return checkpoints_;
}

uint64_t WalCheckpointer::restarts() const {
  MutexLock lock(mu_);
  return restarts_;
}

WalCheckpointer::Outcome WalCheckpointer::checkpoint_once() {
  int log_pages = 0;
  int done_pages = 0;
  int rc =
      sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log_pages, &done_pages);
  // SQLITE_BUSY: another checkpoint runs (or a reader holds the WAL); the next period tries
  // again.
  Outcome out{rc == SQLITE_OK && done_pages > 0, false};
  if (rc == SQLITE_OK && log_pages > max_wal_pages_) {
    rc =
        sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_RESTART, &log_pages, &done_pages);
    out.restarted = rc == SQLITE_OK;
  }
  return out;
}

void WalCheckpointer::run() {
  MutexLock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, period_, [this]() REQUIRES(mu_) { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    Outcome done = checkpoint_once();
    lock.lock();
    if (done.copied) ++checkpoints_;
    if (done.restarted) ++restarts_;
  }
}

}  // namespace armhive
