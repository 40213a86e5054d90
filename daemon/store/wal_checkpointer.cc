#include "daemon/store/wal_checkpointer.h"

namespace armhive {

Result<std::unique_ptr<WalCheckpointer>> WalCheckpointer::start(const std::string& path,
                                                                std::chrono::milliseconds period) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close(raw);
    return unavailable("cannot open database for checkpoints: " + msg, path);
  }
  sqlite3_busy_timeout(raw, 1000);
  // SQLite opens files lazily: until this connection has read the database it does not know the
  // file is in WAL mode, and a checkpoint would be a silent no-op.
  char* err = nullptr;
  if (sqlite3_exec(raw, "PRAGMA journal_mode=WAL", nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errmsg(raw);
    sqlite3_free(err);
    sqlite3_close(raw);
    return unavailable("cannot open database for checkpoints: " + msg, path);
  }
  std::unique_ptr<WalCheckpointer> c(new WalCheckpointer(raw, period));
  c->thread_ = std::thread([p = c.get()] { p->run(); });
  return c;
}

WalCheckpointer::~WalCheckpointer() noexcept {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  (void)checkpoint_once();
  sqlite3_close_v2(db_);
}

uint64_t WalCheckpointer::checkpoints() const {
  std::lock_guard lock(mu_);
  return checkpoints_;
}

bool WalCheckpointer::checkpoint_once() {
  int log_pages = 0;
  int done_pages = 0;
  int rc =
      sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log_pages, &done_pages);
  // SQLITE_BUSY: another checkpoint runs; the next period tries again.
  return rc == SQLITE_OK && done_pages > 0;
}

void WalCheckpointer::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, period_, [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    bool copied = checkpoint_once();
    lock.lock();
    if (copied) ++checkpoints_;
  }
}

}  // namespace armhive
