#include "daemon/bench/health_scheduler.h"

#include <algorithm>
#include <cmath>

#include "daemon/bench/report.h"
#include "daemon/bench/svg.h"

namespace armhive {
namespace {

std::string_view verdict_name(HealthVerdict v) {
  switch (v) {
    case HealthVerdict::kInsufficientHistory:
      return "insufficient_history";
    case HealthVerdict::kWithinBand:
      return "within_band";
    case HealthVerdict::kDegraded:
      return "degraded";
  }
  return "insufficient_history";
}

std::string duration_text(Seconds s) {
  if (s.count() < 60) return std::to_string(s.count()) + " s";
  return std::to_string(s.count() / 60) + " min";
}

}  // namespace

BenchmarkRequest health_benchmark_request(const std::string& suite) {
  BenchmarkRequest r;
  r.suites = {suite};
  r.network.streams = 1;
  r.network.duration_s = 3;
  r.network.both_directions = false;
  r.compression.repeats = 3;
  r.compression.multi_thread = false;
  r.memory.iterations = 3;
  r.memory.repeats = 1;
  r.memory.multi_thread = false;
  r.crypto.repeats = 1;
  r.crypto.multi_thread = false;
  r.storage.file_mib = 32;
  r.storage.random_seconds = 2;
  r.storage.repeats = 1;
  return r;
}

Result<HealthFigure> health_figure(const std::string& suite, const nlohmann::json& report) {
  // One headline figure per suite: single-threaded where there is a choice, so that the
  // figure does not move with the number of vCPUs.
  auto wanted = [&suite](const std::string& key) {
    if (suite == kSuiteNetwork) {
      return key.starts_with("network.host-to-guest.mtu") && key.ends_with(".gbit_s");
    }
    if (suite == kSuiteCompression) return key == "compression.guest.t1.compress_mb_s";
    if (suite == kSuiteMemory) return key == "memory.guest.t1.triad_mb_s";
    if (suite == kSuiteCrypto) return key == "crypto.guest.p1.rsa2048_sign_per_s";
    if (suite == kSuiteStorage) return key == "storage.guest.seq_read.mb_s";
    return false;
  };
  for (const BenchMetric& m : extract_benchmark_metrics(report)) {
    if (!wanted(m.key)) continue;
    if (!std::isfinite(m.value) || m.value <= 0) {
      return internal_error("the health figure " + m.key + " is not a positive number", suite);
    }
    return HealthFigure{m.key, m.label, m.unit, m.higher_is_better, m.value};
  }
  return internal_error("the report has no " + suite + " figure to follow", suite);
}

HealthScheduler::HealthScheduler(HealthSchedulerOptions options, HealthVmSource& source,
                                 BenchmarkService& benchmarks, HealthSeriesStore& store,
                                 const Clock& clock)
    : options_(std::move(options)),
      source_(source),
      benchmarks_(benchmarks),
      store_(store),
      clock_(clock) {
  for (const HealthPoolSchedule& s : options_.pools) {
    if (s.every.count() <= 0) continue;
    PoolRun p;
    p.schedule = s;
    p.next_at = clock_.now();
    pools_.push_back(std::move(p));
  }
}

HealthScheduler::~HealthScheduler() { stop(); }

Status HealthScheduler::load() {
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<HealthResult> latest, store_.latest());
  {
    MutexLock lock(mu_);
    for (HealthResult& r : latest) {
      if (r.host != options_.host) continue;
      for (PoolRun& p : pools_) {
        if (p.schedule.pool == r.pool) p.next_at = r.at + p.schedule.every;
      }
      latest_[r.pool] = std::move(r);
    }
  }
  source_.host_health(this->latest());
  return Status::ok();
}

void HealthScheduler::tick() {
  const TimePoint now = clock_.now();
  for (PoolRun& p : pools_) step(p, now);
}

