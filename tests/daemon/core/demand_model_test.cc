#include "daemon/core/demand_model.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>

namespace armhive {
namespace {

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

// Monday 2026-11-30 00:00 UTC.
const TimePoint kMonday = from_unix_ms(int64_t{1795996800} * 1000);

// Requests every `gap` from `from` for `span`; returns the last one's instant.
TimePoint steady(DemandModel& m, TimePoint from, Millis gap, Millis span) {
  TimePoint t = from;
  for (; t < from + span; t += gap) m.record_arrival(t);
  return t - gap;
}

TEST_CASE("demand model: no demand keeps the pool at auto_min", "[demand_model]") {
  DemandModel m;
  WarmTarget t = m.target(kMonday, 0, {.auto_min = 0, .auto_max = 8});
  CHECK(t.target == 0);
  CHECK(t.expected_arrivals == 0);
  CHECK_THAT(t.reason, Contains("no lease requests"));
  CHECK(m.target(kMonday, 0, {.auto_min = 2, .auto_max = 8}).target == 2);
}

TEST_CASE("demand model: 1 request a minute asks for a small warm pool, 20 for a larger one",
          "[demand_model]") {
  const AutoWarmConfig wide{.auto_min = 0, .auto_max = 16};
  DemandModel slow;
  TimePoint last = steady(slow, kMonday + 9h, 60s, 3h);
  WarmTarget small = slow.target(last + 30s, 0, wide);
  CHECK(small.target >= 1);
  CHECK(small.target <= 3);
  CHECK(small.rate_per_min == Approx(1.0).epsilon(0.2));
  CHECK_THAT(small.reason, Contains("arrivals in the next boot time (15 s)"));

  DemandModel fast;
  last = steady(fast, kMonday + 9h, 3s, 3h);
  WarmTarget large = fast.target(last + 1s, 0, wide);
  CHECK(large.target > small.target + 3);
  CHECK(large.target <= 16);
  CHECK(large.rate_per_min == Approx(20.0).epsilon(0.1));

  // Always within [auto_min, auto_max], and the reason says when a bound decided.
  WarmTarget capped = fast.target(last + 1s, 0, {.auto_min = 0, .auto_max = 4});
  CHECK(capped.target == 4);
  CHECK_THAT(capped.reason, Contains("capped at auto_max 4"));
  WarmTarget raised = slow.target(last + 1s, 0, {.auto_min = 5, .auto_max = 8});
  CHECK(raised.target == 5);
  for (int max = 0; max <= 10; ++max) {
    for (int min = 0; min <= max; ++min) {
      for (const DemandModel* m : {&slow, &fast}) {
        int got = m->target(last + 1s, 0, {.auto_min = min, .auto_max = max}).target;
        CHECK(got >= min);
        CHECK(got <= max);
      }
    }
  }
}

TEST_CASE("demand model: idle for longer than scale_to_zero_after goes back to auto_min",
          "[demand_model]") {
  DemandModel m;
  TimePoint last = steady(m, kMonday + 9h, 60s, 1h);
  const AutoWarmConfig config{.auto_min = 0, .auto_max = 8, .scale_to_zero_after = 3600s};
  CHECK(m.target(last + 59min, 0, config).target >= 1);
  WarmTarget idle = m.target(last + 62min, 0, config);
  CHECK(idle.target == 0);
  CHECK_THAT(idle.reason, Contains("idle for 62 min"));
  CHECK_THAT(idle.reason, Contains("auto_min 0"));
  CHECK(m.target(last + 62min, 0, {.auto_min = 1, .auto_max = 8}).target == 1);
  // A request ends the idle spell.
  m.record_arrival(last + 63min);
  CHECK(m.target(last + 63min, 0, config).target >= 1);
}

TEST_CASE("demand model: a morning ramp learned over previous weeks is warmed for ahead",
          "[demand_model]") {
  // Three weeks of Mondays with requests every 30 s from 08:00 to 09:00 and none otherwise.
  std::vector<TimePoint> history;
  for (int week = 3; week >= 1; --week) {
    TimePoint ramp = kMonday + 8h - week * 7 * 24h;
    for (TimePoint t = ramp; t < ramp + 1h; t += 30s) history.push_back(t);
  }
  DemandModel learned;
  learned.seed(history);
  const AutoWarmConfig config{.auto_min = 0, .auto_max = 8};
  // An hour before the ramp: nothing is expected, the pool is empty.
  WarmTarget early = learned.target(kMonday + 7h, 0, config);
  CHECK(early.target == 0);
  CHECK_THAT(early.reason, Contains("idle"));
  // Ten seconds before 08:00 a VM asked for now is ready in the ramp hour: warm ahead.
  WarmTarget ahead = learned.target(kMonday + 8h - 10s, 0, config);
  CHECK(ahead.target >= 1);
  CHECK(ahead.rate_per_min > 1.0);
  CHECK_THAT(ahead.reason, Contains("profile"));
  // Without the history nothing is known.
  DemandModel fresh;
  CHECK(fresh.target(kMonday + 8h - 10s, 0, config).target == 0);
  // The order of the history does not matter.
  std::vector<TimePoint> reversed(history.rbegin(), history.rend());
  DemandModel from_reversed;
  from_reversed.seed(reversed);
  CHECK(from_reversed.target(kMonday + 8h - 10s, 0, config).target == ahead.target);
}

TEST_CASE("demand model: queued leases raise the target", "[demand_model]") {
  const AutoWarmConfig config{.auto_min = 0, .auto_max = 16};
  DemandModel m;
  TimePoint last = steady(m, kMonday + 9h, 60s, 2h);
  WarmTarget none = m.target(last + 10s, 0, config);
  WarmTarget three = m.target(last + 10s, 3, config);
  CHECK(three.target == none.target + 3);
  CHECK_THAT(three.reason, Contains("3 leases queued"));
  // A caller that stopped counting says so.
  CHECK_THAT(m.target(last + 1s, 1, {.auto_min = 0, .auto_max = 8}, true).reason,
             Contains("at least 1 leases queued"));
  // Queued leases count even before any rate is known.
  DemandModel fresh;
  CHECK(fresh.target(kMonday, 2, config).target == 2);
}

TEST_CASE("demand model: slower boots raise the target", "[demand_model]") {
  const AutoWarmConfig config{.auto_min = 0, .auto_max = 16};
  DemandModel m;
  TimePoint last = steady(m, kMonday + 9h, 10s, 2h);
  CHECK(m.boot_estimate() == 15s);
  WarmTarget quick = m.target(last + 1s, 0, config);
  for (int i = 0; i < 10; ++i) m.record_boot(90s);
  CHECK(m.boot_estimate() > 80s);
  WarmTarget slow = m.target(last + 1s, 0, config);
  CHECK(slow.target > quick.target);
  CHECK(slow.expected_arrivals > quick.expected_arrivals);
  // So does asking for fewer requests to find the pool empty.
  AutoWarmConfig careful = config;
  careful.miss_probability = 0.01;
  careful.auto_max = 32;
  CHECK(m.target(last + 1s, 0, careful).target > slow.target);
  // Nonsense measurements are ignored; the first real one replaces the default.
  DemandModel other;
  other.record_boot(-5s);
  other.record_boot(0s);
  CHECK(other.boot_estimate() == 15s);
  other.record_boot(12s);
  CHECK(other.boot_estimate() == 12s);
}

TEST_CASE("demand model: an invalid configuration is refused and never sizes a pool",
          "[demand_model]") {
  CHECK(validate_auto_warm({.auto_min = 0, .auto_max = 4}).is_ok());
  CHECK(validate_auto_warm({.auto_min = -1, .auto_max = 4}).field() == "auto_min");
  CHECK(validate_auto_warm({.auto_min = 3, .auto_max = 2}).field() == "auto_max");
  CHECK(validate_auto_warm({.auto_min = 0, .auto_max = 2, .scale_to_zero_after = 0s}).field() ==
        "scale_to_zero_after");
  for (double p : {0.0, 1.0, -0.5, 2.0}) {
    CHECK(validate_auto_warm({.auto_min = 0, .auto_max = 2, .miss_probability = p}).field() ==
          "miss_probability");
  }
  CHECK(validate_auto_warm({.auto_min = 0, .auto_max = 2, .burst_every = 0s}).field() ==
        "burst_every");
  DemandModel m;
  TimePoint last = steady(m, kMonday + 9h, 3s, 1h);
  WarmTarget bad = m.target(last, 0, {.auto_min = 3, .auto_max = 2});
  CHECK(bad.target == 3);
  CHECK_THAT(bad.reason, Contains("invalid"));
  CHECK(m.target(last, 5, {.auto_min = -2, .auto_max = 8, .scale_to_zero_after = -1s}).target == 0);
}

// Two weeks of weekdays: a request every 20 minutes from 07:00 to 19:00, and at 10:30 a
// pipeline fanning out into `fanout` requests 2 s apart.
void weekdays_with_fanout(DemandModel& m, int fanout) {
  for (int day = 0; day < 14; ++day) {
    if (day % 7 >= 5) continue;
    TimePoint d = kMonday + day * 24h;
    steady(m, d + 7h, 20min, 3h + 30min);
    for (int i = 0; i < fanout; ++i) m.record_arrival(d + 10h + 30min + i * 2s);
    steady(m, d + 10h + 40min, 20min, 8h + 20min);
  }
}

TEST_CASE(
    "demand model: a pipeline that fans out at the same hour on weekdays finds that many "
    "warm VMs there",
    "[demand_model]") {
  const AutoWarmConfig config{.auto_min = 0, .auto_max = 8};
  DemandModel m;
  weekdays_with_fanout(m, 5);
  const TimePoint third_monday = kMonday + 14 * 24h;
  steady(m, third_monday + 7h, 20min, 3h);  // today's requests so far, up to 09:40

  // 10:05: the steady rate alone (3 an hour) asks for one warm VM at most; the fan-outs seen
  // at 10:30 on the weekdays before ask for five.
  WarmTarget before = m.target(third_monday + 10h + 5min, 0, config);
  CHECK(before.target == 5);
  CHECK(before.run_size == 5);
  CHECK(before.runs_per_hour > 0);
  CHECK_THAT(before.reason, Contains("runs of 5+ requests at once"));

  // Never above auto_max; the steady rate's own target where no fan-out was seen.
  CHECK(m.target(third_monday + 10h + 5min, 0, {.auto_min = 0, .auto_max = 3}).target == 3);
  WarmTarget evening = m.target(third_monday + 18h, 0, config);
  CHECK(evening.run_size == 0);
  CHECK(evening.target <= 1);

  // A fan-out seen twice in two weeks is not one that comes every hour.
  AutoWarmConfig rare = config;
  rare.burst_every = 1h;
  CHECK(m.target(third_monday + 10h + 5min, 0, rare).target <= 1);
}

TEST_CASE("demand model: lone requests at night are not runs and hold no warm VM",
          "[demand_model]") {
  DemandModel m;
  // Two weeks of a request every 10 minutes between 00:00 and 06:00, nothing else.
  for (int day = 0; day < 14; ++day) steady(m, kMonday + day * 24h, 10min, 6h);
  WarmTarget t = m.target(kMonday + 14 * 24h + 2h, 0, {.auto_min = 0, .auto_max = 8});
  CHECK(t.run_size == 0);
  CHECK(t.target <= 1);
}

TEST_CASE("demand model: requests out of order join the run they belong to", "[demand_model]") {
  DemandModel in_order, shuffled;
  std::vector<TimePoint> run;
  for (int i = 0; i < 4; ++i) run.push_back(kMonday + 10h + i * 3s);
  for (int day = 0; day < 28; day += 1) {
    for (TimePoint t : run) in_order.record_arrival(t + day * 24h);
    std::vector<TimePoint> r = run;
    std::reverse(r.begin(), r.end());
    for (TimePoint t : r) shuffled.record_arrival(t + day * 24h);
  }
  TimePoint at = kMonday + 28 * 24h + 9h + 50min;
  WarmTarget a = in_order.target(at, 0, {.auto_min = 0, .auto_max = 8});
  WarmTarget b = shuffled.target(at, 0, {.auto_min = 0, .auto_max = 8});
  CHECK(a.run_size == 4);
  CHECK(b.run_size == 4);
  CHECK(a.target == b.target);
}

// Properties over random days: Poisson requests whose rate changes at random instants, random
// queues, boot times and bounds.
TEST_CASE("demand model: property: the target stays within auto_min and auto_max",
          "[demand_model]") {
  std::mt19937 rng(20261207);
  for (int day = 0; day < 40; ++day) {
    std::uniform_int_distribution<int> bound(0, 8);
    int lo = bound(rng), hi = bound(rng);
    if (lo > hi) std::swap(lo, hi);
    const AutoWarmConfig cfg{.auto_min = lo, .auto_max = hi, .scale_to_zero_after = 20min};
    DemandModel m;
    m.record_boot(Millis(std::uniform_int_distribution<int>(2000, 120000)(rng)));
    TimePoint t = kMonday + std::chrono::hours(day * 24);
    double rate = 0;  // per minute
    for (int step = 0; step < 2000; ++step) {
      if (std::uniform_real_distribution<double>(0, 1)(rng) < 0.01) {
        rate = std::uniform_real_distribution<double>(0, 30)(rng);
      }
      const double mean_gap_s = rate > 0 ? 60.0 / rate : 3600.0;
      t += Millis(static_cast<int64_t>(
                      std::exponential_distribution<double>(1.0 / mean_gap_s)(rng) * 1000) +
                  1);
      if (rate > 0) m.record_arrival(t);
      const int queued = std::uniform_int_distribution<int>(0, 12)(rng);
      WarmTarget w = m.target(t, queued, cfg);
      INFO("day " << day << " step " << step << ": " << w.reason);
      REQUIRE(w.target >= lo);
      REQUIRE(w.target <= hi);
      REQUIRE_FALSE(w.reason.empty());
    }
  }
}

TEST_CASE("demand model: property: a step in demand is followed within minutes, noise is not",
          "[demand_model]") {
  const AutoWarmConfig cfg{.auto_min = 0, .auto_max = 16};
  std::mt19937 rng(7);
  auto poisson_minutes = [&](DemandModel& m, TimePoint& t, double per_min, int minutes,
                             std::vector<int>* targets) {
    const TimePoint end = t + std::chrono::minutes(minutes);
    std::exponential_distribution<double> gap(per_min / 60.0);
    TimePoint next_check = t + 1min;
    while (t < end) {
      t += Millis(static_cast<int64_t>(gap(rng) * 1000) + 1);
      m.record_arrival(t);
      while (targets != nullptr && next_check <= t) {
        targets->push_back(m.target(next_check, 0, cfg).target);
        next_check += 1min;
      }
    }
  };
  for (int trial = 0; trial < 20; ++trial) {
    DemandModel m;
    TimePoint t = kMonday + 10h + std::chrono::hours(trial * 24);
    // Steady at 2 a minute for two hours: the target, checked every minute of the last hour,
    // moves within a band of two (Poisson noise does not swing the pool).
    poisson_minutes(m, t, 2, 60, nullptr);
    std::vector<int> steady;
    poisson_minutes(m, t, 2, 60, &steady);
    REQUIRE_FALSE(steady.empty());
    const auto [lo, hi] = std::minmax_element(steady.begin(), steady.end());
    INFO("trial " << trial);
    CHECK(*hi - *lo <= 2);
    // A step to 30 a minute: within 3 minutes the target is above anything the steady hour
    // asked for.
    std::vector<int> stepped;
    poisson_minutes(m, t, 30, 3, &stepped);
    REQUIRE_FALSE(stepped.empty());
    CHECK(stepped.back() > *hi);
  }
}

}  // namespace
}  // namespace armhive
