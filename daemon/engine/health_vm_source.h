#pragma once

#include "daemon/core/health_series.h"
#include "daemon/engine/lease_service.h"

namespace armhive {

// The health scheduler's view of a LeaseService (daemon/bench/health_scheduler.h): its leases
// are ordinary leases, its events go to the service's stream, its results to hosts().
// Borrows the service; thread-safe as the service is.
class LeaseServiceHealthSource final : public HealthVmSource {
 public:
  explicit LeaseServiceHealthSource(LeaseService& leases) : leases_(leases) {}

  std::optional<PoolStatus> pool_status(const std::string& pool) override {
    for (PoolStatus& p : leases_.pools()) {
      if (p.config.name == pool) return std::move(p);
    }
    return std::nullopt;
  }
  Result<Lease> create_lease(const LeaseRequest& request) override {
    return leases_.create_lease(request);
  }
  Result<Lease> get_lease(const std::string& id) override { return leases_.get_lease(id); }
  Status release_lease(const std::string& id) override {
    auto r = leases_.release_lease(id);
    return r.is_ok() ? Status::ok() : r.status();
  }
  void pool_event(const std::string& pool, const std::string& type,
                  const std::string& detail) override {
    leases_.record_pool_event(pool, type, detail);
  }
  void host_health(const std::vector<HealthResult>& latest) override {
    leases_.set_host_health(latest);
  }

 private:
  LeaseService& leases_;
};

}  // namespace armhive
