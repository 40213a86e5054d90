#pragma once

#include <chrono>

namespace armhive {

// How long to wait after `failures` consecutive failures: base × 2^(failures − 1), at most
// `cap` (failures below 1 count as 1). The exponent stops at 10, so no product overflows.
// Used for failed boots (per pool), failed destroys (per VM) and failed writes (the persist
// queue): a broken image, host or disk never turns into a tight retry loop. Pure.
std::chrono::milliseconds retry_backoff(std::chrono::milliseconds base,
                                        std::chrono::milliseconds cap, int failures);

}  // namespace armhive
