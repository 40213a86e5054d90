// End-to-end: a real tiny-image guest that lies. Its zstd and iperf3 are replaced (through the
// guest agent, as root in the guest can) by wrappers that print garbage, huge numbers, NaN,
// negative values or nothing; its agent is frozen so it never answers; and (through a Hypervisor
// decorator, since libvirt itself rejects non-JSON agent output) its agent replies are
// malformed. Every case must end that run failed with a clear reason, and the same runner must
// then run an honest benchmark on the same VM. One guest is booted for all the cases.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include "base/process_runner.h"
#include "daemon/bench/benchmark_runner.h"
#include "daemon/virt/guest_agent_reply.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "daemon/virt/network.h"
#include "tests/support/e2e_guest.h"
#include "tests/support/files.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Reads /run/armhive-lie-zstd; "-q" bench runs lie by that mode, everything else is real zstd.
constexpr const char* kZstdWrapper = R"(#!/bin/sh
mode=$(cat /run/armhive-lie-zstd 2>/dev/null)
[ "$1" = "-q" ] || exec REAL "$@"
hdr='bench 1.5.4 : input 8388608 bytes, 1 seconds, 0 KB blocks'
case "$mode" in
  dots) echo "$hdr"; echo '-3 1 (.) . MB/s . MB/s' ;;
  huge) echo "$hdr"; echo '-3 3072896 (2.730) 99999999999 MB/s 5583.7 MB/s  f' ;;
  nan) echo "$hdr"; echo '-3 3072896 (nan) nan MB/s nan MB/s  f' ;;
  negative) echo "$hdr"; echo '-3 -3072896 (2.730) -903.0 MB/s -5583.7 MB/s  f' ;;
  garbage) head -c 3000 /dev/urandom ;;
  nothing) ;;
  *) exec REAL "$@" ;;
esac
exit 0
)";

// Reads /run/armhive-lie-iperf3: "nothing" starts no server and says nothing; "garbage" prints
// binary noise and fails.
constexpr const char* kIperfWrapper = R"(#!/bin/sh
mode=$(cat /run/armhive-lie-iperf3 2>/dev/null)
case "$mode" in
  nothing) exit 0 ;;
  garbage) head -c 300 /dev/urandom; exit 1 ;;
  *) exec REAL "$@" ;;
esac
)";

// Forwards to the real hypervisor; while `reply` is set, a zstd bench run really runs but its
// guest-exec-status reply is replaced by `reply`, parsed by the real reply parser.
class MalformedAgent final : public Hypervisor {
 public:
  explicit MalformedAgent(Hypervisor& real) : real_(real) {}
  Status create_vm(const VmSpec& s) override { return real_.create_vm(s); }
  Status destroy_vm(std::string_view n) override { return real_.destroy_vm(n); }
  Result<std::vector<VmInfo>> list_vms() override { return real_.list_vms(); }
  Result<std::vector<std::string>> list_vm_files() override { return real_.list_vm_files(); }
  Status set_lease(std::string_view n, std::string_view l) override {
    return real_.set_lease(n, l);
  }
  Status ping_agent(std::string_view n, std::chrono::milliseconds t) override {
    return real_.ping_agent(n, t);
  }
  Result<std::string> guest_address(std::string_view n) override { return real_.guest_address(n); }
  Status set_authorized_keys(std::string_view n, std::string_view u,
                             const std::vector<std::string>& k) override {
    return real_.set_authorized_keys(n, u, k);
  }
  Result<GuestExecResult> exec(std::string_view n, const GuestExecRequest& r) override {
    auto real = real_.exec(n, r);
    if (reply.empty() || r.argv.size() < 2 || r.argv[0] != "zstd" || r.argv[1] != "-q") {
      return real;
    }
    auto parsed = parse_guest_exec_status(reply);
    if (!parsed.is_ok()) return Status(parsed.status().code(), parsed.status().message(), "vm");
    if (!parsed->has_value()) return internal_error("still running");
    return **parsed;
  }
  Result<int64_t> exec_start(std::string_view n, const GuestExecRequest& r) override {
    return real_.exec_start(n, r);
  }
  Result<std::optional<GuestExecResult>> exec_status(std::string_view n, int64_t pid) override {
    return real_.exec_status(n, pid);
  }
  Result<std::string> console_log(std::string_view n, size_t m) override {
    return real_.console_log(n, m);
  }
  void set_event_handler(std::function<void(const VmEvent&)> h) override {
    real_.set_event_handler(std::move(h));
  }
  std::string reply;

