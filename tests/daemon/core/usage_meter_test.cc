#include "daemon/core/usage_meter.h"

#include <catch2/catch.hpp>
#include <random>

namespace armhive {
namespace {

using namespace std::chrono_literals;

const TimePoint kT0 = from_unix_ms(1'800'000'000'000);

UsageCounters counters(int64_t run, uint64_t cpu_s, uint64_t disk = 0, uint64_t rx = 0,
                       uint64_t tx = 0, std::optional<uint64_t> rss = std::nullopt) {
  return UsageCounters{run, cpu_s * 1'000'000'000ULL, rss, disk, rx, tx};
}

TEST_CASE("usage: a lease counts from its baseline, not from the VM's start", "[core][usage]") {
  // A warm VM burned 30 s of CPU booting and idling before the hand-out.
  LeaseUsage u = start_usage(counters(7, 30, 1000, 500, 400, 300 << 20), kT0);
  CHECK(u.cpu_ns == 0);
  CHECK(u.peak_rss_bytes == 300u << 20);
  CHECK(u.wall_seconds() == 0);

  UsageIncrement inc = apply_usage_sample(u, counters(7, 45, 5000, 700, 900), kT0 + 10s);
  CHECK(inc.cpu_ns == 15'000'000'000ULL);
  CHECK(inc.wall_seconds == Approx(10));
  CHECK(u.cpu_seconds() == Approx(15));
  CHECK(u.disk_write_bytes == 4000);
  CHECK(u.net_rx_bytes == 200);
  CHECK(u.net_tx_bytes == 500);
  CHECK(u.wall_seconds() == Approx(10));
  CHECK(u.samples == 1);

  apply_usage_sample(u, counters(7, 50, 5000, 700, 900, 512 << 20), kT0 + 20s);
  CHECK(u.cpu_seconds() == Approx(20));
  CHECK(u.peak_rss_bytes == 512u << 20);
  apply_usage_sample(u, counters(7, 51, 5000, 700, 900, 100 << 20), kT0 + 30s);
  CHECK(u.peak_rss_bytes == 512u << 20);  // a peak, not the last value
  CHECK(u.wall_seconds() == Approx(30));
}

TEST_CASE("usage: counters going backwards are a reset, not a negative", "[core][usage]") {
  LeaseUsage u = start_usage(counters(0, 100, 10'000), kT0);
  // QEMU restarted without the run id telling (0: unknown): the counters are low again.
  UsageIncrement inc = apply_usage_sample(u, counters(0, 4, 300), kT0 + 10s);
  CHECK(inc.cpu_ns == 4'000'000'000ULL);
  CHECK(inc.disk_write_bytes == 300);
  CHECK(u.cpu_seconds() == Approx(4));
  apply_usage_sample(u, counters(0, 6, 400), kT0 + 20s);
  CHECK(u.cpu_seconds() == Approx(6));
  CHECK(u.disk_write_bytes == 400);
}

TEST_CASE("usage: a new run id counts the new run from zero even when its counters are higher",
          "[core][usage]") {
  LeaseUsage u = start_usage(counters(3, 10), kT0);
  apply_usage_sample(u, counters(3, 12), kT0 + 10s);
  CHECK(u.cpu_seconds() == Approx(2));
  // Restarted and already past the old value by the next sample.
  apply_usage_sample(u, counters(4, 20), kT0 + 20s);
  CHECK(u.cpu_seconds() == Approx(22));
  apply_usage_sample(u, counters(4, 21), kT0 + 30s);
  CHECK(u.cpu_seconds() == Approx(23));
}

TEST_CASE("usage: missing counters add nothing and the next present one is measured right",
          "[core][usage]") {
  SECTION("no baseline: the first sample becomes it") {
    LeaseUsage u = start_usage(std::nullopt, kT0);
    apply_usage_sample(u, counters(5, 40, 900), kT0 + 10s);
    CHECK(u.cpu_ns == 0);
    CHECK(u.disk_write_bytes == 0);
    apply_usage_sample(u, counters(5, 42, 1000), kT0 + 20s);
    CHECK(u.cpu_seconds() == Approx(2));
    CHECK(u.disk_write_bytes == 100);
  }
  SECTION("a sample without a counter (NOWAIT) keeps the previous value") {
    LeaseUsage u = start_usage(counters(5, 40, 900), kT0);
    UsageCounters partial{5, std::nullopt, std::nullopt, std::nullopt, 0, 0};
    apply_usage_sample(u, partial, kT0 + 10s);
    CHECK(u.cpu_ns == 0);
    apply_usage_sample(u, counters(5, 43, 950), kT0 + 20s);
    CHECK(u.cpu_seconds() == Approx(3));
    CHECK(u.disk_write_bytes == 50);
  }
  SECTION("a hypervisor that reports nothing: zero, with the wall time") {
    LeaseUsage u = start_usage(UsageCounters{}, kT0);
    apply_usage_sample(u, UsageCounters{}, kT0 + 10s);
    CHECK(u.cpu_ns == 0);
    CHECK(u.peak_rss_bytes == 0);
    CHECK(u.wall_seconds() == Approx(10));
  }
}

TEST_CASE("usage: a final usage is frozen and time never runs backwards", "[core][usage]") {
  LeaseUsage u = start_usage(counters(1, 0), kT0);
  apply_usage_sample(u, counters(1, 5), kT0 + 10s);
  UsageIncrement late = apply_usage_sample(u, counters(1, 6), kT0 + 5s);  // an older instant
  CHECK(late.wall_seconds == 0);
  CHECK(u.sampled_at == kT0 + 10s);
  CHECK(u.cpu_seconds() == Approx(6));
  u.final = true;
  UsageIncrement after = apply_usage_sample(u, counters(1, 100), kT0 + 60s);
  CHECK(after.cpu_ns == 0);
  CHECK(u.cpu_seconds() == Approx(6));
  CHECK(u.wall_seconds() == Approx(10));
}

// Property: however a VM's cumulative counter grows, with restarts and samples not taken, the
// usage equals the VM's use since the baseline, less only what a run did after its last
// sample before QEMU restarted (no counter holds that any more).
TEST_CASE("usage: random growth, restarts and missed samples sum to the real use",
          "[core][usage][property]") {
  std::mt19937_64 rng(32);
  for (int round = 0; round < 200; ++round) {
    int64_t run = 1;
    uint64_t cpu = rng() % 1000;
    LeaseUsage u = start_usage(UsageCounters{run, cpu, {}, {}, {}, {}}, kT0);
    uint64_t real = 0;
    uint64_t unsampled = 0;  // this run's work since the last sample
    TimePoint at = kT0;
    for (int step = 0; step < 50; ++step) {
      at += 1s;
      if (rng() % 10 == 0) {  // QEMU restarts: a new run from zero
        ++run;
        cpu = 0;
        real -= unsampled;
        unsampled = 0;
      }
      uint64_t work = rng() % 500;
      cpu += work;
      real += work;
      unsampled += work;
      if (rng() % 4 == 0) continue;  // this sample was not taken
      apply_usage_sample(u, UsageCounters{run, cpu, {}, {}, {}, {}}, at);
      unsampled = 0;
      REQUIRE(u.cpu_ns == real);
    }
  }
}

}  // namespace
}  // namespace armhive
