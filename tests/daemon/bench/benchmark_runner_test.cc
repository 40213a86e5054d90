#include "daemon/bench/benchmark_runner.h"

#include <catch2/catch.hpp>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "daemon/bench/mtu_journal.h"
#include "daemon/bench/report.h"
#include "tests/daemon/bench/bench_test_util.h"
#include "tests/support/fake_hypervisor.h"

namespace armhive {
namespace {

using bench_test::fixture_path;
using bench_test::joined;
using bench_test::read_fixture;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A guest that has iperf3 and zstd unless a test's override_handler says otherwise.
std::optional<Result<GuestExecResult>> bench_guest(const std::vector<std::string>& a) {
  GuestExecResult ok;
  ok.exit_code = 0;
  if (a[0] == "cat") {
    ok.out = "4242\n";
  } else if (a[0] == "iperf3" && a.size() > 1 && a[1] == "--version") {
    ok.out = "iperf 3.12 (cJSON 1.7.15)\nLinux guest 6.1.0 aarch64\n";
  } else if (a[0] == "zstd" && a.size() > 1 && a[1] == "--version") {
    ok.out = read_fixture("zstd_version.out");
  } else if (a[0] == "zstd") {
    ok.out = read_fixture(a[3] == "-T1" ? "zstd_b3_t1_quiet.out" : "zstd_b3_t2_quiet.out");
  }
  return Result<GuestExecResult>(ok);
}

class FakeProcesses final : public ProcessRunner {
 public:
  Result<ProcessResult> run(const ProcessRequest& request) override {
    {
      std::lock_guard lock(mu);
      runs.push_back(joined(request.argv));
    }
    if (override_handler) {
      if (auto r = override_handler(request.argv)) return *r;
    }
    ProcessResult r;
    r.exit_code = 0;
    bool reverse = std::find(request.argv.begin(), request.argv.end(), "-R") != request.argv.end();
    if (request.argv[0] == "iperf3")
      r.out = read_fixture(reverse ? "iperf3_reverse_p4.json" : "iperf3_forward_p4.json");
    return r;
  }
  std::function<std::optional<Result<ProcessResult>>(const std::vector<std::string>&)>
      override_handler;
  std::mutex mu;
  std::vector<std::string> runs;
};

class FixedClock final : public Clock {
 public:
  TimePoint now() const override { return from_unix_ms(1'796'000'000'000); }
};

struct Harness {
  fs::path dir = fs::temp_directory_path() / ("armhive-bench-runs-" + std::to_string(::getpid()) +
                                              "-" + std::to_string(counter()++));
  FakeHypervisor hv;  // the guest "armhive-vm-1" (tests/support)
  // Returns nullopt to fall through to bench_guest.
  std::function<std::optional<Result<GuestExecResult>>(const std::vector<std::string>&)>
      override_handler;
  FakeProcesses procs;
  FixedClock clock;
  LeaseTarget target;

  static int& counter() {
    static int c = 0;
    return c;
  }
  Harness() {
    target.vm_name = "armhive-vm-1";
    target.address = "192.0.2.10";
    target.pool = "ci";
    target.host = "devhost";
    target.host_arch = "x86_64";
    target.guest_arch = "aarch64";
    target.cpus = {1};
    target.vcpus = 2;
    target.mtu = 1500;
    target.emulated = true;
    target.corpus_bytes = 8388608;
    target.corpus_seed = 7;
    VmSpec guest;
    guest.name = target.vm_name;
    guest.vm_id = "vm-1";
    REQUIRE(hv.create_vm(guest).is_ok());
    hv.exec_handler = [this](const std::vector<std::string>& argv) {
      if (override_handler) {
        if (auto r = override_handler(argv)) return r;
      }
      return bench_guest(argv);
    };
  }
  ~Harness() { fs::remove_all(dir); }

