// The host baselines' native path for real, on this machine: a "guest" that is this host (its
// exec runs the command here), so the host of its architecture runs every suite's host side
// with the real tools (zstd, openssl, fio, a host-built armhive-stream) pinned with the
// target's CPUs (taskset), and the report gets host figures and guest/host ratios.
//
// What this proves is the plumbing of the native path (the decision, the host runs, the
// parsers on real host output, the ratio maths on host figures), not a VM's ratio: both sides
// are the same x86 machine. On this x86 host with TCG guests no real ratio can be measured.
#include <sched.h>
#include <sys/utsname.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "base/process_runner.h"
#include "daemon/bench/benchmark_runner.h"
#include "daemon/bench/cache_topology.h"
#include "daemon/core/clock.h"
#include "daemon/core/hypervisor.h"
#include "tests/daemon/bench/bench_test_util.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using bench_test::joined;
using nlohmann::json;

// The "guest" is this host: commands run here unpinned, armhive-stream is the host build.
class LocalGuest final : public bench_test::ExecOnlyHypervisor {
 public:
  explicit LocalGuest(ProcessRunner& runner) : ExecOnlyHypervisor("127.0.0.1"), runner_(runner) {}
  Result<GuestExecResult> exec(std::string_view, const GuestExecRequest& request) override {
    std::vector<std::string> argv = request.argv;
    if (!argv.empty() && argv[0] == "armhive-stream") argv[0] = ARMHIVE_HOST_STREAM;
    {
      std::lock_guard lock(mu_);
      execs_.push_back(joined(argv));
    }
    ARMHIVE_ASSIGN_OR_RETURN(ProcessResult p,
                             runner_.run({.argv = argv, .timeout = request.timeout}));
    GuestExecResult r;
    r.exit_code = p.exit_code;
    r.signal = p.signal;
    r.timed_out = p.timed_out;
    r.out = std::move(p.out);
    r.err = std::move(p.err);
    return r;
  }

 private:
  ProcessRunner& runner_;
  std::mutex mu_;
  std::vector<std::string> execs_;
};

// Host commands, recorded so the test sees they were pinned.
class RecordingRunner final : public ProcessRunner {
 public:
  Result<ProcessResult> run(const ProcessRequest& request) override {
    {
      std::lock_guard lock(mu_);
      runs_.push_back(joined(request.argv));
    }
    return real_.run(request);
  }
  std::vector<std::string> taken() {
    std::lock_guard lock(mu_);
    return runs_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> runs_;
  SubprocessRunner real_;
};

// A corpus of the same mixed kind as the image's (text, random, zeros), 4 MiB.
std::string make_corpus() {
  std::mt19937_64 rng(20260130);
  std::string out;
  const std::string words = "lease pool vm guest host zstd iperf3 stream queue thread level ";
  while (out.size() < (4u << 20)) {
    for (int i = 0; i < 512; ++i) out += words.substr(rng() % 40, 8);
    for (int i = 0; i < 4096; ++i) out.push_back(static_cast<char>(rng()));
    out.append(2048, '\0');
  }
  out.resize(4u << 20);
  return out;
}

struct Native {
  fs::path dir =
      fs::path(ARMHIVE_ITEST_SCRATCH) / ("native-baseline-" + std::to_string(::getpid()));
  RecordingRunner host;
  SubprocessRunner guest_runner;
  LocalGuest guest{guest_runner};
  SystemClock clock;
  LeaseTarget target;

  Native() {
    fs::remove_all(dir);
    fs::create_directories(dir / "guest-disk");
    fs::create_directories(dir / "overlays");
    std::ofstream(dir / "corpus.bin", std::ios::binary) << make_corpus();
    std::ofstream(dir / "overlays" / "local.qcow2") << "";
    struct utsname u {};
    ::uname(&u);
    target.vm_name = "local";
    target.address = "127.0.0.1";
    target.pool = "ci";
    target.host = "this-host";
    target.host_arch = u.machine;
    target.guest_arch = u.machine;  // a "guest" of the host's own architecture: native
    target.emulated = false;
    target.vcpus = 1;
    target.cpus = {last_allowed_cpu()};
    target.corpus_path = (dir / "corpus.bin").string();
    target.corpus_bytes = 4u << 20;
    target.host_corpus_path = target.corpus_path;
    target.host_stream_path = ARMHIVE_HOST_STREAM;
    target.disk_path = (dir / "overlays" / "local.qcow2").string();
    target.host_scratch_dir = (dir / "overlays").string();
    target.guest_disk_dir = (dir / "guest-disk").string();
  }
  ~Native() { fs::remove_all(dir); }

  static int last_allowed_cpu() {
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(::sched_getaffinity(0, sizeof(set), &set) == 0);
    int last = 0;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) last = c;
    return last;
  }

