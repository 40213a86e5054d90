#include "daemon/startup/startup_runner.h"

#include <nlohmann/json.hpp>

#include "api/startup_json.h"
#include "daemon/store/state_schema.h"

namespace armhive {

std::vector<std::string> startup_environment(const std::map<std::string, std::string>& env,
                                             const std::map<std::string, std::string>& secrets) {
  // What a root login on Debian has; the command's own variables replace these.
  std::map<std::string, std::string> all = {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"HOME", "/root"},
      {"USER", "root"},
      {"LOGNAME", "root"},
      {"SHELL", "/bin/sh"},
  };
  for (const auto& [name, value] : env) all[name] = value;
  for (const auto& [name, value] : secrets) all[name] = value;
  std::vector<std::string> out;
  out.reserve(all.size());
  for (const auto& [name, value] : all) out.push_back(name + "=" + value);
  return out;
}

namespace {

bool finished(const std::string& state) { return state != "waiting" && state != "running"; }

constexpr const char* kLostDetail =
    "armhived restarted before the command ran; its secret variables were held only in memory, "
    "so it cannot run (create a new lease)";

}  // namespace

StartupRunner::StartupRunner(LeaseService& leases, GuestAgent& agent, Database& db,
                             const Clock& clock, StartupRunnerOptions options, EventSink sink)
    : leases_(leases),
      agent_(agent),
      db_(db),
      clock_(clock),
      options_(options),
      sink_(std::move(sink)) {}

Result<std::unique_ptr<StartupRunner>> StartupRunner::open(LeaseService& leases, GuestAgent& agent,
                                                           Database& db, const Clock& clock,
                                                           StartupRunnerOptions options,
                                                           EventSink sink) {
  ARMHIVE_RETURN_IF_ERROR(db.migrate("startups", startup_schema_steps()));
  std::unique_ptr<StartupRunner> runner(
      new StartupRunner(leases, agent, db, clock, options, std::move(sink)));
  ARMHIVE_RETURN_IF_ERROR(runner->load());
  return runner;
}

StartupRunner::~StartupRunner() noexcept { stop(); }

Status StartupRunner::load() {
  ARMHIVE_ASSIGN_OR_RETURN(
      auto rows,
      db_.query(
          "SELECT lease_id, pid, status FROM startups WHERE state IN ('waiting', 'running')"));
  for (const SqlRow& row : rows) {
    const std::string id = sql_text(row[0]);
    Entry e;
    e.pid = sql_int(row[1]);
    auto j = nlohmann::json::parse(sql_text(row[2]), nullptr, false);
    if (Status s = parse_startup_status(j, "startup", e.status); !s.is_ok()) {
      return internal_error("database row cannot be read: " + s.message(), "startups " + id);
    }
    if (e.status.state == "waiting" && !e.status.secret_env.empty()) {
      // The values are gone with the previous process.
      StartupStatusDto lost = e.status;
      lost.state = "lost";
      lost.detail = kLostDetail;
      lost.ended_at = to_rfc3339(clock_.now());
      {
        MutexLock lock(mu_);
        active_[id] = std::move(e);
      }
      const bool release = lost.release_on_exit;
      finish(id, std::move(lost), "startup.lost", release);
      continue;
    }
    MutexLock lock(mu_);
    active_[id] = std::move(e);
  }
  return Status::ok();
}

Status StartupRunner::persist(const std::string& lease_id, const StartupStatusDto& status,
                              int64_t pid) {
  return db_.execute(
      "INSERT INTO startups (lease_id, state, pid, status) VALUES (?, ?, ?, ?) "
      "ON CONFLICT(lease_id) DO UPDATE SET state = excluded.state, pid = excluded.pid, "
      "status = excluded.status",
      {lease_id, status.state, pid, to_json(status).dump()});
}

Status StartupRunner::set_startup(const std::string& lease_id, const StartupRequestDto& command) {
  Entry e;
  e.status.argv = command.argv;
  e.status.release_on_exit = command.release_on_exit;
  for (const auto& [name, var] : command.env) {
    if (var.secret) {
      e.status.secret_env.push_back(name);
      e.secrets[name] = var.value;
    } else {
      e.status.env[name] = var.value;
    }
  }
  {
    MutexLock lock(mu_);
    if (active_.count(lease_id)) return Status::ok();
  }
  ARMHIVE_ASSIGN_OR_RETURN(auto existing,
                           db_.query("SELECT 1 FROM startups WHERE lease_id = ?", {lease_id}));
  if (!existing.empty()) return Status::ok();  // a retried create of a lease that has one
  ARMHIVE_RETURN_IF_ERROR(persist(lease_id, e.status, 0));
  MutexLock lock(mu_);
  active_.emplace(lease_id, std::move(e));
  return Status::ok();
}

std::optional<StartupStatusDto> StartupRunner::view(const std::string& lease_id) {
  {
    MutexLock lock(mu_);
    if (auto it = active_.find(lease_id); it != active_.end()) return it->second.status;
  }
  auto rows = db_.query("SELECT status FROM startups WHERE lease_id = ?", {lease_id});
  if (!rows.is_ok() || rows->empty()) return std::nullopt;
  StartupStatusDto s;
  auto j = nlohmann::json::parse(sql_text((*rows)[0][0]), nullptr, false);
  if (!parse_startup_status(j, "startup", s).is_ok()) return std::nullopt;
  return s;
}

void StartupRunner::emit(const std::string& type, const std::string& lease_id,
                         const std::string& detail) {
  if (sink_) sink_(StartupEvent{type, lease_id, detail});
}

