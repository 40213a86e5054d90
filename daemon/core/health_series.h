#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "daemon/core/clock.h"
#include "daemon/core/lease.h"

namespace armhive {

// Health benchmarks' time series: one result per scheduled run of a pool's short suite on a
// host, with the verdict against the host's own baseline band (daemon/bench/health_band.h).
// Plain values; the store behind HealthSeriesStore persists them.

struct HealthBandValues {
  size_t n = 0;  // results the band was made of
  double median = 0;
  double mad = 0;
  double low = 0;  // median - k × MAD
  double high = 0;
};

struct HealthResult {
  int64_t id = 0;  // assigned by the store
  TimePoint at;    // when the run finished
  std::string host;
  std::string pool;
  std::string suite;   // "compression"
  std::string figure;  // "compression.guest.t1.compress_mb_s"
  std::string label;   // "compress MB/s, 1 thread"
  std::string unit;    // "MB/s"
  bool higher_is_better = true;
  double value = 0;
  std::string run_id;  // the benchmark run ("b-...")
  // "insufficient_history" | "within_band" | "degraded"
  std::string verdict;
  std::optional<HealthBandValues> band;  // the band `value` was checked against
  std::string reason;                    // for people: figure, band, how far outside
};

// Where the series live (daemon/store/sqlite_health_store.h; tests may use it on ":memory:").
// Threading: implementations are thread-safe.
class HealthSeriesStore {
 public:
  virtual ~HealthSeriesStore() = default;
  // Stores `result` (its id is ignored) and returns its id.
  virtual Result<int64_t> append(const HealthResult& result) = 0;
  // The newest `limit` results of (host, pool), oldest first; `figure` empty: every figure.
  virtual Result<std::vector<HealthResult>> recent(const std::string& host, const std::string& pool,
                                                   const std::string& figure, size_t limit) = 0;
  // The newest result of every (host, pool), by host then pool.
  virtual Result<std::vector<HealthResult>> latest() = 0;
};

// What the health scheduler needs of the lease engine, narrowed so that it needs no engine
// header (daemon/engine/health_vm_source.h adapts a LeaseService; tests use a fake). A health run
// takes its VM through an ordinary lease, so capacity, pinning and the pool's limits apply to it as
// to a CI job. Threading: called from the scheduler's thread only; implementations must be
// thread-safe against the rest of the daemon.
class HealthVmSource {
 public:
  virtual ~HealthVmSource() = default;
  // The pool's counts now (warm VMs, leases waiting); nullopt for an unknown pool.
  virtual std::optional<PoolStatus> pool_status(const std::string& pool) = 0;
  virtual Result<Lease> create_lease(const LeaseRequest& request) = 0;
  virtual Result<Lease> get_lease(const std::string& id) = 0;
  virtual Status release_lease(const std::string& id) = 0;
  // An event on the daemon's stream (/v1/events), about the pool rather than one lease.
  virtual void pool_event(const std::string& pool, const std::string& type,
                          const std::string& detail) = 0;
  // The newest result of every health pool of this host: the host shows them, and is
  // degraded while any of them is.
  virtual void host_health(const std::vector<HealthResult>& latest) = 0;
};

}  // namespace armhive
