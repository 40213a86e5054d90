#include "daemon/core/hypervisor.h"

#include <algorithm>

namespace armhive {

Status validate_domain_name(std::string_view name) {
  bool ok = !name.empty() && name.size() <= 63 && name.front() != '-' &&
            std::all_of(name.begin(), name.end(), [](char c) {
              return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
            });
  if (!ok) return invalid_argument("name", "domain name must be 1-63 characters of [a-z0-9-]");
  return Status::ok();
}

Result<GuestExecResult> GuestAgent::exec_stream(std::string_view name,
                                                const GuestExecRequest& request, ExecSink& sink) {
  GuestExecRequest buffered = request;
  if (buffered.timeout <= std::chrono::milliseconds::zero())
    buffered.timeout = std::chrono::hours(1);
  ARMHIVE_ASSIGN_OR_RETURN(GuestExecResult r, exec(name, buffered));
  sink.started();
  if (!r.out.empty()) sink.output(ExecOutputStream::kStdout, r.out);
  if (!r.err.empty()) sink.output(ExecOutputStream::kStderr, r.err);
  r.out.clear();
  r.err.clear();
  return r;
}

Result<GuestFileTransfer> GuestAgent::put_file(std::string_view name, const GuestFilePut& put,
                                               ByteSource& source) {
  (void)put;
  (void)source;
  return unavailable("this hypervisor cannot transfer guest files", std::string(name));
}

Result<GuestFileTransfer> GuestAgent::get_file(std::string_view name, const std::string& path,
                                               ByteSink& sink) {
  (void)path;
  (void)sink;
  return unavailable("this hypervisor cannot transfer guest files", std::string(name));
}

Result<std::vector<VmCounters>> VmMeter::vm_counters(const std::vector<std::string>& names) {
  (void)names;
  return std::vector<VmCounters>{};
}

}  // namespace armhive
