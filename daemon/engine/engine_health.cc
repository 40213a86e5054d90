#include "daemon/engine/engine_health.h"

#include <spdlog/spdlog.h>

namespace armhive {

EngineHealth::EngineHealth(const Clock& clock, Metrics* metrics, std::string host)
    : clock_(clock), metrics_(metrics), host_(std::move(host)) {
  if (metrics_) {
    metrics_->describe_counter("armhive_engine_errors_total",
                               "Failed hypervisor (libvirt) and persistence (SQLite) calls of "
                               "the lease engine, by operation, error code and (for libvirt "
                               "calls) host");
  }
}

void EngineHealth::failed(std::string_view op, const Status& status) {
  if (status.is_ok()) return;
  std::string what = std::string(op) + ": " + status.to_string();
  if (host_.empty()) {
    spdlog::warn("engine: {}", what);
  } else {
    spdlog::warn("engine: host {}: {}", host_, what);
  }
  if (metrics_) {
    Metrics::Labels labels{{"op", std::string(op)},
                           {"code", std::string(code_name(status.code()))}};
    if (!host_.empty()) labels.emplace("host", host_);
    metrics_->inc("armhive_engine_errors_total", labels);
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
