#pragma once

#include <functional>
#include <string_view>

#include "base/result.h"
#include "daemon/core/hypervisor.h"

namespace armhive {

// A GuestAgent that sends each call to the guest agent of the host the VM runs on, for the
// users of the agent that know a VM by its name only (benchmarks, startup commands) when the
// engine drives several hosts. `route` answers the VM's host's agent, or an error (kNotFound
// for a VM no host has) that the call then returns unchanged.
//
// Threading: as the agents it routes to; `route` must be thread-safe (the engine's takes its
// lock for the lookup only, never across the call).
class VmAgentRouter final : public GuestAgent {
 public:
  using Route = std::function<Result<GuestAgent*>(std::string_view vm_name)>;
  explicit VmAgentRouter(Route route) : route_(std::move(route)) {}

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

 private:
  Route route_;
};

}  // namespace armhive
