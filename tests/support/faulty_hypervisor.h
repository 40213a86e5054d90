#pragma once

#include "daemon/core/hypervisor.h"
#include "tests/support/fault_plan.h"

namespace armhive {

// A Hypervisor that forwards to another one, failing the calls its FaultPlan says (the call is
// then not forwarded: a failed create made nothing, a failed destroy destroyed nothing).
// Thread-safe as the wrapped hypervisor is.
class FaultyHypervisor final : public Hypervisor {
 public:
  FaultyHypervisor(Hypervisor& inner, FaultPlan& plan) : inner_(inner), plan_(plan) {}

  Status create_vm(const VmSpec& spec) override;
  Status destroy_vm(std::string_view name) override;
  Result<std::vector<VmInfo>> list_vms() override;
  Result<std::vector<std::string>> list_vm_files() override;
  Status set_lease(std::string_view name, std::string_view lease_id) override;
  Status ping_agent(std::string_view name, std::chrono::milliseconds timeout) override;
  Result<std::string> guest_address(std::string_view name) override;
  Status set_authorized_keys(std::string_view name, std::string_view user,
                             const std::vector<std::string>& keys) override;
  Result<GuestExecResult> exec(std::string_view name, const GuestExecRequest& request) override;
  Result<int64_t> exec_start(std::string_view name, const GuestExecRequest& request) override;
  Result<std::optional<GuestExecResult>> exec_status(std::string_view name, int64_t pid) override;
  Result<std::string> console_log(std::string_view name, size_t max_bytes) override;
  Result<std::vector<VmCounters>> vm_counters(const std::vector<std::string>& names) override;
  void set_event_handler(std::function<void(const VmEvent&)> handler) override;

 private:
  Hypervisor& inner_;
  FaultPlan& plan_;
};

}  // namespace armhive