void StartupRunner::finish(const std::string& lease_id, StartupStatusDto status,
                           const std::string& event, bool release) {
  // Persisted first: should the write fail, the entry stays active and the next pass retries
  // (the values of secrets are dropped either way below only once it is final).
  if (Status s = persist(lease_id, status, 0); !s.is_ok()) {
    emit("startup.persist_failed", lease_id, s.message());
    MutexLock lock(mu_);
    if (auto it = active_.find(lease_id); it != active_.end()) it->second.status = status;
    return;
  }
  {
    MutexLock lock(mu_);
    active_.erase(lease_id);
  }
  std::string detail = "state=" + status.state;
  if (status.exit_code) detail += " exit_code=" + std::to_string(*status.exit_code);
  if (status.signal != 0) detail += " signal=" + std::to_string(status.signal);
  if (!status.detail.empty()) detail += " (" + status.detail + ")";
  emit(event, lease_id, detail);
  if (release) {
    auto released = leases_.release_lease(lease_id);
    if (!released.is_ok()) {
      emit("startup.release_failed", lease_id, released.status().message());
    }
  }
}

void StartupRunner::step(const std::string& lease_id) {
  Entry e;
  {
    MutexLock lock(mu_);
    auto it = active_.find(lease_id);
    if (it == active_.end()) return;
    e = it->second;
  }
  if (finished(e.status.state)) {  // a final state whose write failed: retry it
    finish(lease_id, e.status, "startup." + e.status.state, false);
    return;
  }
  auto lease = leases_.get_lease(lease_id);
  if (!lease.is_ok()) {
    if (lease.status().code() != ErrorCode::kNotFound) return;  // try again next pass
    StartupStatusDto s = e.status;
    s.state = "not_run";
    s.detail = "the lease is gone";
    finish(lease_id, std::move(s), "startup.not_run", false);
    return;
  }
  const TimePoint now = clock_.now();
  if (is_terminal(lease->state) || lease->state == LeaseState::kReleasing) {
    StartupStatusDto s = e.status;
    s.ended_at = to_rfc3339(now);
    if (s.state == "running") {
      s.state = "exited";
      s.detail = "the lease ended while the command ran";
    } else {
      s.state = "not_run";
      s.detail = "the lease ended before it was ready";
    }
    const std::string event = "startup." + s.state;
    finish(lease_id, std::move(s), event, false);
    return;
  }
  if (lease->state != LeaseState::kReady) return;

  if (e.status.state == "waiting") {
    GuestExecRequest req;
    req.argv = e.status.argv;
    req.env = startup_environment(e.status.env, e.secrets);
    auto pid = agent_.exec_start(lease->vm_name, req);
    StartupStatusDto s = e.status;
    if (!pid.is_ok()) {
      s.state = "failed";
      s.ended_at = to_rfc3339(clock_.now());
      s.detail = "the guest agent could not start it: " + pid.status().message();
      finish(lease_id, s, "startup.failed", s.release_on_exit);
      return;
    }
    s.state = "running";
    s.started_at = to_rfc3339(clock_.now());
    {
      // Started: the values are the guest's now; this process forgets them.
      MutexLock lock(mu_);
      auto it = active_.find(lease_id);
      if (it == active_.end()) return;
      it->second.status = s;
      it->second.pid = *pid;
      it->second.secrets.clear();
    }
    if (Status st = persist(lease_id, s, *pid); !st.is_ok()) {
      emit("startup.persist_failed", lease_id, st.message());
    }
    emit("startup.started", lease_id,
         "vm=" + lease->vm_name + " pid=" + std::to_string(*pid) +
             " argv[0]=" + (s.argv.empty() ? "" : s.argv[0]));
    return;
  }

  // Running: has it exited? Asked at most every `poll`.
  const auto steady = std::chrono::steady_clock::now();
  if (steady < e.next_status) return;
  {
    MutexLock lock(mu_);
    if (auto it = active_.find(lease_id); it != active_.end()) {
      it->second.next_status = steady + options_.poll;
    }
  }
  auto status = agent_.exec_status(lease->vm_name, e.pid);
  if (!status.is_ok()) {
    if (status.status().code() != ErrorCode::kInvalidArgument) return;  // agent busy: retry
    // The agent no longer knows the pid (the guest rebooted or its agent restarted).
    StartupStatusDto s = e.status;
    s.state = "exited";
    s.ended_at = to_rfc3339(clock_.now());
    s.detail = "the guest agent lost track of the process: " + status.status().message();
    finish(lease_id, s, "startup.exited", s.release_on_exit);
    return;
  }
  if (!status->has_value()) return;
  const GuestExecResult& r = **status;
  StartupStatusDto s = e.status;
  s.state = "exited";
  s.ended_at = to_rfc3339(clock_.now());
  if (r.signal != 0) {
    s.signal = r.signal;
  } else {
    s.exit_code = r.exit_code;
  }
  finish(lease_id, s, "startup.exited", s.release_on_exit);
}

void StartupRunner::poll_once() {
  std::vector<std::string> ids;
  {
    MutexLock lock(mu_);
    for (const auto& [id, e] : active_) ids.push_back(id);
  }
  for (const std::string& id : ids) {
    if (stop_) return;
    step(id);
  }
}

void StartupRunner::start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { watch(); });
}

void StartupRunner::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void StartupRunner::watch() {
  uint64_t seq = 0;
  auto recent = leases_.events_since(0, std::chrono::milliseconds(0));
  if (!recent.empty()) seq = recent.back().seq;
  while (!stop_) {
    poll_once();
    // A lease event (ready, released) wakes the watcher before the poll interval ends.
    for (const Event& e : leases_.events_since(seq, options_.wake)) seq = std::max(seq, e.seq);
  }
}

}  // namespace armhive
