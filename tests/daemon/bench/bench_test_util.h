#pragma once

#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/core/hypervisor.h"

namespace armhive::bench_test {

inline std::string fixture_path(const std::string& name) {
  return std::string(ARMHIVE_FIXTURES_DIR) + "/bench/" + name;
}

inline std::string read_fixture(const std::string& name) {
  std::ifstream in(fixture_path(name), std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// An argv as one line, for tests that look for what ran.
inline std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// A Hypervisor for the suites' tests: one running guest at `address` whose lifecycle calls all
// succeed and do nothing; what its commands do is the subclass's exec(). The suites never start
// background processes, so exec_start/exec_status fail.
class ExecOnlyHypervisor : public Hypervisor {
 public:
  explicit ExecOnlyHypervisor(std::string address) : address_(std::move(address)) {}
  Status create_vm(const VmSpec&) override { return Status::ok(); }
  Status destroy_vm(std::string_view) override { return Status::ok(); }
  Result<std::vector<VmInfo>> list_vms() override { return std::vector<VmInfo>{}; }
  Result<std::vector<std::string>> list_vm_files() override { return std::vector<std::string>{}; }
  Status set_lease(std::string_view, std::string_view) override { return Status::ok(); }
  Status ping_agent(std::string_view, std::chrono::milliseconds) override { return Status::ok(); }
  Result<std::string> guest_address(std::string_view) override { return address_; }
  Status set_authorized_keys(std::string_view, std::string_view,
                             const std::vector<std::string>&) override {
    return Status::ok();
  }
  Result<std::string> console_log(std::string_view, size_t) override { return std::string(); }
  void set_event_handler(std::function<void(const VmEvent&)>) override {}
  Result<int64_t> exec_start(std::string_view, const GuestExecRequest&) override {
    return internal_error("not used by the suites");
  }
  Result<std::optional<GuestExecResult>> exec_status(std::string_view, int64_t) override {
    return internal_error("not used by the suites");
  }

 private:
  std::string address_;
};

}  // namespace armhive::bench_test
