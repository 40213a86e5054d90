#include "daemon/core/demand_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace armhive {
namespace {

using std::chrono::duration;
using Minutes = duration<double, std::ratio<60>>;
using Hours = duration<double, std::ratio<3600>>;

// 5 min, 30 min, 2 h, in minutes.
constexpr std::array<double, 3> kHorizonMin = {5, 30, 120};
constexpr int kLongHorizon = 2;
// Scheduling and hand-out time on top of the boot before a refill serves anyone.
constexpr Millis kMargin{5000};
// The recent rates decay only from this long after the last request: without it every
// request would raise the target and the quiet minutes after it lower it again, and the pool
// would boot and retire a VM for each one.
constexpr double kHoldMin = 5;
// Weight of a new boot measurement in the boot-time average.
constexpr double kBootWeight = 0.3;

// Hours since Monday 1969-12-29 00:00 UTC (the Unix epoch was a Thursday).
double week_hours(TimePoint t) { return Hours(t.time_since_epoch()).count() + 72.0; }

int bucket_of(TimePoint t) {
  double h = std::floor(week_hours(t));
  return static_cast<int>(h - 168.0 * std::floor(h / 168.0));
}

// Time spent in hour-of-week `bucket` from the week origin up to `x` hours.
double hours_in_bucket(double x, int bucket) {
  double weeks = std::floor(x / 168.0);
  double into = x - 168.0 * weeks;
  return weeks + std::clamp(into - bucket, 0.0, 1.0);
}

double minutes_between(TimePoint a, TimePoint b) { return Minutes(b - a).count(); }

// Smallest k in [1, hi] with P(N ≥ k) < miss for N ~ Poisson(mean); hi + 1 when none is (a
// huge mean underflows the terms, and then more than hi is the answer anyway).
int poisson_target(double mean, double miss, int hi) {
  double term = std::exp(-mean);  // P(N = k − 1)
  double below = term;            // P(N ≤ k − 1)
  for (int k = 1; k <= hi; ++k) {
    if (1.0 - below < miss) return k;
    term *= mean / k;
    below += term;
  }
  return hi + 1;
}

std::string format(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

}  // namespace

Status validate_auto_warm(const AutoWarmConfig& config) {
  if (config.auto_min < 0) return invalid_argument("auto_min", "must be 0 or more");
  if (config.auto_max < config.auto_min) {
    return invalid_argument("auto_max", "must be at least auto_min");
  }
  if (config.scale_to_zero_after <= Seconds{0}) {
    return invalid_argument("scale_to_zero_after", "must be positive");
  }
  if (!(config.miss_probability > 0 && config.miss_probability < 1)) {
    return invalid_argument("miss_probability", "must be between 0 and 1");
  }
  if (config.burst_every <= Seconds{0}) {
    return invalid_argument("burst_every", "must be positive");
  }
  return Status::ok();
}

void DemandModel::close_run() {
  if (run_size_ < kMinRun) return;
  auto& at_least = runs_at_least_[bucket_of(run_start_)];
  for (int k = kMinRun; k <= std::min(run_size_, kMaxRun); ++k) at_least[k - kMinRun] += 1.0;
}

double DemandModel::hours_seen(int bucket, TimePoint now) const {
  if (!first_arrival_) return 0;
  return std::max(0.0, hours_in_bucket(week_hours(now), bucket) -
                           hours_in_bucket(week_hours(*first_arrival_), bucket));
}

double DemandModel::runs_around(int bucket, int k) const {
  k = std::min(k, kMaxRun);
  double runs = 0;
  for (int d = -1; d <= 1; ++d) {
    int b = (bucket + d + kBuckets) % kBuckets;
    runs += runs_at_least_[b][k - kMinRun];
    if (run_last_ && run_size_ >= k && bucket_of(run_start_) == b) runs += 1.0;
  }
  return runs;
}

void DemandModel::record_arrival(TimePoint at) {
  if (!last_arrival_) {
    weighted_.fill(0);
    last_arrival_ = at;
    first_arrival_ = at;
  }
  double ago = minutes_between(at, *last_arrival_);
  for (int i = 0; i < kHorizons; ++i) {
    if (ago >= 0) {
      weighted_[i] += std::exp(-ago / kHorizonMin[i]);  // late: counts as already decayed
    } else {
      weighted_[i] = weighted_[i] * std::exp(ago / kHorizonMin[i]) + 1.0;
    }
  }
  if (ago < 0) last_arrival_ = at;
  first_arrival_ = std::min(*first_arrival_, at);
  bucket_counts_[bucket_of(at)] += 1.0;

  const Millis window = boot_ + kMargin;
  if (run_last_ && at > run_start_ + window) {
    close_run();
    run_last_.reset();
  }
  if (!run_last_) {
    run_last_ = at;
    run_start_ = at;
    run_size_ = 1;
  } else if (at >= run_start_) {
    run_last_ = std::max(*run_last_, at);
    ++run_size_;
  } else if (*run_last_ - at <= window) {  // slightly out of order: still one window
    run_start_ = at;
    ++run_size_;
  }  // else: far older than the open run; counted in no run
}

void DemandModel::record_boot(Millis duration) {
  if (duration <= Millis{0}) return;
  if (!boot_measured_) {
    boot_ = duration;
    boot_measured_ = true;
    return;
  }
  boot_ = Millis(std::llround((1 - kBootWeight) * static_cast<double>(boot_.count()) +
                              kBootWeight * static_cast<double>(duration.count())));
}

void DemandModel::seed(const std::vector<TimePoint>& history) {
  std::vector<TimePoint> sorted = history;
  std::sort(sorted.begin(), sorted.end());
  for (TimePoint t : sorted) record_arrival(t);
}

std::array<double, 3> DemandModel::recent_rates(TimePoint now) const {
  std::array<double, 3> out{};
  if (!last_arrival_) return out;
  double since = std::max(0.0, minutes_between(*last_arrival_, now) - kHoldMin);
  for (int i = 0; i < kHorizons; ++i) {
    out[i] = weighted_[i] * std::exp(-since / kHorizonMin[i]) / kHorizonMin[i];
  }
  return out;
}

double DemandModel::profile_rate(TimePoint at, TimePoint now) const {
  double long_rate = recent_rates(now)[kLongHorizon];
  if (!first_arrival_ || now <= *first_arrival_) return long_rate;
  int b = bucket_of(at);
  // Shrunk toward the 2-hour rate by one hour of prior: per minute.
  return (bucket_counts_[b] + 60.0 * long_rate) / (60.0 * (hours_seen(b, now) + 1.0));
}

WarmTarget DemandModel::target(TimePoint now, int queued, const AutoWarmConfig& config,
                               bool more_queued) const {
  WarmTarget out;
  Status valid = validate_auto_warm(config);
  const int lo = std::max(config.auto_min, 0);
  if (!valid.is_ok()) {
    out.target = lo;
    out.reason = "invalid auto-warm configuration (" + valid.field() + " " + valid.message() +
                 "): auto_min " + std::to_string(lo);
    return out;
  }
  const int hi = config.auto_max;
  queued = std::max(queued, 0);
  const Millis window = boot_ + kMargin;
  const TimePoint ready_at = now + window;
  const double window_min = Minutes(window).count();
  const double boot_s = duration<double>(boot_).count();

  bool idle = queued == 0 && (!last_arrival_ || now - *last_arrival_ >= config.scale_to_zero_after);
  double rate = 0;
  if (!last_arrival_) {
    rate = 0;
  } else if (idle) {
    // The recent rates are stale: only what the profile learned of the hour ahead counts.
    int b = bucket_of(ready_at);
    rate = bucket_counts_[b] / (60.0 * (hours_seen(b, now) + 1.0));
  } else {
    auto r = recent_rates(now);
    rate = std::max({r[0], r[1], profile_rate(ready_at, now)});
  }
  out.rate_per_min = rate;
  out.expected_arrivals = rate * window_min;

  int from_rate = out.expected_arrivals > 0
                      ? poisson_target(out.expected_arrivals, config.miss_probability, hi)
                      : 0;
  // The run rule: the largest k whose runs of k or more come at least once per burst_every.
  const double needed_per_hour = 1.0 / Hours(config.burst_every).count();
  int from_runs = 0;
  if (last_arrival_) {
    const int b = bucket_of(ready_at);
    // Over the hours of the bucket and its neighbours seen, plus burst_every of prior without
    // runs: a pool's first fan-out, or a rare coincidence of steady requests, does not read as
    // one an hour.
    const double hours = hours_seen((b + kBuckets - 1) % kBuckets, now) + hours_seen(b, now) +
                         hours_seen((b + 1) % kBuckets, now) + Hours(config.burst_every).count();
    for (int k = kMinRun; k <= std::min(hi, kMaxRun); ++k) {
      double r = runs_around(b, k) / hours;
      if (r < needed_per_hour) break;
      from_runs = k;
      out.runs_per_hour = r;
    }
  }
  out.run_size = from_runs;

  int want = std::max(from_rate, from_runs) + queued;
  out.target = std::clamp(want, config.auto_min, hi);

  if (!last_arrival_ && queued == 0) {
    out.reason = format("no lease requests seen yet: auto_min %.0f", config.auto_min);
    return out;
  }
  if (idle && from_rate == 0 && from_runs == 0) {
    double idle_min = minutes_between(*last_arrival_, now);
    out.reason = format("idle for %.0f min: scaled to auto_min %.0f", idle_min, config.auto_min);
    return out;
  }
  std::string why =
      format(out.expected_arrivals < 1
                 ? "expected %.2f arrivals in the next boot time (%.0f s) at %.2f/min"
                 : "expected %.1f arrivals in the next boot time (%.0f s) at %.2f/min",
             out.expected_arrivals, boot_s, rate);
  if (idle) {
    why = format("idle for %.0f min, but the profile expects %.2f/min in the hour ahead",
                 minutes_between(*last_arrival_, now), rate);
  }
  if (from_runs > from_rate) {
    why = format("runs of %.0f+ requests at once came %.2f times an hour at this hour of the week",
                 from_runs, out.runs_per_hour);
  }
  if (queued > 0) {
    why = (more_queued ? "at least " : "") + std::to_string(queued) +
          (queued == 1 && !more_queued ? " lease" : " leases") + " queued; " + why;
  }
  if (want > hi) why += format(": capped at auto_max %.0f", hi);
  if (want < config.auto_min) why += format(": raised to auto_min %.0f", config.auto_min);
  out.reason = why;
  return out;
}

}  // namespace armhive
