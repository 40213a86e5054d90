// End-to-end: a real benchmark (network + compression) against a tiny-image aarch64 guest under
// the sandboxed libvirtd (this process runs inside the sandbox's network namespace; iperf3
// traffic goes only to the guest on the namespace's isolated network). The HTML report is
// rendered by headless Chromium; report and screenshot are kept in $ARMHIVE_E2E_STATE/artifacts.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
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

TEST_CASE("a real benchmark of a tiny guest yields a consistent report that Chromium renders",
          "[bench][e2e]") {
  const fs::path artifacts =
      fs::path(env_or("ARMHIVE_E2E_STATE", "/var/lib/armhive/e2e")) / "artifacts";
  fs::create_directories(artifacts);
  E2eGuest guest;
  guest.boot({.tag = "bench",
              .net = {"armhive-bench-e2e", "ahbenche2e0", "10.231.9.1/24", "10.231.9.10",
                      "10.231.9.100", 1500},
              .vcpus = 2,
              .memory_mib = 512});
  LibvirtHypervisor* hv = &guest.hv();
  const HostTopology& host = guest.host();
  const VmSpec& spec = guest.spec();
  const fs::path& state = guest.state();
  LeaseTarget target = guest.target();
  target.corpus_description = "tiny image corpus";

  SubprocessRunner processes;
  SystemClock clock;
  BenchmarkRunnerOptions bopts;
  bopts.runs_dir = (state / "runs").string();
  bopts.zstd_timeout = std::chrono::minutes(3);
  BenchmarkRunner runner(
      *hv, processes,
      [&](const std::string& lease) -> Result<LeaseTarget> {
        if (lease != "l-e2e") return not_found("no such lease", lease);
        return target;
      },
      clock, bopts);
  REQUIRE(runner.load().is_ok());

  BenchmarkRequest req;
  req.lease_id = "l-e2e";
  req.owner = "e2e";
  req.network.streams = 2;
  req.network.duration_s = 3;
  req.network.interval_s = 1;
  req.compression.repeats = 2;
  auto started = runner.start(req);
  INFO(started.status().to_string());
  REQUIRE(started.is_ok());
  auto run = runner.wait(started->id, std::chrono::minutes(12));
  REQUIRE(run.is_ok());
  INFO("error: " << run->error);
  INFO("report: " << run->report.dump(1).substr(0, 4000));
  REQUIRE(run->state == BenchmarkState::kSucceeded);

  const json& rep = run->report;
  CHECK(check_benchmark_report(rep).is_ok());
  CHECK(rep["emulated"] == (host.accel != Accel::kKvm));
  REQUIRE(rep["network"]["runs"].size() == 2);
  for (const auto& r : rep["network"]["runs"]) {
    CHECK(r["ports"] == json({5000, 5001}));
    CHECK(r["total"]["received_bits_per_second"].get<double>() > 0);
    double last_sum = 0, streams = 0;
    for (const auto& s : r["intervals"].back()["streams"])
      streams += s["bits_per_second"].get<double>();
    last_sum = r["intervals"].back()["sum"]["bits_per_second"].get<double>();
    CHECK(streams == Approx(last_sum).epsilon(0.005));
    CHECK(r["host_cpu"]["available"] == true);
  }
  const json& comp = rep["compression"];
  REQUIRE(comp["guest"].size() == 2);
  for (const auto& s : comp["guest"]) {
    CHECK(s["compressed_bytes"].get<uint64_t>() < s["input_bytes"].get<uint64_t>());
    CHECK(s["compress_mb_s"]["median"].get<double>() > 0);
    CHECK(s["decompress_mb_s"]["median"].get<double>() > 0);
  }
  if (target.corpus_bytes) CHECK(comp["guest"][0]["input_bytes"] == target.corpus_bytes);

  // Nothing left behind in the guest: no iperf3 server, no pidfile.
  auto pids =
      hv->exec(spec.name, {.argv = {"pidof", "iperf3"}, .timeout = std::chrono::seconds(30)});
  REQUIRE(pids.is_ok());
  CHECK(pids->exit_code != 0);
  CHECK(pids->out.empty());

  // The HTML report renders in headless Chromium.
  auto html = runner.report_html({run->id});
  REQUIRE(html.is_ok());
  const fs::path page = artifacts / "bench-report.html";
  const fs::path shot = artifacts / "bench-report.png";
  std::ofstream(page) << *html;
  std::ofstream(artifacts / "bench-report.json") << to_json(*run).dump(1);
  std::ofstream(artifacts / "bench-report.csv") << *runner.report_csv({run->id});
  fs::remove(shot);
  const fs::path profile = state / "chromium-profile";
  fs::create_directories(profile);
  auto chromium = processes.run(
      {.argv = {"chromium", "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--user-data-dir=" + profile.string(),
                "--screenshot=" + shot.string(), "--window-size=1280,2000",
                "file://" + page.string()},
       .timeout = std::chrono::minutes(3)});
  REQUIRE(chromium.is_ok());
  INFO("chromium stderr: " << chromium->err.substr(0, 2000));
  CHECK(chromium->exit_code == 0);
  CHECK(fs::exists(shot));
  if (fs::exists(shot)) CHECK(fs::file_size(shot) > 10000);

  // A second, network-only run with 4 streams, compared with the first (`armhive bench compare`).
  BenchmarkRequest req4 = req;
  req4.suites = {"network"};
  req4.network.streams = 4;
  req4.network.both_directions = false;
  auto started4 = runner.start(req4);
  REQUIRE(started4.is_ok());
  auto run4 = runner.wait(started4->id, std::chrono::minutes(5));
  REQUIRE(run4.is_ok());
  INFO("second run error: " << run4->error);
  REQUIRE(run4->state == BenchmarkState::kSucceeded);
  CHECK(run4->report["network"]["runs"][0]["ports"] == json({5000, 5001, 5002, 5003}));
  CHECK(runner.list({.vm_name = spec.name}).size() == 2);
  auto cmp = runner.compare({run->id, run4->id});
  REQUIRE(cmp.is_ok());
  bool compared = false;
  for (const auto& m : (*cmp)["metrics"]) {
    if (m["key"] == "network.host-to-guest.mtu1500.gbit_s") {
      compared = true;
      CHECK(m["ratios"][0].get<double>() == Approx(1.0));
      CHECK(m["ratios"][1].get<double>() > 0);
    }
  }
  CHECK(compared);
  auto cmp_html = runner.report_html({run->id, run4->id});
  REQUIRE(cmp_html.is_ok());
  const fs::path cmp_page = artifacts / "bench-compare.html";
  const fs::path cmp_shot = artifacts / "bench-compare.png";
  std::ofstream(cmp_page) << *cmp_html;
  fs::remove(cmp_shot);
  auto chromium2 = processes.run(
      {.argv = {"chromium", "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--user-data-dir=" + profile.string(),
                "--screenshot=" + cmp_shot.string(), "--window-size=1280,2000",
                "file://" + cmp_page.string()},
       .timeout = std::chrono::minutes(3)});
  REQUIRE(chromium2.is_ok());
  CHECK(chromium2->exit_code == 0);
  CHECK(fs::exists(cmp_shot));

  const auto& fwd = rep["network"]["runs"][0];
  const auto& rev = rep["network"]["runs"][1];
  std::printf(
      "bench e2e (%s): host.guest %.3f Gbit/s, guest->host %.3f Gbit/s; zstd -3 -T1 %.1f MB/s "
      "(min %.1f, max %.1f), -T2 %.1f MB/s, decompress -T1 %.1f MB/s; zstd %s; report %s\n",
      rep["emulated"].get<bool>() ? "EMULATED" : "native",
      fwd["total"]["received_bits_per_second"].get<double>() / 1e9,
      rev["total"]["received_bits_per_second"].get<double>() / 1e9,
      comp["guest"][0]["compress_mb_s"]["median"].get<double>(),
      comp["guest"][0]["compress_mb_s"]["min"].get<double>(),
      comp["guest"][0]["compress_mb_s"]["max"].get<double>(),
      comp["guest"][1]["compress_mb_s"]["median"].get<double>(),
      comp["guest"][0]["decompress_mb_s"]["median"].get<double>(),
      comp.value("zstd_version", "?").c_str(), page.c_str());
  std::printf(
      "bench e2e: -P 4 host.guest %.3f Gbit/s\n",
      run4->report["network"]["runs"][0]["total"]["received_bits_per_second"].get<double>() / 1e9);
  fs::remove_all(profile);
}

}  // namespace
}  // namespace armhive
