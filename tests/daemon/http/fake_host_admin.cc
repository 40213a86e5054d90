#include "tests/daemon/http/fake_host_admin.h"

namespace armhive {

void FakeHostAdmin::install(HttpOptions& o) {
  o.add_host = [this](const HostSpec& spec) -> Status {
    if (spec.libvirt_uri.find("unreachable") != std::string::npos) {
      return Status(ErrorCode::kUnavailable,
                    "host " + spec.name + " (" + spec.libvirt_uri +
                        "): unable to connect to server: Name or service not known",
                    spec.name);
    }
    {
      MutexLock lock(mu_);
      added_.push_back(spec);
    }
    service_.add_host(spec.name, spec.libvirt_uri, spec.labels);
    return Status::ok();
  };
  o.remove_host = [this](const std::string& name) -> Status {
    if (name == "busy") {
      return Status(ErrorCode::kConflict,
                    "host 'busy' still has 1 lease(s) and 1 VM(s): drain it first", name, "name");
    }
    service_.remove_host(name);
    return Status::ok();
  };
}

std::vector<HostSpec> FakeHostAdmin::added() const {
  MutexLock lock(mu_);
  return added_;
}

}  // namespace armhive
