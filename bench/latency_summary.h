#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <vector>

namespace armhive {

// The latency figures the benchmarks report for one mode: n, p50/p90/p99, max and mean, in
// milliseconds (nearest-rank percentiles of the samples).
nlohmann::json summarise_ms(std::vector<double> ms);

// Milliseconds from `t0` to now on the steady clock.
double ms_since(std::chrono::steady_clock::time_point t0);

}  // namespace armhive
