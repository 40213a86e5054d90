#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "daemon/core/clock.h"

namespace armhive {

// How a pool whose warm size follows demand may be sized (issue 35): between auto_min and
// auto_max warm VMs, and back to auto_min once no lease was requested for scale_to_zero_after.
struct AutoWarmConfig {
  int auto_min = 0;
  int auto_max = 1;
  Seconds scale_to_zero_after{3600};
  // The chance a request may find no warm VM: lower holds more VMs for rarer coincidences.
  double miss_probability = 0.1;
  // A run of k requests (a pipeline fanning out) earns the pool's k-th warm VM when runs of k
  // or more came in this hour of the week at least once per burst_every on average.
  Seconds burst_every{8 * 3600};
};

// auto_min ≥ 0, auto_max ≥ auto_min, scale_to_zero_after > 0, 0 < miss_probability < 1,
// burst_every > 0; kInvalidArgument naming the field otherwise.
Status validate_auto_warm(const AutoWarmConfig& config);

// What DemandModel::target decided and why.
struct WarmTarget {
  int target = 0;                // warm VMs the pool should hold now (its min_warm for this pass)
  std::string reason;            // for people: "expected 3.2 arrivals in the next boot time (14 s)"
  double expected_arrivals = 0;  // lease requests expected in the next boot time + margin
  double rate_per_min = 0;       // the arrival rate that expectation was made with
  // The largest run (requests within one boot time of each other) the hour ahead is expected
  // to bring at least once per burst_every, and that rate (runs of that size or more per
  // hour); 0 when no run of two or more qualifies.
  int run_size = 0;
  double runs_per_hour = 0;
};

// Sizes one pool's warm set from the lease requests it saw. Pure: no clock, no I/O; every
// instant is passed in. NOT thread-safe: the caller (the engine) holds its lock around every
// call, as it does for the pool's other state.
//
// The arrival rate is the larger of
// - the recent rates: exponentially weighted counts over 5 and 30 minutes, decayed on read
//   (no timer) from 5 minutes after the last request, so a burst raises the target at once,
//   a quiet spell lowers it within minutes, and the pool does not boot and retire a VM around
//   every single request;
// - a blend of the weekly profile and the 2-hour rate: per hour of the week (168 buckets, UTC)
//   the requests counted in that hour over the weeks seen, shrunk toward the 2-hour rate by
//   one hour of prior ((count + 1 h × rate_2h) / (hours seen + 1 h)), so one week's noise
//   counts for little and several weeks for most. The bucket read is that of now + boot time
//   + margin (5 s): a VM asked for now is warm then, so a known morning ramp is warmed for
//   before its hour starts.
// From the rate, the smallest k with which a request finds no warm VM with probability below
// miss_probability, requests taken as Poisson at that rate: each hand-out starts a refill
// that takes the boot time, so a request finds the pool empty when k or more came in the last
// boot time + margin (P(N ≥ k) < miss_probability).
//
// CI requests are not Poisson: a push fans out into a pipeline's jobs at once, and such a run
// finds only the VMs already warm: no refill its first request starts is ready before boot
// time + margin has passed. A run is the requests within that window from its first one (a
// later one is served by the first's refill, and starts a run of its own). Per hour of
// the week the model counts the runs of each size k ≥ 2 that started in it; the k-th warm VM
// serves one request of every run of k or more, so it is held when those runs came at least
// once per burst_every in the hour ahead (counted over it and the hours either side of it,
// since pipelines keep no exact time, over the weeks seen, plus burst_every of prior without
// runs: one run is never enough, two within burst_every's worth of such hours are). The
// larger of the two ks is the
// target. Rare coincidences of single requests stay the Poisson rule's business: the run rule
// starts at 2 so that a quiet night's lone requests do not pin a VM each.
//
// Leases waiting for boots are added
// (demand the rate has not caught up with) and the result is clamped to
// [auto_min, auto_max]. After scale_to_zero_after without a request the recent rates are
// stale: only the profile's hour ahead is read (without the 2-hour rate), and with nothing
// learned for that hour the target is auto_min.
class DemandModel {
 public:
  // A lease request for this pool at `at`. Requests may come slightly out of order.
  void record_arrival(TimePoint at);
  // A measured create-to-agent time of one of the pool's VMs (weighted average; 15 s before
  // any). Non-positive durations are ignored.
  void record_boot(Millis duration);
  // Learns from the lease requests of a history (e.g. the store's leases of this pool) at
  // start; as record_arrival for each, in time order.
  void seed(const std::vector<TimePoint>& history);

  // `queued`: the pool's leases waiting for a VM that no free warm VM serves in this pass
  // (they wait for boots; a lease a warm VM is about to take is not demand still to come).
  // `more_queued`: the caller stopped counting at `queued` and more wait (the reason then
  // says "at least").
  WarmTarget target(TimePoint now, int queued, const AutoWarmConfig& config,
                    bool more_queued = false) const;

  Millis boot_estimate() const { return boot_; }
  // Requests per minute over the 5-minute, 30-minute and 2-hour horizons, decayed to `now`.
  std::array<double, 3> recent_rates(TimePoint now) const;
  // The profile's blend for the hour of the week `at` falls in, read at `now` (requests per
  // minute): what target() uses besides the recent rates.
  double profile_rate(TimePoint at, TimePoint now) const;

 private:
  static constexpr int kHorizons = 3;
  static constexpr int kBuckets = 7 * 24;

  // Exponentially weighted counts at last_arrival_: sum over requests of exp(−age / horizon).
  std::array<double, kHorizons> weighted_{};
  std::optional<TimePoint> first_arrival_;
  std::optional<TimePoint> last_arrival_;
  std::array<double, kBuckets> bucket_counts_{};
  // Runs: runs_at_least_[b][k − kMinRun] counts the runs of k or more requests that started
  // in hour-of-week b (sizes above kMaxRun count as kMaxRun). The open run is counted on read.
  static constexpr int kMinRun = 2;
  static constexpr int kMaxRun = 32;
  void close_run();
  std::array<std::array<double, kMaxRun - kMinRun + 1>, kBuckets> runs_at_least_{};
  std::optional<TimePoint> run_last_;
  TimePoint run_start_{};
  int run_size_ = 0;
  // Hours of hour-of-week `bucket` between the first request and `now`.
  double hours_seen(int bucket, TimePoint now) const;
  // The runs of at least k (2 ≤ k) that started in hour-of-week `bucket` and its neighbours,
  // the open run counted.
  double runs_around(int bucket, int k) const;
  Millis boot_{15000};
  bool boot_measured_ = false;
};

}  // namespace armhive
