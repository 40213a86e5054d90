#pragma once

#include <mutex>

#include "daemon/core/clock.h"

namespace armhive {

// A Clock tests move by hand. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start = from_unix_ms(1'800'000'000'000)) : now_(start) {}
  TimePoint now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }
  void advance(std::chrono::milliseconds d) {
    std::lock_guard lock(mu_);
    now_ += d;
  }

 private:
  mutable std::mutex mu_;
  TimePoint now_;
};

}  // namespace armhive
