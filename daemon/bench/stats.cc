#include "daemon/bench/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace armhive {

SampleSpread compute_spread(std::vector<double> samples) {
  SampleSpread s;
  s.n = samples.size();
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.min = samples.front();
  s.max = samples.back();
  size_t mid = s.n / 2;
  s.median = s.n % 2 == 1 ? samples[mid] : (samples[mid - 1] + samples[mid]) / 2;
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(s.n);
  if (s.n >= 2) {
    double sq = 0;
    for (double v : samples) sq += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(sq / static_cast<double>(s.n - 1));
  }
  s.cv = s.mean != 0 ? s.stddev / s.mean : 0;
  return s;
}

}  // namespace armhive