  BenchmarkRunnerOptions options() {
    BenchmarkRunnerOptions o;
    o.runs_dir = dir.string();
    o.proc_root = fixture_path("proc_before");
    o.sys_root = fixture_path("sys");
    o.client_retry_delay = 0ms;
    return o;
  }
  std::unique_ptr<BenchmarkRunner> runner() {
    auto resolve = [this](const std::string& lease) -> Result<LeaseTarget> {
      if (lease != "l-1") return not_found("no such lease", lease);
      return target;
    };
    auto r = std::make_unique<BenchmarkRunner>(hv, procs, resolve, clock, options());
    REQUIRE(r->load().is_ok());
    return r;
  }
};

BenchmarkRequest request(std::vector<std::string> suites = {}) {
  BenchmarkRequest r;
  r.lease_id = "l-1";
  r.owner = "alice";
  r.suites = std::move(suites);
  r.compression.repeats = 3;
  return r;
}

TEST_CASE("runner: a full run succeeds, is consistent, stored, listed and reloaded", "[bench]") {
  Harness h;
  std::string id;
  {
    auto runner = h.runner();
    auto started = runner->start(request());
    REQUIRE(started.is_ok());
    CHECK(started->state == BenchmarkState::kQueued);
    id = started->id;
    auto run = runner->wait(id, 60s);
    REQUIRE(run.is_ok());
    INFO(run->error);
    REQUIRE(run->state == BenchmarkState::kSucceeded);
    const auto& rep = run->report;
    CHECK(check_benchmark_report(rep).is_ok());
    CHECK(rep["emulated"] == true);
    CHECK(rep["network"]["runs"].size() == 2);
    CHECK(rep["network"]["runs"][1]["direction"] == "guest-to-host");
    CHECK(rep["compression"]["guest"].size() == 2);  // -T1 and -T2 (2 vCPUs)
    CHECK(rep["compression"]["guest"][1]["threads"] == 2);
    CHECK(rep["compression"]["guest"][0]["compress_mb_s"]["n"] == 3);
    CHECK(rep["compression"]["zstd_version"] == "1.5.4");
    CHECK(rep["network"]["guest_iperf3_version"] == "iperf 3.12 (cJSON 1.7.15)");
    CHECK(rep["compression"]["guest_host_ratio"]["available"] == false);
    CHECK_THAT(rep["compression"]["guest_host_ratio"]["reason"].get<std::string>(),
               Catch::Contains("TCG"));
    CHECK(rep["sensors"]["before"].size() == 4);

    // The guest server was started, daemonised, and stopped through its pidfile.
    CHECK(h.hv.saw("iperf3 -s -D -1 -p 5201 --pidfile /run/armhive-iperf3-" + id + ".pid"));
    CHECK(h.hv.saw("kill 4242"));
    CHECK(h.hv.saw("zstd -q -b3 -T1 -i1 /usr/share/armhive/corpus.bin"));
    CHECK(h.hv.saw("zstd -q -b3 -T2 -i1 /usr/share/armhive/corpus.bin"));
    // The host client used fixed client ports and both directions.
    CHECK(h.procs.runs.at(0) ==
          "iperf3 -c 192.0.2.10 -p 5201 -P 4 --cport 5000 -t 5 -i 1 -J --connect-timeout 5000");
    CHECK(h.procs.runs.at(1).find(" -R") != std::string::npos);

    CHECK(fs::exists(h.dir / (id + ".json")));
    CHECK(runner->list({.vm_name = "armhive-vm-1"}).size() == 1);
    CHECK(runner->list({.host = "elsewhere"}).empty());
    auto html = runner->report_html({id});
    REQUIRE(html.is_ok());
    CHECK(html->find("EMULATED") != std::string::npos);
    auto csv = runner->report_csv({id});
    REQUIRE(csv.is_ok());
    CHECK(csv->find("network.host-to-guest.mtu1500.gbit_s") != std::string::npos);
    CHECK(runner->report_html({"b-nope"}).status().code() == ErrorCode::kNotFound);
    CHECK(runner->report_html({}).status().code() == ErrorCode::kInvalidArgument);
  }
  auto again = h.runner();
  auto loaded = again->get(id);
  REQUIRE(loaded.is_ok());
  CHECK(loaded->state == BenchmarkState::kSucceeded);
  CHECK(loaded->report["network"]["runs"].size() == 2);
}

TEST_CASE("runner: requests are validated and leases resolved before queueing", "[bench]") {
  Harness h;
  auto runner = h.runner();
  auto bad = request({"disk"});
  CHECK(runner->start(bad).status().field() == "suites");
  auto unknown = request();
  unknown.lease_id = "l-404";
  CHECK(runner->start(unknown).status().code() == ErrorCode::kNotFound);
  CHECK(runner->list({}).empty());
}

TEST_CASE("runner: a VM on a remote host of the fleet runs its suites in the guest only",
          "[bench][fleet]") {
  Harness h;
  h.target.host = "tx1";
  h.target.remote_host = true;
  auto runner = h.runner();
  // iperf3's peer would run on this machine, toward an address on tx1's own network.
  for (auto suites :
       {std::vector<std::string>{"network"}, std::vector<std::string>{"compression", "network"}}) {
    auto refused = runner->start(request(suites));
    CHECK(refused.status().code() == ErrorCode::kConflict);
    CHECK(refused.status().field() == "suites");
    CHECK_THAT(refused.status().message(), Catch::Contains("runs on host tx1"));
  }
  CHECK(runner->list({}).empty());
  // No suites asked: compression alone, in the guest; nothing ran here.
  auto started = runner->start(request());
  REQUIRE(started.is_ok());
  auto run = runner->wait(started->id, 60s);
  REQUIRE(run.is_ok());
  INFO(run->error);
  REQUIRE(run->state == BenchmarkState::kSucceeded);
  CHECK(run->request.suites == std::vector<std::string>{"compression"});
  CHECK_FALSE(run->report.contains("network"));
  CHECK(run->report["compression"]["guest"].size() == 2);
  CHECK(h.hv.saw("zstd -q -b3 -T1 -i1 /usr/share/armhive/corpus.bin"));
  for (const std::string& r : h.procs.runs) CHECK(r.rfind("iperf3", 0) != 0);
}

TEST_CASE("runner: iperf3 missing in the guest fails the run clearly", "[bench]") {
  Harness h;
  h.override_handler =
      [](const std::vector<std::string>& a) -> std::optional<Result<GuestExecResult>> {
    if (a[0] == "iperf3") {
      return Result<GuestExecResult>(
          Status(ErrorCode::kUnavailable,
                 "guest-exec: Failed to execute child process \xE2\x80\x9Ciperf3\xE2\x80\x9D (No "
                 "such file or directory)"));
    }
    return std::nullopt;
  };
  auto runner = h.runner();
  auto run = runner->wait(runner->start(request({"network"}))->id, 60s);
  REQUIRE(run.is_ok());
  CHECK(run->state == BenchmarkState::kFailed);
  CHECK_THAT(run->error, Catch::Contains("starting the iperf3 server in the guest"));
  CHECK_THAT(run->error, Catch::Contains("No such file"));
  CHECK(h.procs.runs.empty());                    // no client against a missing server
  CHECK(h.hv.saw("rm -f /run/armhive-iperf3-"));  // the stop path ran anyway
}

TEST_CASE("runner: an unreachable guest fails the run with the agent's error", "[bench]") {
  Harness h;
  h.override_handler =
      [](const std::vector<std::string>&) -> std::optional<Result<GuestExecResult>> {
    return Result<GuestExecResult>(unavailable("guest agent is not connected", "armhive-vm-1"));
  };
  auto runner = h.runner();
  auto run = runner->wait(runner->start(request({"compression"}))->id, 60s);
  REQUIRE(run.is_ok());
  CHECK(run->state == BenchmarkState::kFailed);
  CHECK_THAT(run->error, Catch::StartsWith("compression: zstd: zstd --version in the guest"));
  CHECK_THAT(run->error, Catch::Contains("guest agent is not connected"));
  CHECK(run->report["error_code"] == "unavailable");
  CHECK(to_unix_ms(run->finished_at) != 0);
}

TEST_CASE("runner: a guest exec timeout fails the run and still stops the server", "[bench]") {
  Harness h;
  h.override_handler =
      [](const std::vector<std::string>& a) -> std::optional<Result<GuestExecResult>> {
    if (a[0] == "iperf3") {
      GuestExecResult r;
      r.timed_out = true;
      return Result<GuestExecResult>(r);
    }
    return std::nullopt;
  };
  auto runner = h.runner();
  auto run = runner->wait(runner->start(request())->id, 60s);
  REQUIRE(run.is_ok());
  CHECK(run->state == BenchmarkState::kFailed);
  CHECK_THAT(run->error, Catch::Contains("timed out"));
  CHECK(run->report["error_code"] == "timeout");
  size_t start = h.hv.index_of("iperf3 -s");
  size_t kill = h.hv.index_of("kill 4242");
  REQUIRE(start != SIZE_MAX);
  REQUIRE(kill != SIZE_MAX);
  CHECK(kill > start);
  CHECK_FALSE(h.hv.saw("zstd"));  // the run ended at the first failure
}

TEST_CASE("runner: a host client timeout or a missing host iperf3 fails and stops the server",
          "[bench]") {
  Harness h;
  bool missing = GENERATE(false, true);
  h.procs.override_handler =
      [missing](const std::vector<std::string>&) -> std::optional<Result<ProcessResult>> {
    if (missing)
      return Result<ProcessResult>(Status(ErrorCode::kNotFound, "iperf3: not found in PATH"));
    ProcessResult r;
    r.timed_out = true;
    return Result<ProcessResult>(r);
  };
  auto runner = h.runner();
  auto run = runner->wait(runner->start(request({"network"}))->id, 60s);
  REQUIRE(run.is_ok());
  CHECK(run->state == BenchmarkState::kFailed);
  CHECK_THAT(run->error, Catch::Contains(missing ? "not installed on the host" : "timed out"));
  CHECK(h.hv.saw("kill 4242"));
}

TEST_CASE("runner: a refused connection is retried, then reported", "[bench]") {
  Harness h;
  h.procs.override_handler =
      [](const std::vector<std::string>&) -> std::optional<Result<ProcessResult>> {
    ProcessResult r;
    r.exit_code = 1;
    r.out = read_fixture("iperf3_refused.json");
    return Result<ProcessResult>(r);
  };
  auto runner = h.runner();
  auto run = runner->wait(runner->start(request({"network"}))->id, 60s);
  REQUIRE(run.is_ok());
  CHECK(run->state == BenchmarkState::kFailed);
  CHECK_THAT(run->error, Catch::Contains("unable to connect to server"));
  CHECK(h.procs.runs.size() == 3);
}

TEST_CASE("runner: MTU runs set and restore the guest MTU, zstd failures are clear", "[bench]") {
  Harness h;
  h.override_handler =
      [](const std::vector<std::string>& a) -> std::optional<Result<GuestExecResult>> {
    if (a[0] == "zstd" && a[1] == "-q") {
      GuestExecResult r;
      r.exit_code = 1;
      r.out = read_fixture("zstd_missing_file.out");
      return Result<GuestExecResult>(r);
    }
    return std::nullopt;
  };
  h.target.nic_max_mtu = 9000;
  auto runner = h.runner();
  auto req = request();
  req.network.mtus = {1500, 9000};
  req.network.both_directions = false;
  auto run = runner->wait(runner->start(req)->id, 60s);
  REQUIRE(run.is_ok());
  CHECK(h.hv.saw("ip link set dev eth0 mtu 9000"));
  CHECK(h.hv.index_of("ip link set dev eth0 mtu 1500") < h.hv.index_of("mtu 9000"));
  CHECK(run->report["network"]["runs"].size() == 2);
  CHECK(run->report["network"]["runs"][1]["mtu"] == 9000);
  CHECK(run->state == BenchmarkState::kFailed);
  CHECK_THAT(run->error, Catch::Contains("Error loading files"));
}

TEST_CASE("runner: runs on one VM are serialised and all finish", "[bench]") {
  Harness h;
  std::mutex mu;
  int active = 0, max_active = 0;
  h.override_handler =
      [&](const std::vector<std::string>& a) -> std::optional<Result<GuestExecResult>> {
    if (a[0] == "zstd" && a[1] == "--version") {
      std::lock_guard lock(mu);
      max_active = std::max(max_active, ++active);
    }
    if (a[0] == "zstd" && a[1] == "-q" && a[3] == "-T2") {
      std::lock_guard lock(mu);
      --active;  // the last command of a compression run
    }
    return std::nullopt;
  };
  h.target.vcpus = 2;
  auto runner = h.runner();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto req = request({"compression"});
    req.compression.repeats = 1;
    ids.push_back(runner->start(req)->id);
  }
  for (const auto& id : ids) {
    auto run = runner->wait(id, 60s);
    REQUIRE(run.is_ok());
    CHECK(run->state == BenchmarkState::kSucceeded);
  }
  CHECK(max_active == 1);
  CHECK(runner->list({.lease_id = "l-1"}).size() == 3);
  CHECK(runner->list({.lease_id = "l-1", .limit = 2}).size() == 2);
}

TEST_CASE("runner: the per-VM queue is bounded, the destructor fails what is still queued",
          "[bench]") {
  Harness h;
  std::mutex mu;
  std::condition_variable cv;
  bool release = false, blocked = false;
  h.override_handler =
      [&](const std::vector<std::string>& a) -> std::optional<Result<GuestExecResult>> {
    if (a[0] == "zstd" && a[1] == "--version") {
      std::unique_lock lock(mu);
      blocked = true;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    }
    return std::nullopt;
  };
  std::vector<std::string> ids;
  {
    BenchmarkRunnerOptions o = h.options();
    o.max_queued_per_vm = 2;
    auto resolve = [&](const std::string&) -> Result<LeaseTarget> { return h.target; };
    BenchmarkRunner runner(h.hv, h.procs, resolve, h.clock, o);
    auto req = request({"compression"});
    req.compression.repeats = 1;
    ids.push_back(runner.start(req)->id);
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return blocked; });  // the first run is running, the queue is empty
    }
    ids.push_back(runner.start(req)->id);
    ids.push_back(runner.start(req)->id);
    auto refused = runner.start(req);
    CHECK(refused.status().code() == ErrorCode::kResourceExhausted);
    CHECK(runner.get(ids[1])->state == BenchmarkState::kQueued);
    std::thread releaser([&] {
      std::lock_guard lock(mu);
      release = true;
      cv.notify_all();
    });
    releaser.join();
    // Destroyed now: the running run may finish, the queued ones must not be left "queued".
  }
  BenchmarkRunnerOptions o = h.options();
  BenchmarkRunner reloaded(
      h.hv, h.procs, [&](const std::string&) -> Result<LeaseTarget> { return h.target; }, h.clock,
      o);
  REQUIRE(reloaded.load().is_ok());
  for (const auto& id : ids) {
    auto run = reloaded.get(id);
    REQUIRE(run.is_ok());
    CHECK((run->state == BenchmarkState::kSucceeded || run->state == BenchmarkState::kFailed));
  }
}