 private:
  Hypervisor& real_;
};

Result<GuestExecResult> run_in_guest(Hypervisor& hv, const std::string& vm,
                                     std::vector<std::string> argv, std::string stdin_data = {}) {
  return hv.exec(vm, {.argv = std::move(argv),
                      .stdin_data = std::move(stdin_data),
                      .timeout = std::chrono::seconds(30)});
}

// Moves the guest's TOOL aside and installs `wrapper` (REAL = the moved binary) in its place.
void install_wrapper(Hypervisor& hv, const std::string& vm, const std::string& tool,
                     std::string wrapper) {
  auto where = run_in_guest(hv, vm, {"sh", "-c", "command -v \"$0\"", tool});
  REQUIRE(where.is_ok());
  INFO("command -v " << tool << ": exit " << where->exit_code << " out \"" << where->out
                     << "\" err \"" << where->err << "\"");
  std::string path = where->out.substr(0, where->out.find('\n'));
  REQUIRE(std::regex_match(path, std::regex("/[a-z0-9/._-]+")));
  const std::string real = path + ".real";
  for (size_t at; (at = wrapper.find("REAL")) != std::string::npos;) wrapper.replace(at, 4, real);
  auto moved = run_in_guest(hv, vm, {"mv", path, real});
  REQUIRE(moved.is_ok());
  REQUIRE(moved->exit_code == 0);
  auto written =
      run_in_guest(hv, vm, {"sh", "-c", "cat > \"$0\" && chmod 755 \"$0\"", path}, wrapper);
  REQUIRE(written.is_ok());
  REQUIRE(written->exit_code == 0);
}

void set_lie(Hypervisor& hv, const std::string& vm, const std::string& tool,
             const std::string& mode) {
  auto r = run_in_guest(
      hv, vm, {"sh", "-c", "printf %s \"$0\" > \"$1\"", mode, "/run/armhive-lie-" + tool});
  REQUIRE(r.is_ok());
  REQUIRE(r->exit_code == 0);
}

