#include "daemon/store/audit_log.h"

#include <chrono>

#include "daemon/store/state_schema.h"

namespace armhive {
namespace {

const std::vector<std::string> kAuditSteps = {
    "CREATE TABLE IF NOT EXISTS audit ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " at INTEGER NOT NULL,"
    " actor TEXT NOT NULL,"
    " action TEXT NOT NULL,"
    " lease_id TEXT NOT NULL DEFAULT '',"
    " detail TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX IF NOT EXISTS audit_lease ON audit(lease_id, id)",
    // Retention (prune): the oldest rows found by time.
    "CREATE INDEX IF NOT EXISTS audit_at ON audit(at)",
};

constexpr const char* kInsert =
    "INSERT INTO audit (at, actor, action, lease_id, detail) VALUES (?, ?, ?, ?, ?)";

}  // namespace

const std::vector<std::string>& audit_schema_steps() { return kAuditSteps; }

Result<std::unique_ptr<AuditLog>> AuditLog::open(Database& db, const Clock& clock,
                                                 AuditOptions options, Metrics* metrics) {
  ARMHIVE_RETURN_IF_ERROR(db.migrate("audit", kAuditSteps));
  if (metrics != nullptr) {
    metrics->describe_counter(
        "armhive_audit_suppressed_total",
        "Audit entries of unauthenticated sources not written one by one "
        "(rate limited; one summary row a minute stands for them), by action");
    metrics->describe_counter("armhive_audit_dropped_total",
                              "Audit entries of unauthenticated sources dropped because the "
                              "audit queue was full");
  }
  return std::unique_ptr<AuditLog>(new AuditLog(db, clock, options, metrics));
}

AuditLog::AuditLog(Database& db, const Clock& clock, AuditOptions options, Metrics* metrics)
    : db_(db), clock_(clock), options_(options), metrics_(metrics), strangers_(options.strangers) {}

AuditLog::~AuditLog() noexcept { stop(); }

Status AuditLog::record(std::string_view actor, std::string_view action, std::string_view lease_id,
                        std::string_view detail) {
  return db_.execute(kInsert, {to_unix_ms(clock_.now()), std::string(actor), std::string(action),
                               std::string(lease_id), std::string(detail)});
}

bool AuditLog::record_stranger(std::string_view actor, std::string_view action,
                               std::string_view source, std::string_view lease_id,
                               std::string_view detail) {
  const TimePoint now = clock_.now();
  if (!strangers_.admit(action, source, now)) {
    if (metrics_ != nullptr) {
      metrics_->inc("armhive_audit_suppressed_total", {{"action", std::string(action)}});
    }
    return false;
  }
  bool dropped = false;
  {
    MutexLock lock(mu_);
    if (queue_.size() >= options_.queue_capacity) {
      queue_.pop_front();
      ++dropped_;
      dropped = true;
    }
    queue_.push_back({0, now, std::string(actor), std::string(action), std::string(lease_id),
                      std::string(detail)});
  }
  if (dropped && metrics_ != nullptr) metrics_->inc("armhive_audit_dropped_total");
  wake_.notify_one();
  return true;
}

Status AuditLog::flush() {
  std::deque<AuditEntry> batch;
  uint64_t dropped = 0;
  {
    MutexLock lock(mu_);
    batch.swap(queue_);
    dropped = dropped_;
    dropped_ = 0;
  }
  const TimePoint now = clock_.now();
  for (const ThrottleSummary& s : strangers_.due(now)) {
    batch.push_back({0, s.window_start + s.window, "armhived", s.kind, "", s.text()});
  }
  if (dropped > 0) {
    batch.push_back({0, now, "armhived", "audit.dropped", "",
                     std::to_string(dropped) +
                         " audit entries of unauthenticated sources were dropped: the audit "
                         "queue of " +
                         std::to_string(options_.queue_capacity) + " was full"});
  }
  if (batch.empty()) return Status::ok();
  return db_.transaction([&batch](Database::Tx& tx) -> Status {
    for (const AuditEntry& e : batch) {
      ARMHIVE_RETURN_IF_ERROR(
          tx.execute(kInsert, {to_unix_ms(e.at), e.actor, e.action, e.lease_id, e.detail}));
    }
    return Status::ok();
  });
}

Result<int64_t> AuditLog::prune() {
  if (options_.keep.count() <= 0) return int64_t{0};
  const int64_t oldest = to_unix_ms(clock_.now() - options_.keep);
  int64_t deleted = 0;
  ARMHIVE_RETURN_IF_ERROR(db_.transaction([&](Database::Tx& tx) -> Status {
    ARMHIVE_RETURN_IF_ERROR(tx.execute("DELETE FROM audit WHERE at < ?", {oldest}));
    deleted = tx.changes();
    return Status::ok();
  }));
  return deleted;
}

void AuditLog::start() {
  {
    MutexLock lock(mu_);
    stopping_ = false;
  }
  if (!writer_.joinable()) writer_ = std::thread([this] { run(); });
}

void AuditLog::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
  (void)flush();  // what was queued after the writer's last pass
}

void AuditLog::run() {
  using SteadyClock = std::chrono::steady_clock;
  // Pruned at once (a daemon restarted after a long stop has a backlog) and then periodically.
  SteadyClock::time_point next_prune = SteadyClock::now();
  for (;;) {
    if (SteadyClock::now() >= next_prune) {
      (void)prune();
      next_prune = SteadyClock::now() + options_.prune_every;
    }
    (void)flush();
    MutexLock lock(mu_);
    // Woken by new entries (what arrives while a flush runs is the next batch), and once a
    // second for the summaries that come due.
    wake_.wait_for(lock, std::chrono::seconds(1),
                   [this]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
  }
}

Result<std::vector<AuditEntry>> AuditLog::recent(size_t limit, const std::string& lease_id) {
  std::string sql = "SELECT id, at, actor, action, lease_id, detail FROM audit";
  std::vector<SqlValue> params;
  if (!lease_id.empty()) {
    sql += " WHERE lease_id = ?";
    params.emplace_back(lease_id);
  }
  sql += " ORDER BY id DESC LIMIT ?";
  params.emplace_back(static_cast<int64_t>(limit));
  ARMHIVE_ASSIGN_OR_RETURN(auto rows, db_.query(sql, params));
  std::vector<AuditEntry> out;
  for (const auto& r : rows) {
    AuditEntry e;
    e.id = sql_int(r[0]);
    e.at = from_unix_ms(sql_int(r[1]));
    e.actor = sql_text(r[2]);
    e.action = sql_text(r[3]);
    e.lease_id = sql_text(r[4]);
    e.detail = sql_text(r[5]);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace armhive
