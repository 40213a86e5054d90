#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace armhive {

// Health benchmarks' decision: is a host's latest figure outside its own
// baseline band? The band is median ± k × MAD of the host's last `window` results of that
// figure (MAD = median absolute deviation, robust against the odd bad run). Only the bad side
// counts: slower throughput (or higher latency) than the band marks the host degraded, a
// faster run does not. Pure; any thread. health_scheduler.h schedules the runs, keeps the
// series and emits the events.
struct HealthBandOptions {
  size_t window = 10;         // K: the last K results form the baseline
  size_t min_history = 5;     // fewer results: no verdict yet
  double mad_multiplier = 3;  // k
  // A floor under the MAD as a fraction of the median, so a baseline of identical results
  // (MAD 0) does not flag every 0.1 % wobble.
  double min_relative_mad = 0.01;
};

struct HealthBand {
  size_t n = 0;  // results in the baseline
  double median = 0;
  double mad = 0;  // after the floor
  double low = 0;  // median - k * mad
  double high = 0;
};

enum class HealthVerdict { kInsufficientHistory, kWithinBand, kDegraded };

struct HealthCheck {
  HealthVerdict verdict = HealthVerdict::kInsufficientHistory;
  std::optional<HealthBand> band;
  double value = 0;
  std::string reason;  // for people: the figure, the band and by how much it is outside
};

// `history` oldest first (the latest K are used); nullopt below min_history or with
// non-finite values.
std::optional<HealthBand> baseline_band(const std::vector<double>& history,
                                        const HealthBandOptions& options);

// Checks `value` (the new result, not part of `history`) against the band of `history`.
HealthCheck check_health(const std::string& figure, const std::vector<double>& history,
                         double value, bool higher_is_better, const HealthBandOptions& options);

// A pool's health schedule: off (0) or every `interval_hours` >= `min_interval_hours`;
// kInvalidArgument naming `field` otherwise.
Status validate_health_interval(int interval_hours, int min_interval_hours,
                                const std::string& field);

}  // namespace armhive
