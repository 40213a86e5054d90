#include "daemon/bench/health_band.h"

#include <algorithm>
#include <cmath>

#include "daemon/bench/svg.h"

namespace armhive {
namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

}  // namespace

std::optional<HealthBand> baseline_band(const std::vector<double>& history,
                                        const HealthBandOptions& o) {
  if (o.window == 0 || history.size() < std::max<size_t>(1, o.min_history)) return std::nullopt;
  size_t take = std::min(o.window, history.size());
  std::vector<double> recent(history.end() - static_cast<std::ptrdiff_t>(take), history.end());
  for (double v : recent)
    if (!std::isfinite(v)) return std::nullopt;
  HealthBand b;
  b.n = recent.size();
  b.median = median_of(recent);
  std::vector<double> dev;
  dev.reserve(recent.size());
  for (double v : recent) dev.push_back(std::fabs(v - b.median));
  b.mad = std::max(median_of(dev), o.min_relative_mad * std::fabs(b.median));
  b.low = b.median - o.mad_multiplier * b.mad;
  b.high = b.median + o.mad_multiplier * b.mad;
  return b;
}

HealthCheck check_health(const std::string& figure, const std::vector<double>& history,
                         double value, bool higher_is_better, const HealthBandOptions& o) {
  HealthCheck c;
  c.value = value;
  c.band = baseline_band(history, o);
  if (!c.band) {
    c.reason = figure + ": " + std::to_string(history.size()) + " earlier results, " +
               std::to_string(o.min_history) + " needed for a baseline";
    return c;
  }
  const HealthBand& b = *c.band;
  const std::string band = "[" + svg_num(b.low, 2) + ", " + svg_num(b.high, 2) + "] (median " +
                           svg_num(b.median, 2) + " \xC2\xB1 " + svg_num(o.mad_multiplier, 0) +
                           " \xC3\x97 MAD " + svg_num(b.mad, 2) + " of the last " +
                           std::to_string(b.n) + ")";
  bool bad = !std::isfinite(value) || (higher_is_better ? value < b.low : value > b.high);
  c.verdict = bad ? HealthVerdict::kDegraded : HealthVerdict::kWithinBand;
  if (bad && std::isfinite(value) && b.median != 0) {
    double off = 100 * (value - b.median) / b.median;
    c.reason = figure + " " + svg_num(value, 2) + " is outside its band " + band + ": " +
               svg_num(off, 1) + " % from the median";
  } else if (bad) {
    c.reason = figure + " has no finite value; band " + band;
  } else {
    c.reason = figure + " " + svg_num(value, 2) + " within " + band;
  }
  return c;
}

Status validate_health_interval(int interval_hours, int min_interval_hours,
                                const std::string& field) {
  if (interval_hours == 0) return Status::ok();  // off
  if (interval_hours < min_interval_hours || interval_hours > 24 * 365) {
    return invalid_argument(
        field, "must be 0 (off) or between " + std::to_string(min_interval_hours) + " and " +
                   std::to_string(24 * 365) + " hours, got " + std::to_string(interval_hours));
  }
  return Status::ok();
}

}  // namespace armhive