TEST_CASE("runner: hostile guest zstd output fails the run and the runner keeps serving",
          "[bench][hostile]") {
  Harness h;
  std::string hostile;
  h.override_handler =
      [&hostile](const std::vector<std::string>& a) -> std::optional<Result<GuestExecResult>> {
    if (a[0] == "zstd" && a[1] == "-q" && !hostile.empty()) {
      GuestExecResult r;
      r.exit_code = 0;
      r.out = hostile;
      return Result<GuestExecResult>(r);
    }
    return std::nullopt;
  };
  auto runner = h.runner();
  const std::string header = "bench 1.5.4 : input 8388608 bytes, 1 seconds, 0 KB blocks\n";
  struct Case {
    std::string out, reason;
  };
  for (const Case& c : {Case{header + "-3 1 (.) . MB/s . MB/s\n", "not a decimal number"},
                        Case{header + "-3 3072896 (2.730) 1e400 MB/s 1 MB/s\n", "no result"},
                        Case{header + "-3 3072896 (2.730) 99999999999 MB/s 5583 MB/s f\n",
                             "outside the plausible range"},
                        Case{"\xff\xfe garbage \x01", "no result"}, Case{"\n", "no result"}}) {
    hostile = c.out;
    auto run = runner->wait(runner->start(request({"compression"}))->id, 60s);
    REQUIRE(run.is_ok());
    CHECK(run->state == BenchmarkState::kFailed);
    CHECK_THAT(run->error, Catch::Contains("guest zstd -b3 -T1 (repeat 1)"));
    CHECK_THAT(run->error, Catch::Contains(c.reason));
  }
  hostile.clear();
  auto honest = runner->wait(runner->start(request({"compression"}))->id, 60s);
  REQUIRE(honest.is_ok());
  CHECK(honest->state == BenchmarkState::kSucceeded);
}

