// The memory, crypto and storage suites: request validation, host-baseline decisions and ratio
// maths, the runner over fake guest/host tools fed with captured outputs, the report views.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>

#include "daemon/bench/benchmark_runner.h"
#include "daemon/bench/cache_topology.h"
#include "daemon/bench/compare_settings.h"
#include "daemon/bench/disk_backing.h"
#include "daemon/bench/host_baseline.h"
#include "daemon/bench/report.h"
#include "daemon/bench/suite_figures.h"
#include "tests/daemon/bench/bench_test_util.h"
#include "tests/support/xml_count.h"

namespace armhive {
namespace {

using bench_test::ExecOnlyHypervisor;
using bench_test::fixture_path;
using bench_test::joined;
using bench_test::read_fixture;
using nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string arg_after(const std::vector<std::string>& argv, const std::string& flag) {
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == flag) return argv[i + 1];
  return "";
}

bool has_arg(const std::vector<std::string>& argv, const std::string& prefix) {
  for (const auto& a : argv)
    if (a.rfind(prefix, 0) == 0) return true;
  return false;
}

// armhive-stream's output for the given argv, bandwidths scaled by `speed`.
std::string stream_output(const std::vector<std::string>& argv, double speed) {
  uint64_t n = std::stoull(arg_after(argv, "-n"));
  std::string t = arg_after(argv, "-t");
  double m = speed * std::stod(t);
  return "armhive-stream 1\ncompiler gcc 12.2.0\nflags -O2 -static -pthread\narray_elements " +
         std::to_string(n) + "\narray_bytes " + std::to_string(n * 8) + "\nthreads " + t +
         "\niterations " + arg_after(argv, "-i") + "\ncopy_mb_s " + std::to_string(3000 * m) +
         "\nscale_mb_s " + std::to_string(1000 * m) + "\nadd_mb_s " + std::to_string(1300 * m) +
         "\ntriad_mb_s " + std::to_string(1100 * m) + "\nvalidation ok\n";
}

// What the tiny image's tools print; `speed` scales armhive-stream (host vs guest).
struct FakeTools {
  double stream_speed = 1.0;
  std::string openssl_version = read_fixture("openssl_version.out");
  std::function<std::optional<std::pair<int, std::string>>(const std::vector<std::string>&)>
      override_handler;

  std::pair<int, std::string> run(const std::vector<std::string>& a) const {
    if (override_handler) {
      if (auto r = override_handler(a)) return *r;
    }
    const std::string& tool = a[0];
    if (tool == "armhive-stream" || tool == "/opt/armhive/armhive-stream") {
      if (a.size() > 1 && a[1] == "--version")
        return {0, "armhive-stream 1 (gcc 12.2.0, -O2 -static -pthread)\n"};
      return {0, stream_output(a, stream_speed)};
    }
    if (tool == "cat" && a[1] == "/proc/meminfo")
      return {0, "MemTotal: 4000000 kB\nMemAvailable: 3500000 kB\n"};
    if (tool == "cat" && a[1] == "/proc/mounts")
      return {0, "/dev/vda / ext4 rw,relatime 0 0\ntmpfs /run tmpfs rw 0 0\n"};
    if (tool == "openssl" && a[1] == "version") return {0, openssl_version};
    if (tool == "openssl") {
      bool multi = has_arg(a, "-multi");
      return {0, read_fixture(multi ? "openssl_speed_multi2_aarch64_user.out"
                                    : "openssl_speed_aarch64_user.out")};
    }
    if (tool == "fio" && a[1] == "--version") return {0, "fio-3.33\n"};
    if (tool == "fio") {
      if (has_arg(a, "--rw=randread")) return {0, read_fixture("fio_randread_aarch64_user.json")};
      if (has_arg(a, "--rw=read")) return {0, read_fixture("fio_seqread_aarch64_user.json")};
      return {0, read_fixture("fio_seqwrite_aarch64_user.json")};
    }
    if (tool == "rm") return {0, ""};
    return {127, ""};
  }
};

class FakeHypervisor final : public ExecOnlyHypervisor {
 public:
  explicit FakeHypervisor(FakeTools& tools) : ExecOnlyHypervisor("192.0.2.10"), tools_(tools) {}
  Result<GuestExecResult> exec(std::string_view, const GuestExecRequest& request) override {
    std::lock_guard lock(mu);
    execs.push_back(joined(request.argv));
    auto [code, out] = tools_.run(request.argv);
    GuestExecResult r;
    r.exit_code = code;
    r.out = out;
    return r;
  }
  bool saw(const std::string& needle) {
    std::lock_guard lock(mu);
    for (const auto& e : execs)
      if (e.find(needle) != std::string::npos) return true;
    return false;
  }
  std::mutex mu;
  std::vector<std::string> execs;

