#include "daemon/fleet/hypervisor_slot.h"

namespace armhive {

HypervisorSlot::HypervisorSlot(std::string host, std::string why)
    : host_(std::move(host)), why_(std::move(why)) {}

Status HypervisorSlot::attach(Hypervisor* target) {
  if (target == nullptr) return invalid_argument("hypervisor", "attach takes a hypervisor");
  MutexLock lock(mu_);
  if (target_.load() != nullptr) {
    return Status(ErrorCode::kConflict, "host " + host_ + " is connected already", host_);
  }
  // The handler first: an event of a VM adopted after the first forwarded call must find it.
  if (handler_) target->set_event_handler(handler_);
  target_.store(target);
  return Status::ok();
}

void HypervisorSlot::set_reason(std::string why) {
  MutexLock lock(mu_);
  why_ = std::move(why);
}

std::string HypervisorSlot::reason() const {
  MutexLock lock(mu_);
  return why_;
}

Status HypervisorSlot::not_connected() const {
  MutexLock lock(mu_);
  return Status(ErrorCode::kUnavailable, "host " + host_ + " is not connected: " + why_, host_);
}

void HypervisorSlot::set_event_handler(std::function<void(const VmEvent&)> handler) {
  MutexLock lock(mu_);
  handler_ = handler;
  if (Hypervisor* t = target_.load()) t->set_event_handler(std::move(handler));
}

// Each call: forwarded when attached, "not connected" before.
#define ARMHIVE_SLOT_FORWARD(call)                    \
  if (Hypervisor* t = target_.load()) return t->call; \
  return not_connected()

Status HypervisorSlot::create_vm(const VmSpec& spec) { ARMHIVE_SLOT_FORWARD(create_vm(spec)); }
Status HypervisorSlot::destroy_vm(std::string_view name) { ARMHIVE_SLOT_FORWARD(destroy_vm(name)); }
Result<std::vector<VmInfo>> HypervisorSlot::list_vms() { ARMHIVE_SLOT_FORWARD(list_vms()); }
Result<std::vector<std::string>> HypervisorSlot::list_vm_files() {
  ARMHIVE_SLOT_FORWARD(list_vm_files());
}
Status HypervisorSlot::set_lease(std::string_view name, std::string_view lease_id) {
  ARMHIVE_SLOT_FORWARD(set_lease(name, lease_id));
}
Status HypervisorSlot::ping_agent(std::string_view name, std::chrono::milliseconds timeout) {
  ARMHIVE_SLOT_FORWARD(ping_agent(name, timeout));
}
Result<std::string> HypervisorSlot::guest_address(std::string_view name) {
  ARMHIVE_SLOT_FORWARD(guest_address(name));
}
Status HypervisorSlot::set_authorized_keys(std::string_view name, std::string_view user,
                                           const std::vector<std::string>& keys) {
  ARMHIVE_SLOT_FORWARD(set_authorized_keys(name, user, keys));
}
Result<GuestExecResult> HypervisorSlot::exec(std::string_view name,
                                             const GuestExecRequest& request) {
  ARMHIVE_SLOT_FORWARD(exec(name, request));
}
Result<GuestExecResult> HypervisorSlot::exec_stream(std::string_view name,
                                                    const GuestExecRequest& request,
                                                    ExecSink& sink) {
  ARMHIVE_SLOT_FORWARD(exec_stream(name, request, sink));
}
Result<GuestFileTransfer> HypervisorSlot::put_file(std::string_view name, const GuestFilePut& put,
                                                   ByteSource& source) {
  ARMHIVE_SLOT_FORWARD(put_file(name, put, source));
}
Result<GuestFileTransfer> HypervisorSlot::get_file(std::string_view name, const std::string& path,
                                                   ByteSink& sink) {
  ARMHIVE_SLOT_FORWARD(get_file(name, path, sink));
}
Result<int64_t> HypervisorSlot::exec_start(std::string_view name, const GuestExecRequest& request) {
  ARMHIVE_SLOT_FORWARD(exec_start(name, request));
}
Result<std::optional<GuestExecResult>> HypervisorSlot::exec_status(std::string_view name,
                                                                   int64_t pid) {
  ARMHIVE_SLOT_FORWARD(exec_status(name, pid));
}
Result<std::string> HypervisorSlot::console_log(std::string_view name, size_t max_bytes) {
  ARMHIVE_SLOT_FORWARD(console_log(name, max_bytes));
}

Result<std::vector<VmCounters>> HypervisorSlot::vm_counters(const std::vector<std::string>& names) {
  ARMHIVE_SLOT_FORWARD(vm_counters(names));
}

#undef ARMHIVE_SLOT_FORWARD

}  // namespace armhive
