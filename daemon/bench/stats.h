#pragma once

#include <cstddef>
#include <vector>

namespace armhive {

// Median and spread of repeated measurements ("a figure without its spread is not
// comparable"). Pure; any thread.
struct SampleSpread {
  size_t n = 0;
  double median = 0;
  double min = 0;
  double max = 0;
  double mean = 0;
  double stddev = 0;  // sample standard deviation (n-1); 0 for n < 2
  double cv = 0;      // stddev / mean; 0 when mean is 0
};

SampleSpread compute_spread(std::vector<double> samples);

}  // namespace armhive