TEST_CASE("runner: an exception inside a run fails that run, not the daemon", "[bench][hostile]") {
  Harness h;
  bool throw_now = true;
  h.override_handler =
      [&throw_now](const std::vector<std::string>& a) -> std::optional<Result<GuestExecResult>> {
    if (throw_now && a[0] == "zstd") throw std::runtime_error("boom from a broken adapter");
    return std::nullopt;
  };
  auto runner = h.runner();
  auto run = runner->wait(runner->start(request({"compression"}))->id, 60s);
  REQUIRE(run.is_ok());
  CHECK(run->state == BenchmarkState::kFailed);
  CHECK_THAT(run->error, Catch::Contains("internal error during the run"));
  CHECK_THAT(run->error, Catch::Contains("boom from a broken adapter"));
  throw_now = false;
  auto next = runner->wait(runner->start(request({"compression"}))->id, 60s);
  REQUIRE(next.is_ok());
  CHECK(next->state == BenchmarkState::kSucceeded);
}

TEST_CASE("runner: invalid UTF-8 from the guest is stored, not thrown", "[bench][hostile]") {
  Harness h;
  h.override_handler =
      [](const std::vector<std::string>& a) -> std::optional<Result<GuestExecResult>> {
    if (a[0] == "iperf3" && a.size() > 1 && a[1] == "--version") {
      GuestExecResult r;
      r.exit_code = 0;
      r.out = "iperf \xff\xfe\xc3\n";
      return Result<GuestExecResult>(r);
    }
    if (a[0] == "zstd" && a[1] == "-q") {
      GuestExecResult r;
      r.exit_code = 1;
      r.err = "Error 9 : \xff\xc0 bad bytes";
      return Result<GuestExecResult>(r);
    }
    return std::nullopt;
  };
  std::string id;
  {
    auto runner = h.runner();
    auto run = runner->wait(runner->start(request())->id, 60s);
    REQUIRE(run.is_ok());
    id = run->id;
    CHECK(run->state == BenchmarkState::kFailed);
    CHECK_THAT(run->error, Catch::Contains("exit code 1"));
    CHECK(run->report.find("storage_error") == run->report.end());
  }
  auto again = h.runner();
  auto loaded = again->get(id);
  REQUIRE(loaded.is_ok());
  CHECK(loaded->state == BenchmarkState::kFailed);
}

}  // namespace
}  // namespace armhive

