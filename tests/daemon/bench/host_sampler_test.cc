#include "daemon/bench/host_sampler.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/daemon/bench/bench_test_util.h"

namespace armhive {
namespace {

using bench_test::fixture_path;
namespace fs = std::filesystem;

TEST_CASE("proc/stat reader and per-core split", "[bench]") {
  auto before = read_proc_stat(fixture_path("proc_before"));
  auto after = read_proc_stat(fixture_path("proc_after"));
  REQUIRE(before.is_ok());
  REQUIRE(after.is_ok());
  CHECK(before->size() == 3);  // the aggregate "cpu" line is not a core
  auto split = cpu_split(*before, *after);
  REQUIRE(split.size() == 3);
  // cpu0: user 10, system 50, idle 20, irq 50, softirq 100 of 230 ticks.
  CHECK(split[0].cpu == 0);
  CHECK(split[0].ticks == 230);
  CHECK(split[0].softirq == Approx(100.0 * 100 / 230));
  CHECK(split[0].irq == Approx(100.0 * 50 / 230));
  CHECK(split[0].system == Approx(100.0 * 50 / 230));
  // cpu1: user+nice 60, system 50, idle+iowait 40, steal 10 of 160.
  CHECK(split[1].user == Approx(37.5));
  CHECK(split[1].idle == Approx(25.0));
  CHECK(split[1].other == Approx(6.25));
  CHECK(split[2].idle == Approx(100.0));
  for (const auto& c : split) {
    CHECK(c.user + c.system + c.irq + c.softirq + c.idle + c.other == Approx(100.0));
  }
  CHECK_FALSE(read_proc_stat("/nonexistent-root").is_ok());
}

// Found by tests/fuzz/proc_stat_fuzz.cc: "-10" parsed as a huge unsigned count (istream
// semantics), the per-core sums wrapped and the split left 0..100 %.
TEST_CASE("proc/stat: signs, garbage and absurd counts are malformed lines", "[bench][hostile]") {
  const std::string good = "cpu0 100 0 100 500 0 10 10 0 0 0\n";
  REQUIRE(parse_proc_stat(good, "stat").is_ok());
  for (const char* bad : {"cpu0 -10 0 150 520 0 60 110 0\n", "cpu0 1 2 3\n",
                          "cpu0 1 2 3 4 5 6 x7 8\n", "cpu0 1 2 3 4 5 6 7 99999999999999999999\n",
                          "cpu0 1 2 3 4 5 6 7 72057594037927937\n", "cpu99999 1 2 3 4 5 6 7\n"}) {
    INFO(bad);
    auto r = parse_proc_stat(bad, "stat");
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("malformed line in stat"));
  }
  // Counts up to 2^56 cannot wrap the sums: the split stays a split.
  auto before = parse_proc_stat("cpu0 0 0 0 0 0 0 0 0\n", "stat");
  auto after = parse_proc_stat(
      "cpu0 72057594037927936 72057594037927936 72057594037927936 72057594037927936 "
      "72057594037927936 72057594037927936 72057594037927936 72057594037927936\n",
      "stat");
  REQUIRE(before.is_ok());
  REQUIRE(after.is_ok());
  for (const auto& c : cpu_split(*before, *after)) {
    CHECK(c.user + c.system + c.irq + c.softirq + c.idle + c.other == Approx(100.0));
  }
}

TEST_CASE("CPU sampler samples a changing /proc/stat on its own thread", "[bench]") {
  fs::path root = fs::temp_directory_path() / ("armhive-bench-proc-" + std::to_string(::getpid()));
  fs::create_directories(root);
  fs::copy_file(fixture_path("proc_before/stat"), root / "stat",
                fs::copy_options::overwrite_existing);
  {
    CpuSampler sampler(root.string(), std::chrono::milliseconds(5));
    REQUIRE(sampler.start().is_ok());
    fs::copy_file(fixture_path("proc_after/stat"), root / "stat",
                  fs::copy_options::overwrite_existing);
    auto usage = sampler.stop();
    REQUIRE(usage.is_ok());
    REQUIRE(usage->cores.size() == 3);
    CHECK(usage->cores[1].user == Approx(37.5));  // first vs last snapshot
    CHECK_FALSE(usage->periods.empty());
  }
  {
    CpuSampler missing((root / "nope").string());
    CHECK_FALSE(missing.start().is_ok());
  }
  fs::remove_all(root);
}

TEST_CASE("sensors: readable, unreadable and absent are told apart", "[bench]") {
  auto sensors = read_sensors(fixture_path("sys"));
  REQUIRE(sensors.size() == 4);
  CHECK(sensors[0].id == "thermal_zone0");
  CHECK(sensors[0].label == "x86_pkg_temp");
  REQUIRE(sensors[0].celsius.has_value());
  CHECK(*sensors[0].celsius == Approx(47.5));
  CHECK(sensors[1].id == "thermal_zone1");
  CHECK_FALSE(sensors[1].celsius.has_value());  // exists but unreadable: not 0 °C
  CHECK_FALSE(sensors[1].error.empty());
  CHECK(sensors[2].id == "hwmon0/temp1");
  CHECK(sensors[2].label == "coretemp Package id 0");
  CHECK(*sensors[2].celsius == Approx(51.0));
  CHECK(sensors[3].id == "hwmon0/temp2");
  CHECK(sensors[3].label == "coretemp");
  // No sensors at all (a VM): an empty list, which the report shows as "absent".
  CHECK(read_sensors("/nonexistent-sys").empty());
}

}  // namespace
}  // namespace armhive
