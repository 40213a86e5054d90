#include "daemon/bench/health_scheduler.h"

#include <catch2/catch.hpp>
#include <map>

#include "tests/support/fake_health_store.h"
#include "tests/support/manual_clock.h"

namespace armhive {
namespace {

using std::chrono::hours;
using std::chrono::minutes;

struct RecordedEvent {
  std::string pool, type, detail;
};

// The engine as the scheduler sees it: pool counts the test sets, leases ready at once (a warm
// hand-out) or after mark_ready(), every call recorded.
class FakeVmSource final : public HealthVmSource {
 public:
  std::optional<PoolStatus> pool_status(const std::string& pool) override {
    if (pool != "ci") return std::nullopt;
    PoolStatus s;
    s.config.name = pool;
    s.warm = warm;
    s.pending_leases = pending;
    return s;
  }
  Result<Lease> create_lease(const LeaseRequest& request) override {
    requests.push_back(request);
    Lease l;
    l.id = "l-" + std::to_string(requests.size());
    l.pool = request.pool;
    l.owner = request.owner;
    l.vm_name = "armhive-vm-" + std::to_string(requests.size());
    l.state = handout_ready ? LeaseState::kReady : LeaseState::kProvisioning;
    leases[l.id] = l;
    return l;
  }
  Result<Lease> get_lease(const std::string& id) override {
    auto it = leases.find(id);
    if (it == leases.end()) return not_found("no lease " + id);
    return it->second;
  }
  Status release_lease(const std::string& id) override {
    released.push_back(id);
    leases[id].state = LeaseState::kReleased;
    return Status::ok();
  }
  void pool_event(const std::string& pool, const std::string& type,
                  const std::string& detail) override {
    events.push_back({pool, type, detail});
  }
  void host_health(const std::vector<HealthResult>& latest) override { health = latest; }

  bool has_event(const std::string& type) const {
    for (const auto& e : events)
      if (e.type == type) return true;
    return false;
  }
  const RecordedEvent* last_event(const std::string& type) const {
    for (auto it = events.rbegin(); it != events.rend(); ++it)
      if (it->type == type) return &*it;
    return nullptr;
  }

  int warm = 1;
  int pending = 0;
  bool handout_ready = true;
  std::vector<LeaseRequest> requests;
  std::map<std::string, Lease> leases;
  std::vector<std::string> released;
  std::vector<RecordedEvent> events;
  std::vector<HealthResult> health;
};

// Runs finish when the test says, with the zstd figure the test chose.
class FakeBenchmarks final : public BenchmarkService {
 public:
  Result<BenchmarkRun> start(const BenchmarkRequest& request) override {
    started.push_back(request);
    BenchmarkRun r;
    r.id = "b-" + std::to_string(started.size());
    r.lease_id = request.lease_id;
    r.request = request;
    runs[r.id] = r;
    return r;
  }
  Result<BenchmarkRun> get(const std::string& id) override {
    auto it = runs.find(id);
    if (it == runs.end()) return not_found("no run " + id);
    return it->second;
  }
  std::vector<BenchmarkRun> list(const BenchmarkFilter&) override { return {}; }
  Result<std::string> report_html(const std::vector<std::string>&) override { return {""}; }
  Result<std::string> report_csv(const std::vector<std::string>&) override { return {""}; }
  Result<nlohmann::json> compare(const std::vector<std::string>&) override {
    return nlohmann::json::object();
  }

  // Finishes the newest run with a compress figure of `mb_s`.
  void finish_last(double mb_s) {
    BenchmarkRun& r = runs["b-" + std::to_string(started.size())];
    r.state = BenchmarkState::kSucceeded;
    auto spread = [](double v) {
      return nlohmann::json{{"median", v},   {"min", v},  {"max", v}, {"mean", v},
                            {"stddev", 0.0}, {"cv", 0.0}, {"n", 3},   {"samples", {v, v, v}}};
    };
    r.report = {{"compression",
                 {{"guest",
                   {{{"threads", 1},
                     {"ratio", 2.5},
                     {"compress_mb_s", spread(mb_s)},
                     {"decompress_mb_s", spread(mb_s * 3)}}}}}}};
  }
  void fail_last(const std::string& why) {
    BenchmarkRun& r = runs["b-" + std::to_string(started.size())];
    r.state = BenchmarkState::kFailed;
    r.error = why;
  }

  std::vector<BenchmarkRequest> started;
  std::map<std::string, BenchmarkRun> runs;
};

struct Fixture {
  Fixture() {
    HealthSchedulerOptions o;
    o.host = "honeycomb";
    o.pools = {{"ci", hours(6), "compression", 10}};
    o.postpone = minutes(10);
    scheduler = std::make_unique<HealthScheduler>(o, source, benchmarks, store, clock);
    REQUIRE(scheduler->load().is_ok());
  }
  // One complete run reporting `mb_s`, then the clock moves to the next one.
  void run_once(double mb_s) {
    scheduler->tick();  // leases a warm VM and starts the benchmark
    benchmarks.finish_last(mb_s);
    scheduler->tick();  // stores the figure, releases the lease
    clock.advance(hours(6));
  }