namespace armhive {
namespace {

// The sandbox's bridge with the VM's tap and, optionally, an uplink that cannot carry jumbo
// frames; `ip link set` changes what later `ip -j link` calls print.
struct HostLinks {
  std::map<std::string, int> mtu = {{"ahbr0", 1500}, {"vnet3", 1500}, {"eno1", 1500}};
  bool uplink = false;
  bool ping_ok = true;
  std::string fail_set;  // "ip link set dev <this> ..." fails

  std::string link(const std::string& name, const std::string& mac, int max) {
    return "{\"ifname\":\"" + name + "\",\"mtu\":" + std::to_string(mtu[name]) +
           ",\"min_mtu\":68,\"max_mtu\":" + std::to_string(max) + ",\"address\":\"" + mac + "\"}";
  }
  std::optional<Result<ProcessResult>> handle(const std::vector<std::string>& a) {
    ProcessResult r;
    r.exit_code = 0;
    if (a.size() == 7 && a[0] == "ip" && a[3] == "link" && a[5] == "dev") {
      r.out = "[" + link("ahbr0", "52:54:00:aa:bb:cc", 65535) + "]";
    } else if (a.size() == 7 && a[0] == "ip" && a[5] == "master") {
      r.out = "[" + link("vnet3", "FE:54:00:12:34:56", 65521) +
              (uplink ? "," + link("eno1", "00:11:22:33:44:55", 1500) : "") + "]";
    } else if (a.size() == 7 && a[0] == "ip" && a[1] == "link" && a[2] == "set") {
      if (a[4] == fail_set) {
        r.exit_code = 2;
        r.err = "RTNETLINK answers: Invalid argument\n";
      } else {
        mtu[a[4]] = std::stoi(a[6]);
      }
    } else if (a[0] == "ping") {
      r.exit_code = ping_ok ? 0 : 1;
      if (!ping_ok) r.err = "ping: local error: message too long, mtu=1500\n";
    } else {
      return std::nullopt;
    }
    return Result<ProcessResult>(r);
  }
};

void with_host_links(Harness& h, HostLinks& links) {
  h.target.bridge = "ahbr0";
  h.target.nic_max_mtu = 9000;
  h.procs.override_handler = [&links](const std::vector<std::string>& a) {
    return links.handle(a);
  };
  h.override_handler =
      [](const std::vector<std::string>& a) -> std::optional<Result<GuestExecResult>> {
    if (a[0] == "cat" && a[1] == "/sys/class/net/eth0/address") {
      GuestExecResult r;
      r.exit_code = 0;
      r.out = "52:54:00:12:34:56\n";
      return Result<GuestExecResult>(r);
    }
    return std::nullopt;
  };
}

size_t position(const std::vector<std::string>& runs, const std::string& cmd) {
  return static_cast<size_t>(std::find(runs.begin(), runs.end(), cmd) - runs.begin());
}

TEST_CASE(
    "runner: an MTU run sets bridge, tap and guest, verifies the path MTU and restores "
    "all three",
    "[bench][mtu]") {
  Harness h;
  HostLinks links;
  with_host_links(h, links);
  auto runner = h.runner();
  auto req = request({"network"});
  req.network.mtus = {1500, 9000};
  req.network.both_directions = false;
  auto run = runner->wait(runner->start(req)->id, 60s);
  REQUIRE(run.is_ok());
  REQUIRE(run->state == BenchmarkState::kSucceeded);
  const auto& runs = h.procs.runs;
  // Bridge before tap going up, tap before bridge coming back.
  size_t br_up = position(runs, "ip link set dev ahbr0 mtu 9000");
  size_t tap_up = position(runs, "ip link set dev vnet3 mtu 9000");
  size_t ping = position(runs, "ping -n -q -M do -s 8972 -c 2 -W 2 192.0.2.10");
  size_t tap_down = position(runs, "ip link set dev vnet3 mtu 1500");
  size_t br_down = position(runs, "ip link set dev ahbr0 mtu 1500");
  CHECK(br_up < tap_up);
  CHECK(tap_up < ping);
  CHECK(ping < tap_down);
  CHECK(tap_down < br_down);
  CHECK(br_down < runs.size());
  CHECK(links.mtu["ahbr0"] == 1500);
  CHECK(links.mtu["vnet3"] == 1500);
  CHECK(h.hv.saw("ip link set dev eth0 mtu 9000"));

  const auto& changes = run->report["network"]["mtu_changes"];
  REQUIRE(changes.size() == 2);
  CHECK(changes[0]["host"]["applied"].empty());  // already at 1500
  CHECK(changes[1]["mtu"] == 9000);
  CHECK(changes[1]["verified_path_mtu"] == 9000);
  CHECK(changes[1]["host"]["bridge"] == "ahbr0");
  CHECK(changes[1]["host"]["tap"] == "vnet3");
  CHECK(changes[1]["host"]["applied"].size() == 2);
  CHECK(changes[1]["host"]["restored"].size() == 2);
  CHECK(changes[1]["guest"]["to"] == 9000);
}

TEST_CASE("runner: an MTU run restores the host and guest MTU when a step fails", "[bench][mtu]") {
  Harness h;
  HostLinks links;
  links.fail_set = "vnet3";  // the bridge goes up, the tap refuses
  with_host_links(h, links);
  auto runner = h.runner();
  auto req = request({"network"});
  req.network.mtus = {9000};
  auto run = runner->wait(runner->start(req)->id, 60s);
  REQUIRE(run.is_ok());
  CHECK(run->state == BenchmarkState::kFailed);
  CHECK_THAT(run->error, Catch::Contains("setting the host MTU to 9000"));
  CHECK_THAT(run->error, Catch::Contains("RTNETLINK answers"));
  CHECK(links.mtu["ahbr0"] == 1500);  // put back
  CHECK_FALSE(h.hv.saw("ip link set dev eth0 mtu 9000"));
  CHECK(run->report["network"]["mtu_changes"][0]["verified_path_mtu"].is_null());

  // A failing ping is recorded, not fatal: the iperf3 figures still say what got through.
  Harness h2;
  HostLinks links2;
  links2.ping_ok = false;
  with_host_links(h2, links2);
  auto runner2 = h2.runner();
  auto run2 = runner2->wait(runner2->start(req)->id, 60s);
  REQUIRE(run2.is_ok());
  const auto& c = run2->report["network"]["mtu_changes"][0];
  CHECK(c["verified_path_mtu"].is_null());
  CHECK_THAT(c["path_mtu_error"].get<std::string>(), Catch::Contains("message too long"));
  CHECK(links2.mtu["vnet3"] == 1500);
}

// Issue 33 (finding 10): an MTU run changes the bridge every lease on the host shares; a crash
// between the change and the restore left it changed for good. The originals are on disk
// before the first host step, gone after the restore, and a start restores what a crash left.
TEST_CASE("runner: an MTU run journals the host's MTUs first, a start restores a crash's",
          "[bench][mtu][hostile]") {
  Harness h;
  HostLinks links;
  with_host_links(h, links);
  std::string journal_at_change;  // the journal as it was when the bridge changed
  h.procs.override_handler = [&](const std::vector<std::string>& a) {
    if (a.size() == 7 && a[1] == "link" && a[2] == "set" && a[4] == "ahbr0" && a[6] == "9000") {
      for (const auto& e : fs::directory_iterator(h.dir)) {
        if (e.path().filename().string().rfind("mtu-journal-", 0) == 0) {
          std::ifstream in(e.path());
          std::getline(in, journal_at_change);
        }
      }
    }
    return links.handle(a);
  };
  auto runner = h.runner();
  auto req = request({"network"});
  req.network.mtus = {9000};
  auto run = runner->wait(runner->start(req)->id, 60s);
  REQUIRE(run.is_ok());
  REQUIRE(run->state == BenchmarkState::kSucceeded);
  REQUIRE_FALSE(journal_at_change.empty());
  auto recorded = nlohmann::json::parse(journal_at_change);
  CHECK(recorded["links"] ==
        nlohmann::json::parse(R"([{"link":"ahbr0","mtu":1500},{"link":"vnet3","mtu":1500}])"));
  for (const auto& e : fs::directory_iterator(h.dir)) {
    CHECK(e.path().filename().string().rfind("mtu-journal-", 0) != 0);  // restored: gone
  }

  // The crash: armhived died at 9000 with the journal written. The next start restores it.
  links.mtu["ahbr0"] = 9000;
  links.mtu["vnet3"] = 9000;
  const std::string left = mtu_journal_path(h.dir.string(), "b-crashed");
  std::ofstream(left) << journal_at_change << "\n";
  std::vector<std::string> errors;
  auto restored = restore_mtu_journals(h.procs, h.dir.string(), 5s, errors);
  CHECK(errors.empty());
  CHECK(restored.size() == 2);
  CHECK(links.mtu["ahbr0"] == 1500);
  CHECK(links.mtu["vnet3"] == 1500);
  CHECK_FALSE(fs::exists(left));

  // A journal naming something that is not a link is not passed to `ip`.
  std::ofstream(left) << R"({"links":[{"link":"-j","mtu":1500}]})"
                      << "\n";
  errors.clear();
  CHECK(restore_mtu_journals(h.procs, h.dir.string(), 5s, errors).empty());
  CHECK(errors.size() == 1);
}

TEST_CASE("runner: an MTU the bridge's ports cannot carry is a 400 naming network.mtus.i",
          "[bench][mtu]") {
  Harness h;
  HostLinks links;
  links.uplink = true;  // eno1 carries at most 1500
  with_host_links(h, links);
  auto runner = h.runner();
  auto req = request({"network"});
  req.network.mtus = {1500, 9000};
  auto started = runner->start(req);
  REQUIRE_FALSE(started.is_ok());
  CHECK(started.status().code() == ErrorCode::kInvalidArgument);
  CHECK(started.status().field() == "network.mtus[1]");
  CHECK_THAT(started.status().message(), Catch::Contains("eno1 carries at most 1500"));
  for (const auto& r : h.procs.runs) CHECK(r.rfind("ip link set", 0) != 0);  // nothing changed

  // The guest's virtio NIC takes no more than the host MTU its domain advertises.
  h.target.nic_max_mtu = 0;  // = mtu, 1500
  links.uplink = false;
  auto runner2 = h.runner();
  auto nic = runner2->start(req);
  REQUIRE_FALSE(nic.is_ok());
  CHECK(nic.status().field() == "network.mtus[1]");
  CHECK_THAT(nic.status().message(), Catch::Contains("virtio NIC carries at most 1500"));
}

}  // namespace
}  // namespace armhive