void HealthScheduler::step(PoolRun& p, TimePoint now) {
  switch (p.phase) {
    case Phase::kIdle:
      if (now >= p.next_at) begin(p, now);
      return;
    case Phase::kLeasing: {
      auto lease = source_.get_lease(p.lease_id);
      if (!lease.is_ok())
        return give_up(p, now, "lease " + p.lease_id + ": " + lease.status().to_string());
      if (lease->state == LeaseState::kReady) return start_benchmark(p, *lease, now);
      if (is_terminal(lease->state)) {
        return give_up(p, now,
                       "lease " + p.lease_id + " ended " + std::string(to_string(lease->state)) +
                           ": " + lease->reason);
      }
      if (now >= p.deadline) {
        return give_up(
            p, now,
            "lease " + p.lease_id + " not ready within " + duration_text(options_.lease_timeout));
      }
      return;
    }
    case Phase::kBenchmarking: {
      auto run = benchmarks_.get(p.run_id);
      if (!run.is_ok()) {
        return give_up(p, now, "benchmark " + p.run_id + ": " + run.status().to_string());
      }
      if (run->state == BenchmarkState::kSucceeded || run->state == BenchmarkState::kFailed) {
        return finish(p, *run, now);
      }
      if (now >= p.deadline) {
        return give_up(p, now,
                       "benchmark " + p.run_id + " not finished within " +
                           duration_text(options_.run_timeout));
      }
      return;
    }
  }
}

void HealthScheduler::begin(PoolRun& p, TimePoint now) {
  const std::string& pool = p.schedule.pool;
  std::optional<PoolStatus> st = source_.pool_status(pool);
  if (!st) {
    p.next_at = now + p.schedule.every;
    source_.pool_event(pool, "health.failed", "pool " + pool + " is not configured");
    return;
  }
  // A spare VM: a warm one that no waiting lease is about to take.
  if (st->warm <= st->pending_leases) {
    p.next_at = now + retry_delay(p);
    source_.pool_event(pool, "health.postponed",
                       "no spare warm VM in pool " + pool + " (" + std::to_string(st->warm) +
                           " warm, " + std::to_string(st->pending_leases) +
                           " leases waiting): the " + p.schedule.suite + " health run waits " +
                           duration_text(retry_delay(p)));
    return;
  }
  LeaseRequest req;
  req.pool = pool;
  req.owner = options_.owner;
  req.ttl = options_.lease_ttl;
  req.labels = {{"armhive-health", p.schedule.suite}};
  auto lease = source_.create_lease(req);
  if (!lease.is_ok()) {
    p.next_at = now + retry_delay(p);
    source_.pool_event(pool, "health.failed",
                       "leasing a VM of pool " + pool + ": " + lease.status().to_string() +
                           "; next try in " + duration_text(retry_delay(p)));
    return;
  }
  p.lease_id = lease->id;
  p.phase = Phase::kLeasing;
  p.deadline = now + options_.lease_timeout;
  if (lease->state == LeaseState::kReady) start_benchmark(p, *lease, now);
}

void HealthScheduler::start_benchmark(PoolRun& p, const Lease& lease, TimePoint now) {
  BenchmarkRequest req = health_benchmark_request(p.schedule.suite);
  req.lease_id = lease.id;
  req.owner = options_.owner;
  auto run = benchmarks_.start(req);
  if (!run.is_ok()) return give_up(p, now, "starting the benchmark: " + run.status().to_string());
  p.run_id = run->id;
  p.phase = Phase::kBenchmarking;
  p.deadline = now + options_.run_timeout;
  source_.pool_event(p.schedule.pool, "health.started",
                     p.schedule.suite + " health run " + run->id + " on " + lease.vm_name +
                         " (lease " + lease.id + ")");
}

