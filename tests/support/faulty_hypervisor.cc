#include "tests/support/faulty_hypervisor.h"

namespace armhive {

#define ARMHIVE_FAULT(method) \
  if (auto fault = plan_.on_call(method)) return *fault

Status FaultyHypervisor::create_vm(const VmSpec& spec) {
  ARMHIVE_FAULT("create_vm");
  return inner_.create_vm(spec);
}
Status FaultyHypervisor::destroy_vm(std::string_view name) {
  ARMHIVE_FAULT("destroy_vm");
  return inner_.destroy_vm(name);
}
Result<std::vector<VmInfo>> FaultyHypervisor::list_vms() {
  ARMHIVE_FAULT("list_vms");
  return inner_.list_vms();
}
Result<std::vector<std::string>> FaultyHypervisor::list_vm_files() {
  ARMHIVE_FAULT("list_vm_files");
  return inner_.list_vm_files();
}
Status FaultyHypervisor::set_lease(std::string_view name, std::string_view lease_id) {
  ARMHIVE_FAULT("set_lease");
  return inner_.set_lease(name, lease_id);
}
Status FaultyHypervisor::ping_agent(std::string_view name, std::chrono::milliseconds timeout) {
  ARMHIVE_FAULT("ping_agent");
  return inner_.ping_agent(name, timeout);
}
Result<std::string> FaultyHypervisor::guest_address(std::string_view name) {
  ARMHIVE_FAULT("guest_address");
  return inner_.guest_address(name);
}
Status FaultyHypervisor::set_authorized_keys(std::string_view name, std::string_view user,
                                             const std::vector<std::string>& keys) {
  ARMHIVE_FAULT("set_authorized_keys");
  return inner_.set_authorized_keys(name, user, keys);
}
Result<GuestExecResult> FaultyHypervisor::exec(std::string_view name,
                                               const GuestExecRequest& request) {
  ARMHIVE_FAULT("exec");
  return inner_.exec(name, request);
}

Result<int64_t> FaultyHypervisor::exec_start(std::string_view name,
                                             const GuestExecRequest& request) {
  ARMHIVE_FAULT("exec_start");
  return inner_.exec_start(name, request);
}

Result<std::optional<GuestExecResult>> FaultyHypervisor::exec_status(std::string_view name,
                                                                     int64_t pid) {
  ARMHIVE_FAULT("exec_status");
  return inner_.exec_status(name, pid);
}
Result<std::string> FaultyHypervisor::console_log(std::string_view name, size_t max_bytes) {
  ARMHIVE_FAULT("console_log");
  return inner_.console_log(name, max_bytes);
}
Result<std::vector<VmCounters>> FaultyHypervisor::vm_counters(
    const std::vector<std::string>& names) {
  ARMHIVE_FAULT("vm_counters");
  return inner_.vm_counters(names);
}
void FaultyHypervisor::set_event_handler(std::function<void(const VmEvent&)> handler) {
  inner_.set_event_handler(std::move(handler));
}

#undef ARMHIVE_FAULT

}  // namespace armhive
