#pragma once

#include <algorithm>
#include <mutex>
#include <vector>

#include "daemon/core/health_series.h"

namespace armhive {

// An in-memory HealthSeriesStore, kept honest by the conformance cases that run it beside
// SqliteHealthStore (tests/daemon/store/health_store_itest.cc). Thread-safe.
class FakeHealthStore final : public HealthSeriesStore {
 public:
  explicit FakeHealthStore(size_t keep_per_series = 1000) : keep_(keep_per_series) {}

  Result<int64_t> append(const HealthResult& result) override {
    std::lock_guard lock(mu_);
    if (fail_appends) return unavailable("disk full (fake)");
    HealthResult r = result;
    r.id = ++next_id_;
    rows_.push_back(r);
    size_t n = 0;
    for (auto it = rows_.rbegin(); it != rows_.rend();) {
      if (it->host == r.host && it->pool == r.pool && ++n > keep_) {
        it = std::reverse_iterator(rows_.erase(std::next(it).base()));
      } else {
        ++it;
      }
    }
    return r.id;
  }
  Result<std::vector<HealthResult>> recent(const std::string& host, const std::string& pool,
                                           const std::string& figure, size_t limit) override {
    std::lock_guard lock(mu_);
    std::vector<HealthResult> out;
    for (auto it = rows_.rbegin(); it != rows_.rend() && out.size() < limit; ++it) {
      if (it->host == host && it->pool == pool && (figure.empty() || it->figure == figure)) {
        out.push_back(*it);
      }
    }
    std::reverse(out.begin(), out.end());
    return out;
  }
  Result<std::vector<HealthResult>> latest() override {
    std::lock_guard lock(mu_);
    std::vector<HealthResult> out;
    for (auto it = rows_.rbegin(); it != rows_.rend(); ++it) {
      bool seen = std::any_of(out.begin(), out.end(), [&](const HealthResult& o) {
        return o.host == it->host && o.pool == it->pool;
      });
      if (!seen) out.push_back(*it);
    }
    std::sort(out.begin(), out.end(), [](const HealthResult& a, const HealthResult& b) {
      return std::tie(a.host, a.pool) < std::tie(b.host, b.pool);
    });
    return out;
  }

  bool fail_appends = false;  // set before use, not while shared

 private:
  std::mutex mu_;
  size_t keep_;
  int64_t next_id_ = 0;
  std::vector<HealthResult> rows_;
};

}  // namespace armhive
