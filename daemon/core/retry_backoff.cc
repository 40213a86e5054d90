#include "daemon/core/retry_backoff.h"

#include <algorithm>

namespace armhive {

std::chrono::milliseconds retry_backoff(std::chrono::milliseconds base,
                                        std::chrono::milliseconds cap, int failures) {
  const int doublings = std::min(std::max(failures, 1) - 1, 10);
  return std::min<std::chrono::milliseconds>(base * (1 << doublings), cap);
}

}  // namespace armhive
