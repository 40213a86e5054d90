// End-to-end: the memory, crypto and storage suites against one real tiny-image aarch64 guest
// (booted once, shared by the test cases below, destroyed at exit) under the sandboxed libvirtd.
// Each case runs its suite, checks the figures a user would check, and has headless Chromium
// render the report; HTML, PNG, JSON and the raw tool outputs (fixture captures) are kept in
// $ARMHIVE_E2E_STATE/artifacts. ARMHIVE_BENCH_E2E_REPEATS (default 3) sets the repeats, for
// the run-to-run spreads in BENCHMARKS.md.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/process_runner.h"
#include "daemon/bench/benchmark_runner.h"
#include "daemon/bench/report.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "daemon/virt/network.h"
#include "tests/support/e2e_guest.h"
#include "tests/support/files.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;
using nlohmann::json;

// One guest for every case of this file; built on first use, torn down at exit.
struct SharedGuest {
  fs::path state, artifacts;
  E2eGuest guest;
  LeaseTarget target;
  SubprocessRunner processes;
  SystemClock clock;
  std::unique_ptr<BenchmarkRunner> runner;  // declared after the guest: destroyed before it
  bool ready = false;

  void boot() {
    artifacts = fs::path(env_or("ARMHIVE_E2E_STATE", "/var/lib/armhive/e2e")) / "artifacts";
    fs::create_directories(artifacts);
    guest.boot({.tag = "suites",
                .net = {"armhive-suites-e2e", "ahsuitese2e0", "10.231.11.1/24", "10.231.11.10",
                        "10.231.11.100", 1500},
                .vcpus = 2,
                // three 128 MiB arrays (4x this host's 32 MiB L3) and the rest
                .memory_mib = 1024,
                .wait_address = false});
    state = guest.state();
    target = guest.target();
    target.disk_path = (state / "vms" / "overlays" / (guest.spec().name + ".qcow2")).string();
    BenchmarkRunnerOptions o;
    o.runs_dir = (state / "runs").string();
    o.zstd_timeout = std::chrono::minutes(5);
    runner = std::make_unique<BenchmarkRunner>(
        guest.hv(), processes, [this](const std::string&) -> Result<LeaseTarget> { return target; },
        clock, o);
    REQUIRE(runner->load().is_ok());
    ready = true;
  }

  // Runs `suite` to the end and renders its report; returns the run.
  BenchmarkRun run(const std::string& suite, const BenchmarkRequest& base) {
    BenchmarkRequest req = base;
    req.lease_id = "l-e2e";
    req.owner = "e2e";
    req.suites = {suite};
    auto started = runner->start(req);
    INFO(started.status().to_string());
    REQUIRE(started.is_ok());
    auto done = runner->wait(started->id, std::chrono::minutes(25));
    REQUIRE(done.is_ok());
    INFO("error: " << done->error);
    INFO("report: " << done->report.dump(1).substr(0, 4000));
    REQUIRE(done->state == BenchmarkState::kSucceeded);
    CHECK(check_benchmark_report(done->report).is_ok());
    const std::string stem = "bench-" + suite;
    std::ofstream(artifacts / (stem + ".json")) << to_json(*done).dump(1);
    std::ofstream(artifacts / (stem + ".csv")) << *runner->report_csv({done->id});
    screenshot(*runner->report_html({done->id}), stem);
    return *done;
  }

  void screenshot(const std::string& html, const std::string& stem) {
    const fs::path page = artifacts / (stem + ".html");
    const fs::path shot = artifacts / (stem + ".png");
    std::ofstream(page) << html;
    fs::remove(shot);
    const fs::path profile = state / ("chromium-" + stem);
    fs::create_directories(profile);
    auto chromium = processes.run(
        {.argv = {"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--no-first-run", "--user-data-dir=" + profile.string(),
                  "--screenshot=" + shot.string(), "--window-size=1280,2000",
                  "file://" + page.string()},
         .timeout = std::chrono::minutes(3)});
    fs::remove_all(profile);
    REQUIRE(chromium.is_ok());
    INFO("chromium stderr: " << chromium->err.substr(0, 2000));
    CHECK(chromium->exit_code == 0);
    REQUIRE(fs::exists(shot));
    CHECK(fs::file_size(shot) > 10000);
  }