 private:
  FakeTools& tools_;
};

// The host: commands arrive as `taskset -c CPUS tool ...` when the VM is pinned.
class FakeProcesses final : public ProcessRunner {
 public:
  explicit FakeProcesses(FakeTools& tools) : tools_(tools) {}
  Result<ProcessResult> run(const ProcessRequest& request) override {
    std::lock_guard lock(mu);
    runs.push_back(joined(request.argv));
    std::vector<std::string> a = request.argv;
    if (a[0] == "taskset") a.erase(a.begin(), a.begin() + 3);
    auto [code, out] = tools_.run(a);
    if (code == 127) return not_found("no such program", a[0]);
    ProcessResult r;
    r.exit_code = code;
    r.out = out;
    return r;
  }
  std::mutex mu;
  std::vector<std::string> runs;

 private:
  FakeTools& tools_;
};

class FixedClock final : public Clock {
 public:
  TimePoint now() const override { return from_unix_ms(1'796'000'000'000); }
};

struct Harness {
  fs::path dir =
      fs::temp_directory_path() /
      ("armhive-machine-suites-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
  FakeTools guest_tools, host_tools;
  FakeHypervisor hv{guest_tools};
  FakeProcesses procs{host_tools};
  FixedClock clock;
  LeaseTarget target;

  static int& counter() {
    static int c = 0;
    return c;
  }
  Harness() {
    fs::create_directories(dir / "scratch");
    target.vm_name = "armhive-vm-1";
    target.address = "192.0.2.10";
    target.pool = "ci";
    target.host = "devhost";
    target.host_arch = "x86_64";
    target.cpus = {1};
    target.vcpus = 2;
    target.emulated = true;
    target.disk_path = (dir / "scratch").string();
    target.last_level_cache_bytes = 8 << 20;
  }
  ~Harness() { fs::remove_all(dir); }
  void make_native() {
    target.host_arch = "aarch64";
    target.emulated = false;
    target.cpus = {2, 3};
    target.host_stream_path = "/opt/armhive/armhive-stream";
    target.host_scratch_dir = (dir / "scratch").string();
  }
  std::unique_ptr<BenchmarkRunner> runner() {
    BenchmarkRunnerOptions o;
    o.runs_dir = (dir / "runs").string();
    o.proc_root = fixture_path("proc_before");
    o.sys_root = fixture_path("sys");
    auto resolve = [this](const std::string&) -> Result<LeaseTarget> { return target; };
    auto r = std::make_unique<BenchmarkRunner>(hv, procs, resolve, clock, o);
    REQUIRE(r->load().is_ok());
    return r;
  }
};

BenchmarkRequest request(std::vector<std::string> suites) {
  BenchmarkRequest r;
  r.lease_id = "l-1";
  r.owner = "alice";
  r.suites = std::move(suites);
  r.memory.array_mib = 64;
  r.memory.repeats = 3;
  r.crypto.repeats = 2;
  r.storage.repeats = 2;
  return r;
}

BenchmarkRun run_to_end(Harness& h, const BenchmarkRequest& req) {
  auto runner = h.runner();
  auto started = runner->start(req);
  REQUIRE(started.is_ok());
  auto done = runner->wait(started->id, 30s);
  REQUIRE(done.is_ok());
  return *done;
}

const json& figure(const json& suite, const std::string& key) {
  for (const auto& f : suite["figures"])
    if (f["key"] == key) return f;
  FAIL("no figure " << key);
  static json none;
  return none;
}

TEST_CASE("requests: unknown suites and out-of-range suite settings are 400s naming the field",
          "[bench]") {
  auto field_of = [](const json& body) {
    auto r = benchmark_request_from_json(body);
    return r.is_ok() ? std::string("ok") : r.status().field();
  };
  CHECK(field_of({{"suites", {"memory", "crypto", "storage"}}}) == "ok");
  CHECK(field_of({{"suites", {"stream"}}}) == "suites");
  CHECK(field_of({{"memory", {{"array_mib", 2}}}}) == "memory.array_mib");
  CHECK(field_of({{"memory", {{"iterations", 101}}}}) == "memory.iterations");
  CHECK(field_of({{"memory", {{"bogus", 1}}}}) == "memory.bogus");
  CHECK(field_of({{"crypto", {{"seconds", 0}}}}) == "crypto.seconds");
  CHECK(field_of({{"crypto", {{"multi_thread", "yes"}}}}) == "crypto.multi_thread");
  CHECK(field_of({{"storage", {{"queue_depth", 1000}}}}) == "storage.queue_depth");
  CHECK(field_of({{"storage", {{"file_mib", 16}, {"block_kib", 32768}}}}) == "storage.block_kib");
  CHECK(field_of({{"storage", "fast"}}) == "storage");
  auto parsed = benchmark_request_from_json(
      {{"suites", {"memory"}}, {"memory", {{"array_mib", 256}, {"multi_thread", false}}}});
  REQUIRE(parsed.is_ok());
  CHECK(parsed->memory.array_mib == 256);
  CHECK_FALSE(parsed->memory.multi_thread);
  // The stored form reads back.
  auto again = benchmark_request_from_json(to_json(*parsed));
  REQUIRE(again.is_ok());
  CHECK(again->memory.array_mib == 256);
}

TEST_CASE("memory arrays must be 4x the last-level cache: 400 naming memory.array_mib", "[bench]") {
  MemoryOptions m;
  m.array_mib = 64;
  Status s = validate_memory_array(m, 32ULL << 20);
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.field() == "memory.array_mib");
  CHECK(s.message().find("at least 128") != std::string::npos);
  m.array_mib = 128;
  CHECK(validate_memory_array(m, 32ULL << 20).is_ok());
  CHECK(validate_memory_array(m, 0).is_ok());  // unknown cache: nothing to check against

