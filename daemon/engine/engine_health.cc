#include "daemon/engine/engine_health.h"

#include <spdlog/spdlog.h>

namespace armhive {

EngineHealth::EngineHealth(const Clock& clock, Metrics* metrics)
    : clock_(clock), metrics_(metrics) {
  if (metrics_) {
    metrics_->describe_counter("armhive_engine_errors_total",
                               "Failed hypervisor (libvirt) and persistence (SQLite) calls of "
                               "the lease engine, by operation and error code");
  }
}

void EngineHealth::failed(std::string_view op, const Status& status) {
  if (status.is_ok()) return;
  std::string what = std::string(op) + ": " + status.to_string();
  spdlog::warn("engine: {}", what);
  if (metrics_) {
    metrics_->inc("armhive_engine_errors_total",
                  {{"op", std::string(op)}, {"code", std::string(code_name(status.code()))}});
  }
  MutexLock lock(mu_);
  view_.state = HostState::kDegraded;
  view_.last_error = std::move(what);
  view_.last_error_at = clock_.now();
  ++view_.errors;
}

void EngineHealth::healthy() {
  MutexLock lock(mu_);
  view_.state = HostState::kOk;
}

EngineHealth::View EngineHealth::view() const {
  MutexLock lock(mu_);
  return view_;
}

}  // namespace armhive
