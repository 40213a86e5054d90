#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/bench/benchmark_service.h"
#include "daemon/bench/health_band.h"
#include "daemon/core/clock.h"
#include "daemon/core/health_series.h"
#include "daemon/core/lease.h"

namespace armhive {

struct HealthPoolSchedule {
  std::string pool;
  Seconds every{0};
  std::string suite = "compression";
  int runs_kept = 10;  // K, the baseline's window
  int band_mads = 3;   // k: the band is median ± k × MAD
};

struct HealthSchedulerOptions {
  std::string host;                       // the host the series belong to
  std::vector<HealthPoolSchedule> pools;  // those with every > 0
  std::string owner = "armhived-health";  // the leases' and benchmark runs' owner
  Seconds lease_ttl{std::chrono::hours(1)};
  // A due run finding no spare warm VM (or failing) waits this long before it looks again,
  // or the pool's `every` when that is shorter.
  Seconds postpone{std::chrono::minutes(10)};
  // A lease not ready, or a benchmark not finished, by then is given up (and released).
  Seconds lease_timeout{std::chrono::minutes(15)};
  Seconds run_timeout{std::chrono::minutes(30)};
  size_t min_history = 5;  // results needed before a verdict
  // How often the thread of start() calls tick() (real time).
  std::chrono::milliseconds tick_period{std::chrono::seconds(5)};
};

// The short benchmark request of a health run of `suite` (a few seconds of guest time) and the
// one figure of its report the time series follows (a key of extract_benchmark_metrics).
BenchmarkRequest health_benchmark_request(const std::string& suite);
struct HealthFigure {
  std::string key;
  std::string label;
  std::string unit;
  bool higher_is_better = true;
  double value = 0;
};
Result<HealthFigure> health_figure(const std::string& suite, const nlohmann::json& report);

// Health benchmarks (daemon/bench/README.md "Health benchmarks"): every `every` a pool's spare
// warm VM is leased, the short suite runs on it through the BenchmarkService, the headline
// figure is stored in the host's series and checked against the band of the host's earlier
// results (median − k × MAD of the last K within the band), and the lease is released. A run
// never takes a VM a CI job waits for: without a spare warm VM (none warm, or leases pending)
// it is postponed, and an event says so.
//
// Each pool is a small state machine (idle → leasing → benchmarking → idle) advanced by
// tick(), which never waits: it makes one non-blocking call per step (create, get, start,
// release). Time comes from the injected Clock, so tests drive it with a ManualClock.
//
// Events (pool_event): health.postponed, health.started, health.result, health.failed,
// host.degraded (with the figure and the band), host.recovered.
//
// Threading: tick() from one thread at a time (start()'s thread, or a test's); latest() from
// any thread. Borrows the source, benchmarks, store and clock (they must outlive it).
class HealthScheduler {
 public:
  HealthScheduler(HealthSchedulerOptions options, HealthVmSource& source,
                  BenchmarkService& benchmarks, HealthSeriesStore& store, const Clock& clock);
  ~HealthScheduler();
  HealthScheduler(const HealthScheduler&) = delete;
  HealthScheduler& operator=(const HealthScheduler&) = delete;

  // Reads the newest stored results (the host's marks survive a restart) and schedules each
  // pool's next run `every` after its last one (at once when it has none).
  Status load();
  void tick();
  // A thread calling tick() every tick_period until stop() (or the destructor).
  void start();
  void stop();

  std::vector<HealthResult> latest() const;

 private:
  enum class Phase { kIdle, kLeasing, kBenchmarking };
  struct PoolRun {
    HealthPoolSchedule schedule;
    Phase phase = Phase::kIdle;
    TimePoint next_at{};
    TimePoint deadline{};
    std::string lease_id;
    std::string run_id;
  };

  void step(PoolRun& p, TimePoint now);
  void begin(PoolRun& p, TimePoint now);
  void start_benchmark(PoolRun& p, const Lease& lease, TimePoint now);
  void finish(PoolRun& p, const BenchmarkRun& run, TimePoint now);
  void give_up(PoolRun& p, TimePoint now, const std::string& why);
  Seconds retry_delay(const PoolRun& p) const;  // min(postpone, every)
  void record(const HealthResult& result);

  HealthSchedulerOptions options_;
  HealthVmSource& source_;
  BenchmarkService& benchmarks_;
  HealthSeriesStore& store_;
  const Clock& clock_;
  std::vector<PoolRun> pools_;  // tick()'s thread only

  mutable Mutex mu_;
  std::map<std::string, HealthResult> latest_ GUARDED_BY(mu_);  // by pool
  bool stopping_ GUARDED_BY(mu_) = false;
  std::condition_variable_any wake_;
  std::thread thread_;
};

}  // namespace armhive