  // The raw output of a guest command, kept as a fixture capture.
  void capture(const std::vector<std::string>& argv, const std::string& name) {
    auto r = guest.hv().exec(guest.spec().name, {.argv = argv, .timeout = std::chrono::minutes(5)});
    REQUIRE(r.is_ok());
    fs::create_directories(artifacts / "captures");
    std::ofstream(artifacts / "captures" / name) << r->out << r->err;
  }
};

SharedGuest& guest() {
  static SharedGuest g;
  if (!g.ready) g.boot();
  return g;
}

int repeats() { return std::stoi(env_or("ARMHIVE_BENCH_E2E_REPEATS", "3")); }

double median_of(const json& suite, const std::string& key) {
  for (const auto& f : suite["figures"])
    if (f["key"] == key) return f["spread"]["median"].get<double>();
  FAIL("no figure " << key);
  return 0;
}

TEST_CASE("memory suite on a real guest: STREAM kernels on 1 and 2 vCPUs", "[bench-suites][e2e]") {
  SharedGuest& g = guest();
  BenchmarkRequest req;
  req.memory.array_mib = 128;
  req.memory.iterations = 3;
  req.memory.repeats = repeats();
  BenchmarkRun run = g.run("memory", req);
  const json& mem = run.report["memory"];
  CHECK(mem["tool"].get<std::string>().rfind("armhive-stream 1 (gcc ", 0) == 0);
  CHECK(mem["settings"]["array_bytes"] == 128ULL << 20);
  CHECK(mem["figures"].size() == 8);
  for (const char* k : {"copy", "scale", "add", "triad"}) {
    CHECK(median_of(mem, std::string("memory.guest.t1.") + k + "_mb_s") > 0);
    CHECK(median_of(mem, std::string("memory.guest.t2.") + k + "_mb_s") > 0);
  }
  if (run.report["emulated"] == true) {
    CHECK(mem["host"]["reason"].get<std::string>().find("TCG") != std::string::npos);
  }
  g.capture({"armhive-stream", "-n", "4194304", "-t", "2", "-i", "2"}, "stream_tiny_guest.out");
  std::printf("memory (%s): triad 1T %.0f MB/s, 2T %.0f MB/s\n",
              run.report["emulated"] == true ? "EMULATED" : "native",
              median_of(mem, "memory.guest.t1.triad_mb_s"),
              median_of(mem, "memory.guest.t2.triad_mb_s"));
}

TEST_CASE("crypto suite on a real guest: openssl speed RSA, single and -multi 2",
          "[bench-suites][e2e]") {
  SharedGuest& g = guest();
  BenchmarkRequest req;
  req.crypto.repeats = repeats();
  BenchmarkRun run = g.run("crypto", req);
  const json& cr = run.report["crypto"];
  CHECK(cr["openssl_version"].get<std::string>().rfind("3.0.", 0) == 0);
  CHECK(cr["figures"].size() == 8);
  for (const char* k : {"rsa2048_sign_per_s", "rsa2048_verify_per_s", "rsa4096_sign_per_s",
                        "rsa4096_verify_per_s"}) {
    CHECK(median_of(cr, std::string("crypto.guest.p1.") + k) > 0);
    CHECK(median_of(cr, std::string("crypto.guest.p2.") + k) > 0);
  }
  // Verifying is much cheaper than signing, and 4096-bit keys cost more than 2048-bit ones.
  CHECK(median_of(cr, "crypto.guest.p1.rsa2048_verify_per_s") >
        median_of(cr, "crypto.guest.p1.rsa2048_sign_per_s"));
  CHECK(median_of(cr, "crypto.guest.p1.rsa2048_sign_per_s") >
        median_of(cr, "crypto.guest.p1.rsa4096_sign_per_s"));
  g.capture({"openssl", "speed", "-seconds", "1", "rsa2048"}, "openssl_speed_tiny_guest.out");
  g.capture({"openssl", "speed", "-seconds", "1", "-multi", "2", "rsa2048", "rsa4096"},
            "openssl_speed_multi2_tiny_guest.out");
  std::printf("crypto (%s): RSA 2048 sign %.1f/s (1), %.1f/s (-multi 2)\n",
              run.report["emulated"] == true ? "EMULATED" : "native",
              median_of(cr, "crypto.guest.p1.rsa2048_sign_per_s"),
              median_of(cr, "crypto.guest.p2.rsa2048_sign_per_s"));
}

