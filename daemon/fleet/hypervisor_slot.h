#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "base/thread_annotations.h"
#include "daemon/core/hypervisor.h"

namespace armhive {

// The Hypervisor the engine is given for one host: it forwards every call to the host's
// LibvirtHypervisor once the host is connected (attach), and until then fails every call with
// kUnavailable naming the host and why it is not connected. A host that could not be reached
// when armhived started is driven through it from the start (its leases show host_unreachable,
// nothing of it is adopted or destroyed) and becomes an ordinary host the moment it answers,
// without the engine having to take a new hypervisor.
//
// Ownership: borrows the attached hypervisor, which must outlive the slot (the registry keeps
// both until it goes). Threading: every method may be called from any thread; attach() at most
// once. A call that began before attach() fails as "not connected"; every call after it is
// forwarded. The event handler set before attach() is handed to the hypervisor by attach(),
// before any call is forwarded to it.
class HypervisorSlot final : public Hypervisor {
 public:
  // `host` names the host in errors; `why` is the first reason it is not connected.
  HypervisorSlot(std::string host, std::string why);

  // From now on every call goes to `target` (not nullptr). kConflict if attached already.
  Status attach(Hypervisor* target) EXCLUDES(mu_);
  bool attached() const { return target_.load() != nullptr; }
  // The latest reason it is not connected (shown until attach()).
  void set_reason(std::string why) EXCLUDES(mu_);
  std::string reason() const EXCLUDES(mu_);

  Status create_vm(const VmSpec& spec) override;
  Status destroy_vm(std::string_view name) override;
  Result<std::vector<VmInfo>> list_vms() override;
  Result<std::vector<std::string>> list_vm_files() override;
  Status set_lease(std::string_view name, std::string_view lease_id) override;
  void set_event_handler(std::function<void(const VmEvent&)> handler) override EXCLUDES(mu_);
  Status ping_agent(std::string_view name, std::chrono::milliseconds timeout) override;
  Result<std::string> guest_address(std::string_view name) override;
  Status set_authorized_keys(std::string_view name, std::string_view user,
                             const std::vector<std::string>& keys) override;
  Result<GuestExecResult> exec(std::string_view name, const GuestExecRequest& request) override;
  Result<GuestExecResult> exec_stream(std::string_view name, const GuestExecRequest& request,
                                      ExecSink& sink) override;
  Result<GuestFileTransfer> put_file(std::string_view name, const GuestFilePut& put,
                                     ByteSource& source) override;
  Result<GuestFileTransfer> get_file(std::string_view name, const std::string& path,
                                     ByteSink& sink) override;
  Result<int64_t> exec_start(std::string_view name, const GuestExecRequest& request) override;
  Result<std::optional<GuestExecResult>> exec_status(std::string_view name, int64_t pid) override;
  Result<std::string> console_log(std::string_view name, size_t max_bytes) override;
  Result<std::vector<VmCounters>> vm_counters(const std::vector<std::string>& names) override;

 private:
  Status not_connected() const EXCLUDES(mu_);

  const std::string host_;
  std::atomic<Hypervisor*> target_{nullptr};
  mutable Mutex mu_;
  std::string why_ GUARDED_BY(mu_);
  std::function<void(const VmEvent&)> handler_ GUARDED_BY(mu_);
};

}  // namespace armhive