TEST_CASE("a lying guest fails its benchmark runs clearly and the runner keeps serving",
          "[hostile][e2e]") {
  E2eGuest guest;
  guest.boot({.tag = "hostile",
              .net = {"armhive-hostile-e2e", "ahhostile0", "10.231.10.1/24", "10.231.10.10",
                      "10.231.10.100", 1500},
              .pool = "hostile",
              .vcpus = 1,
              .memory_mib = 512});
  LibvirtHypervisor& hv = guest.hv();
  const VmSpec& spec = guest.spec();
  const fs::path& state = guest.state();
  LeaseTarget target = guest.target();
  REQUIRE_FALSE(target.corpus_path.empty());

  install_wrapper(hv, spec.name, "zstd", kZstdWrapper);
  install_wrapper(hv, spec.name, "iperf3", kIperfWrapper);

  MalformedAgent agent_hv(hv);
  SubprocessRunner processes;
  SystemClock clock;
  BenchmarkRunnerOptions opts;
  opts.runs_dir = (state / "runs").string();
  opts.zstd_timeout = std::chrono::minutes(3);
  opts.client_retry_delay = 200ms;
  BenchmarkRunner runner(
      agent_hv, processes, [&](const std::string&) -> Result<LeaseTarget> { return target; }, clock,
      opts);
  REQUIRE(runner.load().is_ok());

  auto run_once = [&](std::vector<std::string> suites) {
    BenchmarkRequest req;
    req.lease_id = "l-hostile";
    req.owner = "e2e";
    req.suites = std::move(suites);
    req.network.streams = 1;
    req.network.duration_s = 2;
    req.network.interval_s = 1;
    req.network.both_directions = false;
    req.compression.repeats = 1;
    req.compression.multi_thread = false;
    auto started = runner.start(req);
    REQUIRE(started.is_ok());
    auto run = runner.wait(started->id, std::chrono::minutes(6));
    REQUIRE(run.is_ok());
    return std::move(run).value();
  };
  auto honest = [&](const std::vector<std::string>& suites) {
    set_lie(hv, spec.name, "zstd", "");
    set_lie(hv, spec.name, "iperf3", "");
    agent_hv.reply.clear();
    BenchmarkRun run = run_once(suites);
    INFO("honest run error: " << run.error);
    CHECK(run.state == BenchmarkState::kSucceeded);
  };

  struct Lie {
    std::string tool, mode, reason;
  };
  for (const Lie& lie :
       {Lie{"zstd", "dots", "not a decimal number"},
        Lie{"zstd", "huge", "outside the plausible range"}, Lie{"zstd", "nan", "no result"},
        Lie{"zstd", "negative", "no result"}, Lie{"zstd", "garbage", "no result"},
        Lie{"zstd", "nothing", "no result"}, Lie{"iperf3", "nothing", "unable to connect"},
        Lie{"iperf3", "garbage", "exit code 1"}}) {
    set_lie(hv, spec.name, lie.tool, lie.mode);
    BenchmarkRun run = run_once({lie.tool == "zstd" ? "compression" : "network"});
    INFO(lie.tool << " " << lie.mode << ": " << run.error);
    CHECK(run.state == BenchmarkState::kFailed);
    CHECK_THAT(run.error, Catch::Contains(lie.reason));
    set_lie(hv, spec.name, lie.tool, "");
  }
  honest({"compression"});
  honest({"network"});

  // Agent replies that are JSON but lie: wrong types, absurd numbers, bad base64.
  for (const char* reply :
       {R"({"return":{"exited":true,"exitcode":1e300}})", R"({"return":{"exited":"yes"}})",
        R"({"return":{"exited":true,"exitcode":0,"out-data":"***"}})", R"({"return":[]})"}) {
    agent_hv.reply = reply;
    BenchmarkRun run = run_once({"compression"});
    INFO(reply << ": " << run.error);
    CHECK(run.state == BenchmarkState::kFailed);
    CHECK_THAT(run.error, Catch::Contains("guest-exec-status reply"));
  }
  honest({"compression"});

  // An agent that never answers: frozen (SIGSTOP) for 40 s, then thawed by the guest itself.
  auto frozen =
      run_in_guest(hv, spec.name,
                   {"sh", "-c",
                    "(sleep 3; p=$(pidof qemu-ga); kill -STOP $p; sleep 40; kill -CONT $p) "
                    ">/dev/null 2>&1 </dev/null &"});
  REQUIRE(frozen.is_ok());
  std::this_thread::sleep_for(6s);
  const auto frozen_at = SteadyClock::now();
  BenchmarkRun stuck = run_once({"compression"});
  INFO("frozen agent: " << stuck.error);
  CHECK(stuck.state == BenchmarkState::kFailed);
  CHECK_FALSE(stuck.error.empty());
  std::this_thread::sleep_until(frozen_at + 45s);
  bool thawed = false;
  for (int i = 0; i < 60 && !thawed; ++i) {
    thawed = hv.ping_agent(spec.name, 2s).is_ok();
    if (!thawed) std::this_thread::sleep_for(1s);
  }
  REQUIRE(thawed);
  honest({"compression"});
}

}  // namespace
}  // namespace armhive