void HealthScheduler::finish(PoolRun& p, const BenchmarkRun& run, TimePoint now) {
  const std::string pool = p.schedule.pool;
  if (run.state != BenchmarkState::kSucceeded) {
    return give_up(p, now, "benchmark " + run.id + " failed: " + run.error);
  }
  auto figure = health_figure(p.schedule.suite, run.report);
  if (!figure.is_ok()) return give_up(p, now, figure.status().message());
  // The baseline: this host's earlier results of the figure that were not degraded, so that
  // a host that stays slow is not slowly accepted as the new normal.
  auto earlier = store_.recent(options_.host, pool, figure->key,
                               static_cast<size_t>(std::max(p.schedule.runs_kept, 1)) * 4);
  if (!earlier.is_ok()) return give_up(p, now, "reading the series: " + earlier.status().message());
  std::vector<double> history;
  for (const HealthResult& r : *earlier) {
    if (r.verdict != "degraded") history.push_back(r.value);
  }
  HealthBandOptions band;
  band.window = static_cast<size_t>(std::max(p.schedule.runs_kept, 1));
  band.min_history = std::min(options_.min_history, band.window);
  band.mad_multiplier = p.schedule.band_mads;
  HealthCheck check =
      check_health(figure->key, history, figure->value, figure->higher_is_better, band);

  HealthResult r;
  r.at = now;
  r.host = options_.host;
  r.pool = pool;
  r.suite = p.schedule.suite;
  r.figure = figure->key;
  r.label = figure->label;
  r.unit = figure->unit;
  r.higher_is_better = figure->higher_is_better;
  r.value = figure->value;
  r.run_id = run.id;
  r.verdict = std::string(verdict_name(check.verdict));
  if (check.band) {
    r.band = HealthBandValues{check.band->n, check.band->median, check.band->mad, check.band->low,
                              check.band->high};
  }
  r.reason = check.reason;
  auto id = store_.append(r);
  if (!id.is_ok()) {
    source_.pool_event(pool, "health.failed", "storing the result: " + id.status().to_string());
  } else {
    r.id = *id;
  }
  bool was_degraded = false;
  {
    MutexLock lock(mu_);
    auto it = latest_.find(pool);
    was_degraded = it != latest_.end() && it->second.verdict == "degraded";
  }
  record(r);
  source_.pool_event(pool, "health.result",
                     svg_num(r.value, 2) + " " + r.unit + ", " + r.verdict + ": " + r.reason +
                         " (run " + run.id + ")");
  if (r.verdict == "degraded") {
    source_.pool_event(pool, "host.degraded", "host " + options_.host + ": " + r.reason);
  } else if (was_degraded && r.verdict == "within_band") {
    source_.pool_event(pool, "host.recovered", "host " + options_.host + ": " + r.reason);
  }
  if (Status s = source_.release_lease(p.lease_id); !s.is_ok()) {
    source_.pool_event(pool, "health.failed",
                       "releasing lease " + p.lease_id + ": " + s.to_string());
  }
  p.phase = Phase::kIdle;
  p.lease_id.clear();
  p.run_id.clear();
  p.next_at = now + p.schedule.every;
}

Seconds HealthScheduler::retry_delay(const PoolRun& p) const {
  // A schedule never waits longer than its own interval to look again: a pool checked every
  // 2 min does not skip five runs because its VM was still booting.
  return std::min(options_.postpone, p.schedule.every);
}

void HealthScheduler::give_up(PoolRun& p, TimePoint now, const std::string& why) {
  const std::string& pool = p.schedule.pool;
  std::string detail = p.schedule.suite + " health run: " + why;
  if (!p.lease_id.empty()) {
    if (Status s = source_.release_lease(p.lease_id);
        !s.is_ok() && s.code() != ErrorCode::kNotFound) {
      detail += "; releasing lease " + p.lease_id + ": " + s.to_string();
    }
  }
  source_.pool_event(pool, "health.failed",
                     detail + "; next run in " + duration_text(retry_delay(p)));
  p.phase = Phase::kIdle;
  p.lease_id.clear();
  p.run_id.clear();
  p.next_at = now + retry_delay(p);
}

void HealthScheduler::record(const HealthResult& result) {
  {
    MutexLock lock(mu_);
    latest_[result.pool] = result;
  }
  source_.host_health(latest());
}

std::vector<HealthResult> HealthScheduler::latest() const {
  MutexLock lock(mu_);
  std::vector<HealthResult> out;
  for (const auto& [pool, r] : latest_) out.push_back(r);
  return out;
}

void HealthScheduler::start() {
  {
    MutexLock lock(mu_);
    if (thread_.joinable() || pools_.empty()) return;
    stopping_ = false;
  }
  thread_ = std::thread([this] {
    for (;;) {
      tick();
      MutexLock lock(mu_);
      wake_.wait_for(lock, options_.tick_period, [&]() REQUIRES(mu_) { return stopping_; });
      if (stopping_) return;
    }
  });
}

void HealthScheduler::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace armhive
