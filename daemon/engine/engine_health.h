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
// armhive_engine_errors_total{op, code[, host]}, logged once per call, and shown on the host as
// degraded with the last error until a later reconcile pass finds everything healthy.
//
// Threading: thread-safe (one leaf mutex, never held across a call out).
class EngineHealth {
 public:
  // `host`: the libvirt host whose calls this tracks (a `host` label on the counter); empty
  // for the database's.
  EngineHealth(const Clock& clock, Metrics* metrics, std::string host = {});

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
  const std::string host_;
  mutable Mutex mu_;
  View view_ GUARDED_BY(mu_);
};

}  // namespace armhive