  Harness h;
  h.target.last_level_cache_bytes = 32ULL << 20;
  h.target.emulated = false;  // a native guest: its figure would be the cache's
  auto runner = h.runner();
  auto started = runner->start(request({"memory"}));
  REQUIRE_FALSE(started.is_ok());
  CHECK(started.status().field() == "memory.array_mib");
  CHECK(runner->list({}).empty());  // nothing queued, nothing run in the guest
  CHECK(h.hv.execs.empty());
  // A request naming no suite runs the defaults (network, compression): no memory check.
  auto defaults = runner->start(request({}));
  CHECK(defaults.is_ok());
  // Emulated (TCG), the figure measures QEMU anyway: the run goes ahead and the report says so.
  h.target.emulated = true;
  auto emulated = runner->start(request({"memory"}));
  CHECK(emulated.is_ok());
}

TEST_CASE("last-level cache from sysfs: largest data/unified cache, instruction caches ignored",
          "[bench]") {
  fs::path root = fs::temp_directory_path() / ("armhive-llc-" + std::to_string(::getpid()));
  auto index = [&](int cpu, int i, const char* level, const char* type, const char* size) {
    fs::path d = root / "devices/system/cpu" / ("cpu" + std::to_string(cpu)) / "cache" /
                 ("index" + std::to_string(i));
    fs::create_directories(d);
    std::ofstream(d / "level") << level << "\n";
    std::ofstream(d / "type") << type << "\n";
    std::ofstream(d / "size") << size << "\n";
  };
  index(0, 0, "1", "Data", "48K");
  index(0, 1, "1", "Instruction", "32K");
  index(0, 2, "2", "Unified", "1280K");
  index(1, 3, "3", "Unified", "32768K");
  index(1, 4, "4", "Instruction", "99999K");  // not a data cache
  fs::create_directories(root / "devices/system/cpufreq");
  auto llc = read_last_level_cache(root.string());
  REQUIRE(llc.has_value());
  CHECK(llc->level == 3);
  CHECK(llc->bytes == 32ULL << 20);
  CHECK_FALSE(read_last_level_cache((root / "nothing").string()).has_value());
  CHECK(parse_cache_size("8M") == 8ULL << 20);
  CHECK_FALSE(parse_cache_size("lots").has_value());
  CHECK_FALSE(parse_cache_size("-1K").has_value());
  fs::remove_all(root);
}

TEST_CASE("host baselines: only natively, with the host-side inputs and equal tool versions",
          "[bench]") {
  LeaseTarget t;
  t.guest_arch = "aarch64";
  t.host_arch = "x86_64";
  t.emulated = true;
  auto d = decide_host_baseline(t, kSuiteMemory);
  CHECK_FALSE(d.run);
  CHECK(d.reason.find("emulated by QEMU TCG") != std::string::npos);
  t.emulated = false;  // e.g. an aarch64 guest under KVM on... an x86 host cannot; still refused
  d = decide_host_baseline(t, kSuiteCrypto);
  CHECK_FALSE(d.run);
  CHECK(d.reason.find("architecture (x86_64) differs") != std::string::npos);
  t.host_arch = "aarch64";
  CHECK(decide_host_baseline(t, kSuiteCrypto).run);
  CHECK_FALSE(decide_host_baseline(t, kSuiteMemory).run);
  CHECK_FALSE(decide_host_baseline(t, kSuiteStorage).run);
  CHECK_FALSE(decide_host_baseline(t, kSuiteCompression).run);
  t.host_stream_path = "/usr/libexec/armhive/armhive-stream";
  t.host_scratch_dir = "/var/lib/armhive/scratch";
  t.host_corpus_path = "/var/lib/armhive/corpus.bin";
  for (auto s : {kSuiteMemory, kSuiteStorage, kSuiteCompression})
    CHECK(decide_host_baseline(t, s).run);

  CHECK(versions_comparable("openssl", "3.0.22", "3.0.22").run);
  auto v = versions_comparable("openssl", "3.0.22", "3.0.11");
  CHECK_FALSE(v.run);
  CHECK(v.reason.find("3.0.22 in the guest, 3.0.11 on the host") != std::string::npos);
  CHECK_FALSE(versions_comparable("fio", "fio-3.33", "").run);
}

TEST_CASE("guest/host ratio maths: per figure, inverted for lower-is-better, null when missing",
          "[bench]") {
  auto fig = [](std::string key, std::vector<double> samples, bool higher = true) {
    json f = figure_json({.suite = "x",
                          .side = "",
                          .variant = "",
                          .figure = "",
                          .label = key,
                          .unit = "u",
                          .higher_is_better = higher},
                         samples);
    f["key"] = key;
    return f;
  };
  json guest =
      json::array({fig("memory.guest.t1.copy_mb_s", {90, 95, 100}),
                   fig("storage.guest.rand_read_4k.lat_us", {200}, false),
                   fig("memory.guest.t2.copy_mb_s", {50}), fig("memory.guest.t1.add_mb_s", {10})});
  json host = json::array({fig("memory.host.t1.copy_mb_s", {100, 100, 110}),
                           fig("storage.host.rand_read_4k.lat_us", {150}, false),
                           fig("memory.host.t1.add_mb_s", {0.0})});
  json r = guest_host_ratios(guest, host);
  REQUIRE(r["available"] == true);
  REQUIRE(r["ratios"].size() == 4);
  CHECK(r["ratios"][0]["ratio"].get<double>() == Approx(95.0 / 100.0));   // medians
  CHECK(r["ratios"][1]["ratio"].get<double>() == Approx(150.0 / 200.0));  // slower = below 1
  CHECK(r["ratios"][2]["ratio"].is_null());                               // no host figure
  CHECK(r["ratios"][3]["ratio"].is_null());                               // host 0: no ratio
}

TEST_CASE("disk backing: filesystem names and the guest mount holding the test file", "[bench]") {
  CHECK(filesystem_type_name(0xEF53) == "ext4");
  CHECK(filesystem_type_name(0x58465342) == "xfs");
  CHECK(filesystem_type_name(0x1234) == "unknown (0x1234)");
  std::string mounts =
      "/dev/vda / ext4 rw 0 0\ntmpfs /run tmpfs rw 0 0\n/dev/vdb /var ext4 rw 0 0\n";
  CHECK(guest_mount_for(mounts, "/var/tmp")->device == "/dev/vdb");
  CHECK(guest_mount_for(mounts, "/variable")->device == "/dev/vda");
  CHECK(guest_mount_for(mounts, "/run")->fs_type == "tmpfs");
  CHECK_FALSE(guest_mount_for("", "/var/tmp").has_value());
  LeaseTarget t;
  CHECK(host_disk_backing(t)["host_filesystem"] == "unknown");
  t.disk_path = "/proc/self";
  CHECK(host_disk_backing(t)["host_filesystem"] == "unknown (0x9fa0)");  // procfs
}

TEST_CASE("runner: memory, crypto and storage on an emulated guest, report, HTML, CSV", "[bench]") {
  Harness h;
  BenchmarkRun run = run_to_end(h, request({"memory", "crypto", "storage"}));
  INFO(run.error);
  REQUIRE(run.state == BenchmarkState::kSucceeded);
  const json& rep = run.report;
  REQUIRE(check_benchmark_report(rep).is_ok());

  const json& mem = rep["memory"];
  CHECK(mem["tool"] == "armhive-stream 1 (gcc 12.2.0, -O2 -static -pthread)");
  CHECK(mem["settings"]["array_bytes"] == 64ULL << 20);
  CHECK(mem["settings"]["last_level_cache"]["bytes"] == 8ULL << 20);
  CHECK(mem["settings"]["array_to_cache"].get<double>() == Approx(8.0));
  CHECK(mem["figures"].size() == 8);  // 4 kernels x {1, 2 threads}
  CHECK(figure(mem, "memory.guest.t2.triad_mb_s")["spread"]["median"].get<double>() ==
        Approx(2200));
  CHECK(figure(mem, "memory.guest.t1.copy_mb_s")["spread"]["n"] == 3);
  CHECK(h.hv.saw("armhive-stream -n 8388608 -t 2 -i 5"));
  CHECK(mem["host"]["available"] == false);
  CHECK(mem["host"]["reason"].get<std::string>().find("TCG") != std::string::npos);

  const json& cr = rep["crypto"];
  CHECK(cr["openssl_version"] == "3.0.22");
  CHECK(cr["figures"].size() == 8);  // {2048, 4096} x {sign, verify} x {1, -multi 2}
  CHECK(figure(cr, "crypto.guest.p2.rsa2048_sign_per_s")["spread"]["median"].get<double>() ==
        Approx(229.9));
  CHECK(h.hv.saw("openssl speed -seconds 1 -multi 2 rsa2048 rsa4096"));

  const json& st = rep["storage"];
  CHECK(st["fio_version"] == "fio-3.33");
  CHECK(st["settings"]["backing"]["guest_filesystem"] == "ext4");
  CHECK(st["settings"]["backing"]["guest_device"] == "/dev/vda");
  CHECK(st["settings"]["backing"]["format"] == "qcow2");
  CHECK(st["settings"]["backing"]["host_filesystem"].get<std::string>() != "unknown");
  CHECK(figure(st, "storage.guest.rand_read_4k.iops")["spread"]["median"].get<double>() ==
        Approx(17523.238381));
  CHECK(figure(st, "storage.guest.rand_read_4k.lat_us")["higher_is_better"] == false);
  CHECK(h.hv.saw("--direct=1"));
  CHECK(h.hv.saw("--iodepth=8"));
  CHECK(h.hv.saw("rm -f /var/tmp/armhive-fio-" + run.id + ".dat"));
  CHECK(h.procs.runs.empty());  // nothing ran on an x86 host for an emulated guest

  std::string html = render_benchmark_html({run});
  CHECK(xml_count(html, "//h:h2[@id='suite-memory']") == 1);
  CHECK(xml_count(html, "//h:h2[@id='suite-crypto']") == 1);
  CHECK(xml_count(html, "//h:h2[@id='suite-storage']") == 1);
  // memory: 2 groups, crypto: 4, storage: 3 (sequential, random IOPS, latency).
  CHECK(xml_count(html, "//s:svg") >= 9);
  CHECK(html.find("No host baseline, so no guest/host ratio") != std::string::npos);
  std::string csv = render_benchmark_csv({run});
  CHECK(csv.find(",memory,,,1,memory.guest.t1.triad_mb_s,MB/s,") != std::string::npos);
  CHECK(csv.find(",crypto,,,2,crypto.guest.p2.rsa4096_verify_per_s,ops/s,") != std::string::npos);
  CHECK(csv.find(",storage,,,,storage.guest.seq_read.mb_s,MB/s,") != std::string::npos);
}

TEST_CASE("runner: on a native host every suite also runs on the pinned cores, ratios per figure",
          "[bench]") {
  Harness h;
  h.make_native();
  h.host_tools.stream_speed = 1.25;  // the host is 25 % faster: the guest reaches 80 %
  BenchmarkRun run = run_to_end(h, request({"memory", "crypto", "storage"}));
  INFO(run.error);
  REQUIRE(run.state == BenchmarkState::kSucceeded);
  const json& mem = run.report["memory"];
  REQUIRE(mem["host"]["available"] == true);
  CHECK(mem["host"]["cpus"] == json({2, 3}));
  for (const auto& r : mem["guest_host_ratio"]["ratios"]) {
    CHECK(r["ratio"].get<double>() == Approx(0.8).epsilon(1e-4));
  }
  bool pinned_stream = false;
  for (const auto& r : h.procs.runs) {
    CHECK(r.rfind("taskset -c 2,3 ", 0) == 0);  // every host run on the VM's cores
    pinned_stream |= r.find("/opt/armhive/armhive-stream -n 8388608 -t 2") != std::string::npos;
  }
  CHECK(pinned_stream);
  const json& cr = run.report["crypto"];
  REQUIRE(cr["host"]["available"] == true);
  CHECK(cr["guest_host_ratio"]["ratios"][0]["ratio"].get<double>() == Approx(1.0));
  const json& st = run.report["storage"];
  REQUIRE(st["host"]["available"] == true);
  CHECK(st["host"]["file"].get<std::string>().find(h.target.host_scratch_dir) == 0);
  std::string csv = render_benchmark_csv({run});
  CHECK(csv.find("memory.ratio.t1.copy_mb_s,x,0.8000") != std::string::npos);
  std::string html = render_benchmark_html({run});
  CHECK(xml_count(html, "//h:table[@class='figures']/h:tr/h:th[.='guest/host']") == 3);
}

TEST_CASE("runner: a host tool of another version gives no ratio and says why", "[bench]") {
  Harness h;
  h.make_native();
  h.host_tools.openssl_version =
      "OpenSSL 3.0.11 19 Sep 2023 (Library: OpenSSL 3.0.11 19 Sep 2023)\n";
  BenchmarkRun run = run_to_end(h, request({"crypto"}));
  REQUIRE(run.state == BenchmarkState::kSucceeded);
  const json& host = run.report["crypto"]["host"];
  CHECK(host["available"] == false);
  CHECK(host["reason"] ==
        "openssl 3.0.22 in the guest, 3.0.11 on the host: different versions "
        "measure different code");
}

TEST_CASE("runner: failures name the step and leave no test file behind", "[bench]") {
  Harness h;
  SECTION("fio fails in the guest") {
    h.guest_tools.override_handler =
        [](const std::vector<std::string>& a) -> std::optional<std::pair<int, std::string>> {
      if (a[0] == "fio" && a[1] != "--version")
        return std::pair{1, read_fixture("fio_libaio_enosys.json")};
      return std::nullopt;
    };
    BenchmarkRun run = run_to_end(h, request({"storage"}));
    CHECK(run.state == BenchmarkState::kFailed);
    CHECK(run.error.find("storage") != std::string::npos);
    CHECK(run.error.find("error 38") != std::string::npos);
    CHECK(h.hv.saw("rm -f /var/tmp/armhive-fio-" + run.id + ".dat"));
  }
  SECTION("armhive-stream missing from the image") {
    h.guest_tools.override_handler =
        [](const std::vector<std::string>& a) -> std::optional<std::pair<int, std::string>> {
      if (a[0] == "armhive-stream") return std::pair{127, std::string()};
      return std::nullopt;
    };
    BenchmarkRun run = run_to_end(h, request({"memory"}));
    CHECK(run.state == BenchmarkState::kFailed);
    CHECK(run.error.find("not installed in the guest") != std::string::npos);
  }
  SECTION("the arrays do not fit the guest's memory") {
    h.guest_tools.override_handler =
        [](const std::vector<std::string>& a) -> std::optional<std::pair<int, std::string>> {
      if (a[0] == "cat" && a[1] == "/proc/meminfo")
        return std::pair{0, std::string("MemAvailable: 100000 kB\n")};
      return std::nullopt;
    };
    BenchmarkRun run = run_to_end(h, request({"memory"}));
    CHECK(run.state == BenchmarkState::kFailed);
    CHECK(run.error.find("lower memory.array_mib") != std::string::npos);
    CHECK_FALSE(h.hv.saw("armhive-stream -n"));
  }
  SECTION("garbage from openssl") {
    h.guest_tools.override_handler =
        [](const std::vector<std::string>& a) -> std::optional<std::pair<int, std::string>> {
      if (a[0] == "openssl" && a[1] == "speed")
        return std::pair{0, std::string("                  sign    verify    sign/s verify/s\n"
                                        "rsa 2048 bits nan nan nan nan\n")};
      return std::nullopt;
    };
    BenchmarkRun run = run_to_end(h, request({"crypto"}));
    CHECK(run.state == BenchmarkState::kFailed);
    CHECK(run.error.find("crypto") != std::string::npos);
  }
}

TEST_CASE("compare across hosts: settings lined up, differences marked, versions block",
          "[bench]") {
  Harness h;
  BenchmarkRun a = run_to_end(h, request({"memory", "crypto"}));
  BenchmarkRun b = a;
  b.id = "b-other";
  b.host = "thunderx";
  b.report["settings"]["host"] = "thunderx";
  b.report["memory"]["settings"]["array_mib"] = 256;
  json cmp = compare_benchmark_runs({a, b});
  CHECK(cmp["incomparable"].empty());
  bool host_differs = false, array_differs = false;
  for (const auto& s : cmp["settings"]) {
    if (s["name"] == "host") host_differs = s["differs"] == true && s["blocking"] == false;
    if (s["name"] == "memory array MiB") array_differs = s["differs"] == true;
    if (s["name"] == "openssl version") CHECK(s["differs"] == false);
  }
  CHECK(host_differs);
  CHECK(array_differs);

  b.report["crypto"]["openssl_version"] = "3.0.11";
  cmp = compare_benchmark_runs({a, b});
  REQUIRE(cmp["incomparable"].size() == 1);
  CHECK(cmp["incomparable"][0] == "openssl version: 3.0.22 vs 3.0.11");
  std::string html = render_benchmark_html({a, b});
  CHECK(xml_count(html, "//h:tr[@class='blocking']") == 1);
  CHECK(xml_count(html, "//h:tr[@class='differs']") >= 2);
  CHECK(xml_count(html, "//h:p[@id='incomparable']") == 1);
}

}  // namespace
}  // namespace armhive