  ManualClock clock;
  FakeVmSource source;
  FakeBenchmarks benchmarks;
  FakeHealthStore store;
  std::unique_ptr<HealthScheduler> scheduler;
};

TEST_CASE("health schedule: a due run leases a warm VM, runs the short suite, stores the figure",
          "[bench][health]") {
  Fixture f;
  f.scheduler->tick();
  REQUIRE(f.source.requests.size() == 1);
  CHECK(f.source.requests[0].pool == "ci");
  CHECK(f.source.requests[0].owner == "armhived-health");
  REQUIRE(f.benchmarks.started.size() == 1);
  CHECK(f.benchmarks.started[0].lease_id == "l-1");
  CHECK(f.benchmarks.started[0].suites == std::vector<std::string>{"compression"});
  CHECK_FALSE(f.benchmarks.started[0].compression.multi_thread);  // the short suite
  CHECK(f.source.has_event("health.started"));

  f.scheduler->tick();  // still running: nothing more
  CHECK(f.source.released.empty());
  f.benchmarks.finish_last(410);
  f.scheduler->tick();
  CHECK(f.source.released == std::vector<std::string>{"l-1"});
  auto series = f.store.recent("honeycomb", "ci", "", 10);
  REQUIRE(series.is_ok());
  REQUIRE(series->size() == 1);
  CHECK(series->at(0).figure == "compression.guest.t1.compress_mb_s");
  CHECK(series->at(0).unit == "MB/s");
  CHECK(series->at(0).value == 410);
  CHECK(series->at(0).run_id == "b-1");
  CHECK(series->at(0).verdict == "insufficient_history");
  REQUIRE(f.source.health.size() == 1);
  CHECK(f.source.health[0].pool == "ci");

  // Not due again before `every`.
  f.clock.advance(hours(5));
  f.scheduler->tick();
  CHECK(f.source.requests.size() == 1);
  f.clock.advance(hours(1));
  f.scheduler->tick();
  CHECK(f.source.requests.size() == 2);
}

TEST_CASE("health schedule: no spare warm VM postpones the run and says so", "[bench][health]") {
  Fixture f;
  f.source.warm = 0;
  f.scheduler->tick();
  CHECK(f.source.requests.empty());
  const RecordedEvent* e = f.source.last_event("health.postponed");
  REQUIRE(e != nullptr);
  CHECK(e->detail.find("no spare warm VM in pool ci (0 warm, 0 leases waiting)") !=
        std::string::npos);
  CHECK(e->detail.find("10 min") != std::string::npos);

  // A warm VM that a waiting CI lease is about to take is not spare either.
  f.source.warm = 1;
  f.source.pending = 1;
  f.clock.advance(minutes(10));
  f.scheduler->tick();
  CHECK(f.source.requests.empty());
  // Postponed, not re-checked on every tick.
  f.source.pending = 0;
  f.clock.advance(minutes(5));
  f.scheduler->tick();
  CHECK(f.source.requests.empty());
  f.clock.advance(minutes(5));
  f.scheduler->tick();
  CHECK(f.source.requests.size() == 1);
}

TEST_CASE("health schedule: a schedule shorter than the postponement looks again after `every`",
          "[bench][health]") {
  ManualClock clock;
  FakeVmSource source;
  FakeBenchmarks benchmarks;
  FakeHealthStore store;
  HealthSchedulerOptions o;
  o.host = "honeycomb";
  o.pools = {{"ci", std::chrono::seconds(30), "compression", 5}};
  o.postpone = minutes(10);
  HealthScheduler scheduler(o, source, benchmarks, store, clock);
  REQUIRE(scheduler.load().is_ok());
  source.warm = 0;  // the refill is still booting
  scheduler.tick();
  CHECK(source.requests.empty());
  const RecordedEvent* e = source.last_event("health.postponed");
  REQUIRE(e != nullptr);
  CHECK(e->detail.find("waits 30 s") != std::string::npos);
  source.warm = 1;
  clock.advance(std::chrono::seconds(29));
  scheduler.tick();
  CHECK(source.requests.empty());
  clock.advance(std::chrono::seconds(1));
  scheduler.tick();  // 30 s later, not 10 min
  CHECK(source.requests.size() == 1);
}

TEST_CASE(
    "health schedule: a slow result outside the band marks the host degraded, a good one "
    "clears it",
    "[bench][health]") {
  Fixture f;
  for (double v : {400.0, 404.0, 398.0, 402.0, 401.0}) f.run_once(v);
  CHECK_FALSE(f.source.has_event("host.degraded"));
  REQUIRE(f.source.health.size() == 1);
  CHECK(f.source.health[0].verdict == "insufficient_history");

  f.run_once(399);  // within the band now that there are five
  CHECK(f.source.health[0].verdict == "within_band");
  REQUIRE(f.source.health[0].band.has_value());
  CHECK(f.source.health[0].band->median == 401);

  f.run_once(300);  // a throttled guest
  CHECK(f.source.health[0].verdict == "degraded");
  const RecordedEvent* d = f.source.last_event("host.degraded");
  REQUIRE(d != nullptr);
  CHECK(d->detail.find("host honeycomb") != std::string::npos);
  CHECK(d->detail.find("300.00 is outside its band") != std::string::npos);
  CHECK(d->pool == "ci");

  // Still slow: stays degraded, and the slow result does not join the baseline.
  // (The band is that of the six good results: 398..404, median 400.5, not pulled to 300.)
  f.run_once(301);
  CHECK(f.source.health[0].verdict == "degraded");
  CHECK(f.source.health[0].band->n == 6);
  CHECK(f.source.health[0].band->median == 400.5);
  CHECK_FALSE(f.source.has_event("host.recovered"));

  f.run_once(403);
  CHECK(f.source.health[0].verdict == "within_band");
  const RecordedEvent* r = f.source.last_event("host.recovered");
  REQUIRE(r != nullptr);
  CHECK(r->detail.find("403.00 within") != std::string::npos);
  CHECK(f.source.released.size() == 9);  // every lease given back
}

TEST_CASE(
    "health schedule: a failed run or a lease that never gets ready is released and "
    "retried later",
    "[bench][health]") {
  Fixture f;
  f.scheduler->tick();
  f.benchmarks.fail_last("compression: zstd missing in the guest");
  f.scheduler->tick();
  CHECK(f.source.released == std::vector<std::string>{"l-1"});
  const RecordedEvent* e = f.source.last_event("health.failed");
  REQUIRE(e != nullptr);
  CHECK(e->detail.find("zstd missing") != std::string::npos);
  CHECK(f.store.recent("honeycomb", "ci", "", 10)->empty());

  f.source.handout_ready = false;
  f.clock.advance(minutes(10));
  f.scheduler->tick();  // provisioning
  CHECK(f.source.requests.size() == 2);
  CHECK(f.benchmarks.started.size() == 1);
  f.clock.advance(minutes(16));
  f.scheduler->tick();
  CHECK(f.source.released.back() == "l-2");
  CHECK(f.source.last_event("health.failed")->detail.find("not ready within 15 min") !=
        std::string::npos);
}

TEST_CASE("health schedule: the pool's band_mads sets the band's width", "[bench][health]") {
  // median 400, MAD 20: k = 3 gives [340, 460], k = 1 gives [380, 420].
  for (int k : {3, 1}) {
    INFO("band_mads " << k);
    ManualClock clock;
    FakeVmSource source;
    FakeBenchmarks benchmarks;
    FakeHealthStore store;
    HealthSchedulerOptions o;
    o.host = "honeycomb";
    o.pools = {{"ci", hours(6), "compression", 10, k}};
    HealthScheduler scheduler(o, source, benchmarks, store, clock);
    REQUIRE(scheduler.load().is_ok());
    for (double v : {300.0, 400.0, 500.0, 420.0, 380.0, 350.0}) {
      scheduler.tick();
      benchmarks.finish_last(v);
      scheduler.tick();
      clock.advance(hours(6));
    }
    REQUIRE(source.health.size() == 1);
    REQUIRE(source.health[0].band.has_value());
    CHECK(source.health[0].band->low == (k == 3 ? 340 : 380));
    CHECK(source.health[0].verdict == (k == 3 ? "within_band" : "degraded"));
  }
}

TEST_CASE("health schedule: marks and the next run time survive a restart", "[bench][health]") {
  Fixture f;
  f.run_once(400);
  FakeVmSource source2;
  HealthSchedulerOptions o;
  o.host = "honeycomb";
  o.pools = {{"ci", hours(6), "compression", 10}};
  f.clock.advance(-hours(3));  // 3 h after the stored run
  HealthScheduler again(o, source2, f.benchmarks, f.store, f.clock);
  REQUIRE(again.load().is_ok());
  REQUIRE(source2.health.size() == 1);
  CHECK(source2.health[0].value == 400);
  again.tick();
  CHECK(source2.requests.empty());  // due 6 h after the last run, not at start
  f.clock.advance(hours(3));
  again.tick();
  CHECK(source2.requests.size() == 1);
}

TEST_CASE("health figures: one headline figure per suite, refused when absent", "[bench][health]") {
  CHECK_FALSE(health_figure("compression", nlohmann::json::object()).is_ok());
  nlohmann::json bad = {{"compression",
                         {{"guest",
                           {{{"threads", 1},
                             {"ratio", 2.0},
                             {"compress_mb_s", {{"median", -1.0}}},
                             {"decompress_mb_s", {{"median", 1.0}}}}}}}}};
  CHECK_FALSE(health_figure("compression", bad).is_ok());
}

}  // namespace
}  // namespace armhive
