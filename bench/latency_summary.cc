#include "bench/latency_summary.h"

#include <algorithm>

namespace armhive {

nlohmann::json summarise_ms(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    if (ms.empty()) return 0.0;
    size_t i = static_cast<size_t>(p * static_cast<double>(ms.size() - 1) + 0.5);
    return ms[std::min(i, ms.size() - 1)];
  };
  double sum = 0;
  for (double v : ms) sum += v;
  return {{"n", ms.size()},
          {"p50_ms", pct(0.50)},
          {"p90_ms", pct(0.90)},
          {"p99_ms", pct(0.99)},
          {"max_ms", ms.empty() ? 0 : ms.back()},
          {"mean_ms", ms.empty() ? 0 : sum / static_cast<double>(ms.size())}};
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace armhive
