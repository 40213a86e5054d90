#pragma once

#include <mutex>
#include <string>
#include <string_view>

#include "base/metrics.h"
#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/core/clock.h"
#include "daemon/engine/lease_service.h"

namespace armhive {

// Makes every failing hypervisor or persistence call visible: counted in
// armhive_engine_errors_total{op, code}, logged once per call, and shown on the host as
// degraded with the last error until a later reconcile pass finds everything healthy.
//
// Threading: thread-safe (one leaf mutex, never held across a call out).
class EngineHealth {
 public:
  EngineHealth(const Clock& clock, Metrics* metrics);

  // Records a failed `op` ("hypervisor.create_vm", "store.update", ...). Ignores ok statuses.
  void failed(std::string_view op, const Status& status);
  // A complete pass found nothing failing: back to ok (the last error stays for display).
  void healthy();

  struct View {
    HostState state = HostState::kOk;
    std::string last_error;  // "op: Status::to_string()", empty if nothing ever failed
    TimePoint last_error_at;
    uint64_t errors = 0;  // failures since start
  };
  View view() const;

 private:
  const Clock& clock_;
  Metrics* metrics_;
  mutable Mutex mu_;
  View view_ GUARDED_BY(mu_);
};

}  // namespace armhive
