#include "daemon/engine/vm_agent_router.h"

namespace armhive {

Status VmAgentRouter::ping_agent(std::string_view name, std::chrono::milliseconds timeout) {
  ARMHIVE_ASSIGN_OR_RETURN(GuestAgent * agent, route_(name));
  return agent->ping_agent(name, timeout);
}

Result<std::string> VmAgentRouter::guest_address(std::string_view name) {
  ARMHIVE_ASSIGN_OR_RETURN(GuestAgent * agent, route_(name));
  return agent->guest_address(name);
}

Status VmAgentRouter::set_authorized_keys(std::string_view name, std::string_view user,
                                          const std::vector<std::string>& keys) {
  ARMHIVE_ASSIGN_OR_RETURN(GuestAgent * agent, route_(name));
  return agent->set_authorized_keys(name, user, keys);
}

Result<GuestExecResult> VmAgentRouter::exec(std::string_view name,
                                            const GuestExecRequest& request) {
  ARMHIVE_ASSIGN_OR_RETURN(GuestAgent * agent, route_(name));
  return agent->exec(name, request);
}

Result<GuestExecResult> VmAgentRouter::exec_stream(std::string_view name,
                                                   const GuestExecRequest& request,
                                                   ExecSink& sink) {
  ARMHIVE_ASSIGN_OR_RETURN(GuestAgent * agent, route_(name));
  return agent->exec_stream(name, request, sink);
}

Result<GuestFileTransfer> VmAgentRouter::put_file(std::string_view name, const GuestFilePut& put,
                                                  ByteSource& source) {
  ARMHIVE_ASSIGN_OR_RETURN(GuestAgent * agent, route_(name));
  return agent->put_file(name, put, source);
}

Result<GuestFileTransfer> VmAgentRouter::get_file(std::string_view name, const std::string& path,
                                                  ByteSink& sink) {
  ARMHIVE_ASSIGN_OR_RETURN(GuestAgent * agent, route_(name));
  return agent->get_file(name, path, sink);
}

Result<int64_t> VmAgentRouter::exec_start(std::string_view name, const GuestExecRequest& request) {
  ARMHIVE_ASSIGN_OR_RETURN(GuestAgent * agent, route_(name));
  return agent->exec_start(name, request);
}

Result<std::optional<GuestExecResult>> VmAgentRouter::exec_status(std::string_view name,
                                                                  int64_t pid) {
  ARMHIVE_ASSIGN_OR_RETURN(GuestAgent * agent, route_(name));
  return agent->exec_status(name, pid);
}

}  // namespace armhive
