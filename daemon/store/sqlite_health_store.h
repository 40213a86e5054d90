#pragma once

#include <memory>
#include <string>
#include <vector>

#include "daemon/core/health_series.h"
#include "daemon/store/database.h"

namespace armhive {

// The health benchmarks' time series in SQLite (table health_results, migration component
// "health"). Keeps at most `keep_per_series` results per (host, pool): older rows are dropped
// when a new one is appended, in the same transaction.
//
// Owns nothing but a reference to the Database (which must outlive it). Thread-safe (every
// call is one statement or transaction of the Database).
class SqliteHealthStore final : public HealthSeriesStore {
 public:
  static Result<std::unique_ptr<SqliteHealthStore>> open(Database& db,
                                                         size_t keep_per_series = 1000);

  Result<int64_t> append(const HealthResult& result) override;
  Result<std::vector<HealthResult>> recent(const std::string& host, const std::string& pool,
                                           const std::string& figure, size_t limit) override;
  Result<std::vector<HealthResult>> latest() override;

 private:
  SqliteHealthStore(Database& db, size_t keep) : db_(db), keep_(keep) {}
  Database& db_;
  size_t keep_;
};

}  // namespace armhive