  json run(const BenchmarkRequest& req) {
    BenchmarkRunnerOptions o;
    o.runs_dir = (dir / "runs").string();
    auto resolve = [this](const std::string&) -> Result<LeaseTarget> { return target; };
    BenchmarkRunner runner(guest, host, resolve, clock, o);
    REQUIRE(runner.load().is_ok());
    auto started = runner.start(req);
    REQUIRE(started.is_ok());
    auto done = runner.wait(started->id, std::chrono::minutes(10));
    REQUIRE(done.is_ok());
    INFO(done->error);
    REQUIRE(done->state == BenchmarkState::kSucceeded);
    return done->report;
  }
};

BenchmarkRequest request(const std::string& suite) {
  BenchmarkRequest r;
  r.lease_id = "l-1";
  r.owner = "alice";
  r.suites = {suite};
  r.compression.repeats = 2;
  r.compression.multi_thread = false;
  r.memory.iterations = 2;
  r.memory.repeats = 1;
  r.memory.multi_thread = false;
  r.crypto.repeats = 1;
  r.crypto.multi_thread = false;
  r.storage.file_mib = 16;
  r.storage.random_seconds = 1;
  r.storage.repeats = 1;
  return r;
}

// Every guest figure has a host twin and a positive, finite ratio.
void check_ratios(const json& suite) {
  INFO(suite.dump(1).substr(0, 4000));
  REQUIRE(suite["host"]["available"] == true);
  REQUIRE(suite["guest_host_ratio"]["available"] == true);
  const json& ratios = suite["guest_host_ratio"]["ratios"];
  REQUIRE(ratios.size() == suite["figures"].size());
  REQUIRE(suite["host"]["figures"].size() == suite["figures"].size());
  for (const json& r : ratios) {
    INFO(r.dump());
    REQUIRE(r["ratio"].is_number());
    CHECK(std::isfinite(r["ratio"].get<double>()));
    CHECK(r["ratio"].get<double>() > 0);
  }
  for (const json& f : suite["host"]["figures"]) {
    CHECK(f["key"].get<std::string>().find(".host.") != std::string::npos);
    CHECK(f["spread"]["median"].get<double>() > 0);
  }
}

bool pinned(const std::vector<std::string>& runs, const std::string& tool, int cpu) {
  const std::string prefix = "taskset -c " + std::to_string(cpu) + " " + tool;
  for (const auto& r : runs)
    if (r.rfind(prefix, 0) == 0) return true;
  return false;
}

TEST_CASE("native host baseline: compression runs zstd on the pinned host cores",
          "[bench][baseline][native]") {
  Native n;
  json report = n.run(request("compression"));
  const json& c = report["compression"];
  INFO(c.dump(1).substr(0, 4000));
  REQUIRE(c["host"]["available"] == true);
  CHECK(c["host"]["zstd_version"] == c["zstd_version"]);
  REQUIRE(c["host"]["results"].size() == 1);
  CHECK(c["host"]["results"][0]["compress_mb_s"]["median"].get<double>() > 0);
  REQUIRE(c["guest_host_ratio"]["available"] == true);
  const json& r = c["guest_host_ratio"]["by_threads"][0];
  CHECK(r["threads"] == 1);
  CHECK(r["compress"].get<double>() > 0);
  CHECK(r["decompress"].get<double>() > 0);
  CHECK(pinned(n.host.taken(), "zstd", n.target.cpus[0]));
}

TEST_CASE("native host baseline: memory runs the host-built armhive-stream",
          "[bench][baseline][native]") {
  Native n;
  BenchmarkRequest req = request("memory");
  // Arrays well above this host's last-level cache, as the suite demands.
  auto llc = read_last_level_cache("/sys");
  uint64_t llc_mib = llc ? (llc->bytes + (1u << 20) - 1) >> 20 : 8;
  req.memory.array_mib = static_cast<int>(std::max<uint64_t>(8, 4 * llc_mib));
  json report = n.run(req);
  check_ratios(report["memory"]);
  CHECK(pinned(n.host.taken(), ARMHIVE_HOST_STREAM, n.target.cpus[0]));
}

TEST_CASE("native host baseline: crypto runs openssl speed on the host",
          "[bench][baseline][native]") {
  Native n;
  json report = n.run(request("crypto"));
  check_ratios(report["crypto"]);
  CHECK(pinned(n.host.taken(), "openssl", n.target.cpus[0]));
}

TEST_CASE("native host baseline: storage runs fio beside the VM's overlay",
          "[bench][baseline][native]") {
  Native n;
  json report = n.run(request("storage"));
  const json& s = report["storage"];
  check_ratios(s);
  CHECK(s["host"]["file"].get<std::string>().rfind(n.target.host_scratch_dir, 0) == 0);
  CHECK(pinned(n.host.taken(), "fio", n.target.cpus[0]));
  // The test files are gone on both sides.
  CHECK(fs::is_empty(n.dir / "guest-disk"));
  CHECK(fs::exists(n.dir / "overlays" / "local.qcow2"));
  size_t left = 0;
  for (const auto& e : fs::directory_iterator(n.dir / "overlays")) left += e.is_regular_file();
  CHECK(left == 1);
}

}  // namespace
}  // namespace armhive
