// End-to-end: the `ci` image (debian-12 + the ci layer, built by the "e2e: build ci image"
// fixture into $ARMHIVE_E2E_CI_CATALOG) as a CI user meets it: a real armhived warms a pool of
// it, a lease is handed out ready with its SSH host keys read through the guest agent, a real
// OpenSSH client logs in with those keys checked strictly, and the toolchain a job builds with
// is there and works (a C program compiled and run in the guest). Prints the time from the
// daemon's start to the warm VM (cold boot -> agent -> host keys) for BENCHMARKS.md, beside
// tiny's in the same run.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "api/client.h"
#include "base/process_runner.h"
#include "tests/support/daemon_process.h"
#include "tests/support/e2e_daemon.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string ci_catalog() {
  const char* c = std::getenv("ARMHIVE_E2E_CI_CATALOG");
  return c ? c : "/var/cache/armhive/e2e-catalog/ci";
}

// One 1-vCPU ci VM on the dedicated CPU 1, kept warm; a Debian guest with a toolchain wants
// more memory than tiny's 384 MiB.
std::string ci_pool_toml() { return one_core_pool_toml(1, "20m", "ci", 1024); }

ExecResultDto run_in(Client& api, const std::string& lease, std::vector<std::string> argv,
                     int64_t timeout_s = 120) {
  ExecRequestDto req;
  req.argv = std::move(argv);
  req.timeout_s = timeout_s;
  auto r = api.exec(lease, req);
  INFO("exec: " << r.status().to_string());
  REQUIRE(r.is_ok());
  return *r;
}

// Whether the first pool gets a warm VM within 10 minutes (a Debian guest under TCG).
bool first_pool_warm(Client& api) {
  return eventually(
      [&] {
        auto pools = api.pools();
        return pools.is_ok() && !pools->empty() && (*pools)[0].warm == 1;
      },
      600s, 250ms);
}

// Seconds from armhived's start to its pool's one VM warm (cold boot -> agent -> host keys).
double seconds_to_warm(const std::string& state, const std::string& catalog, int port,
                       const std::string& pool_toml) {
  DaemonProcess daemon(state, catalog, port, pool_toml);
  const auto t0 = Clock::now();
  Status started = daemon.start();
  INFO(started.to_string());
  REQUIRE(started.is_ok());
  auto api = daemon.client();
  const bool warm = first_pool_warm(*api);
  INFO(daemon.log());
  REQUIRE(warm);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  daemon.kill(SIGTERM);
  return s;
}

TEST_CASE("tiny and ci side by side: armhived's start to a warm VM", "[ci-image]") {
  // Interleaved, twice each, on the same dedicated core, for BENCHMARKS.md; each must get warm
  // (seconds_to_warm REQUIREs it).
  std::vector<double> tiny, ci;
  for (int round = 0; round < 2; ++round) {
    tiny.push_back(seconds_to_warm(e2e_state() + "/boot-tiny", e2e_state() + "/images", 18497,
                                   one_core_pool_toml(1)));
    ci.push_back(seconds_to_warm(e2e_state() + "/boot-ci", ci_catalog(), 18498, ci_pool_toml()));
  }
  std::printf("boot side by side (TCG, start -> warm): tiny %.1f s, %.1f s; ci %.1f s, %.1f s\n",
              tiny[0], tiny[1], ci[0], ci[1]);
}

TEST_CASE(
    "the ci image warms, hands out a lease with its host keys, takes an ssh login and "
    "compiles a program",
    "[ci-image]") {
  const std::string state = e2e_state() + "/ci-image";
  DaemonProcess daemon(state, ci_catalog(), 18490, ci_pool_toml());
  const auto t0 = Clock::now();
  Status started = daemon.start();
  INFO(started.to_string());
  REQUIRE(started.is_ok());
  auto api = daemon.client();

  // Cold boot -> agent -> host keys read: the pool's VM becomes warm.
  const bool warm = first_pool_warm(*api);
  INFO(daemon.log());
  REQUIRE(warm);
  const double warm_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf(
      "ci image e2e: warm %.1f s after armhived started (cold boot to agent and host "
      "keys, TCG)\n",
      warm_s);

  LeaseDto lease = lease_warm_vm(*api, state);
  REQUIRE(lease.ssh.has_value());
  CHECK_FALSE(lease.ssh->host_keys.empty());
  const std::string known_hosts = state + "/known_hosts";
  std::ofstream(known_hosts) << lease.ssh->known_hosts;

  // A real OpenSSH login, the host key checked against the lease's first response.
  SubprocessRunner run;
  auto ssh =
      run.run({.argv = {"ssh", "-i", state + "/id_ed25519", "-o",
                        "HostKeyAlias=" + lease.ssh->host_key_alias, "-o",
                        "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + known_hosts,
                        "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR",
                        lease.ssh->user + "@" + lease.ssh->host,
                        ". /etc/os-release; echo \"$ID $VERSION_ID\"; uname -m; hostname"},
               .timeout = 60s});
  REQUIRE(ssh.is_ok());
  INFO("ssh: " << ssh->out << ssh->err);
  REQUIRE(ssh->ok());
  CHECK(ssh->out.find("debian 12\naarch64\n") == 0);

  // Where its boot went, by systemd's account (for BENCHMARKS.md; the guest's clock).
  auto boot = run_in(*api, lease.id,
                     {"/bin/sh", "-c",
                      "exec 2>&1; systemd-analyze time; systemd-analyze blame | head -n 12; "
                      "systemd-analyze critical-chain --no-pager | head -n 20"});
  std::printf("ci image boot, by systemd-analyze:\n%s\n", boot.out.c_str());

  // The toolchain a job builds with.
  auto tools = run_in(*api, lease.id,
                      {"/bin/sh", "-c",
                       "gcc --version | head -1; cmake --version | head -1; ninja --version; "
                       "git --version; git lfs version; python3 --version; ccache --version | "
                       "head -1; pkg-config --version; jq --version; curl --version | head -1; "
                       "zstd --version; unzip -v | head -1; sudo --version | head -1"});
  INFO(tools.out << tools.err);
  CHECK(tools.exit_code == 0);
  for (const char* want :
       {"gcc (Debian 12", "cmake version 3.25", "git version 2.39", "git-lfs/", "Python 3.11",
        "ccache version", "jq-1.6", "curl 7.88", "Zstandard", "UnZip", "Sudo version"}) {
    CHECK_THAT(tools.out, Catch::Contains(want));
  }

  // And it builds: a C program compiled with CMake + Ninja and run, in the guest.
  auto build =
      run_in(*api, lease.id,
             {"/bin/bash", "-c",
              "set -eo pipefail; d=$(mktemp -d); cd \"$d\"; "
              "printf 'cmake_minimum_required(VERSION 3.20)\\nproject(hello C)\\n"
              "add_executable(hello hello.c)\\n' > CMakeLists.txt; "
              "printf '#include <stdio.h>\\nint main(void){printf(\"built in %%s\\\\n\", "
              "\"armhive\");return 0;}\\n' > hello.c; "
              "cmake -S . -B b -G Ninja >/dev/null; cmake --build b >/dev/null; ./b/hello"},
             600);
  INFO(build.out << build.err);
  CHECK(build.exit_code == 0);
  CHECK(build.out == "built in armhive\n");

  REQUIRE(api->release_lease(lease.id).is_ok());
  CHECK(eventually(
      [&] {
        auto l = api->get_lease(lease.id);
        return l.is_ok() && l->state == "released";
      },
      120s));
  daemon.kill(SIGTERM);
}

}  // namespace
}  // namespace armhive