TEST_CASE("storage suite on a real guest: fio with direct I/O on the qcow2 overlay",
          "[bench-suites][e2e]") {
  SharedGuest& g = guest();
  BenchmarkRequest req;
  req.storage.file_mib = 64;
  req.storage.random_seconds = 3;
  req.storage.repeats = repeats();
  BenchmarkRun run = g.run("storage", req);
  const json& st = run.report["storage"];
  CHECK(st["fio_version"] == "fio-3.33");
  const json& backing = st["settings"]["backing"];
  CHECK(backing["format"] == "qcow2");
  CHECK(backing["guest_device"] == "/dev/vda");
  CHECK(backing["guest_filesystem"] == "ext4");
  CHECK(backing["host_filesystem"].get<std::string>().find("unknown") == std::string::npos);
  CHECK(median_of(st, "storage.guest.seq_write.mb_s") > 0);
  CHECK(median_of(st, "storage.guest.seq_read.mb_s") > 0);
  CHECK(median_of(st, "storage.guest.rand_read_4k.iops") > 0);
  // The test file is gone.
  auto ls = g.guest.hv().exec(g.guest.spec().name,
                              {.argv = {"ls", "/var/tmp"}, .timeout = std::chrono::seconds(30)});
  REQUIRE(ls.is_ok());
  CHECK(ls->out.find("armhive-fio") == std::string::npos);
  g.capture({"fio", "--name=randread", "--filename=/var/tmp/capture.dat", "--size=16M", "--bs=4k",
             "--rw=randread", "--direct=1", "--ioengine=libaio", "--iodepth=8", "--runtime=2",
             "--time_based=1", "--output-format=json"},
            "fio_randread_tiny_guest.json");
  g.capture({"rm", "-f", "/var/tmp/capture.dat"}, "rm.out");
  std::printf(
      "storage (%s): seq write %.1f MB/s, seq read %.1f MB/s, 4k randread %.0f IOPS on "
      "%s over %s\n",
      run.report["emulated"] == true ? "EMULATED" : "native",
      median_of(st, "storage.guest.seq_write.mb_s"), median_of(st, "storage.guest.seq_read.mb_s"),
      median_of(st, "storage.guest.rand_read_4k.iops"),
      backing["guest_filesystem"].get<std::string>().c_str(),
      backing["host_filesystem"].get<std::string>().c_str());
}

TEST_CASE("an unknown suite and too small memory arrays are refused before anything runs",
          "[bench-suites][e2e]") {
  SharedGuest& g = guest();
  BenchmarkRequest req;
  req.lease_id = "l-e2e";
  req.suites = {"stream"};
  auto bad = g.runner->start(req);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().field() == "suites");
  req.suites = {"memory"};
  req.memory.array_mib = 0;  // out of range: refused naming the field, before any run
  auto small = g.runner->start(req);
  REQUIRE_FALSE(small.is_ok());
  CHECK(small.status().field() == "memory.array_mib");
}

}  // namespace
}  // namespace armhive
