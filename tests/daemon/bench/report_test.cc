#include "daemon/bench/report.h"

#include <catch2/catch.hpp>

#include "daemon/bench/svg.h"
#include "tests/daemon/bench/bench_test_util.h"
#include "tests/support/xml_count.h"

namespace armhive {
namespace {

using bench_test::fixture_path;
using bench_test::read_fixture;
using nlohmann::json;

constexpr const char* kHostile = "<script>alert('x')</script>&\"vm\"\x01\xff";

json sample_report(bool emulated, double speed_scale = 1.0) {
  auto fwd = parse_iperf3_json(read_fixture("iperf3_forward_p4.json"));
  auto rev = parse_iperf3_json(read_fixture("iperf3_reverse_p4.json"));
  REQUIRE(fwd.is_ok());
  REQUIRE(rev.is_ok());
  auto before = read_proc_stat(fixture_path("proc_before"));
  auto after = read_proc_stat(fixture_path("proc_after"));
  HostCpuUsage usage{cpu_split(*before, *after), {cpu_split(*before, *after)}, 1.0};
  auto z = parse_zstd_bench(read_fixture("zstd_b3_t1_quiet.out"));
  REQUIRE(z.is_ok());
  std::vector<ZstdBenchResult> reps;
  for (double f : {1.0, 0.9, 1.1, 0.95, 1.05}) {
    ZstdBenchResult r = *z;
    r.compress_mb_s *= f * speed_scale;
    r.decompress_mb_s *= f * speed_scale;
    reps.push_back(r);
  }
  json report{{"schema", kReportSchema},
              {"emulated", emulated},
              {"emulation_note", "aarch64 guest under QEMU TCG on an x86_64 host"},
              {"settings",
               {{"host", kHostile},
                {"host_arch", "x86_64"},
                {"guest_arch", "aarch64"},
                {"vcpus", 2},
                {"pinned_cpus", {2, 3}},
                {"housekeeping_cpus", {0}},
                {"mtu", 1500}}}};
  report["network"] = {{"runs",
                        {network_run_json(*fwd, 1500, usage, ""),
                         network_run_json(*rev, 1500, std::nullopt, "no /proc")}}};
  report["compression"] = {
      {"zstd_version", "1.5.4"},
      {"level", 3},
      {"repeats", 5},
      {"corpus", {{"path", "/usr/share/armhive/corpus.bin"}, {"bytes", 8388608}, {"seed", 7}}},
      {"guest", {zstd_series_json(1, reps), zstd_series_json(2, reps)}},
      {"host", {{"available", false}, {"reason", "emulated guest"}}},
      {"guest_host_ratio", {{"available", false}, {"reason", "emulated guest"}}}};
  report["sensors"] = {{"before", sensors_json(read_sensors(fixture_path("sys")))},
                       {"after", sensors_json(read_sensors(fixture_path("sys")))}};
  return report;
}

BenchmarkRun sample_run(std::string id, std::string vm, bool emulated, double scale = 1.0) {
  BenchmarkRun r;
  r.id = std::move(id);
  r.lease_id = "l-000000000001";
  r.owner = "alice";
  r.vm_name = std::move(vm);
  r.pool = "ci";
  r.host = "honeycomb";
  r.state = BenchmarkState::kSucceeded;
  r.created_at = from_unix_ms(1'796'000'000'000);
  r.finished_at = from_unix_ms(1'796'000'060'000);
  r.report = sample_report(emulated, scale);
  return r;
}

TEST_CASE("report JSON from real captures is consistent, broken ones are caught", "[bench]") {
  json report = sample_report(true);
  REQUIRE(check_benchmark_report(report).is_ok());
  const json& fwd = report["network"]["runs"][0];
  CHECK(fwd["direction"] == "host-to-guest");
  CHECK(fwd["ports"] == json({5000, 5001, 5002, 5003}));
  CHECK(fwd["path_mtu"] == 65535);  // loopback
  CHECK(fwd["host_cpu"]["available"] == true);
  CHECK(report["network"]["runs"][1]["direction"] == "guest-to-host");
  CHECK(report["network"]["runs"][1]["host_cpu"]["available"] == false);
  const json& t1 = report["compression"]["guest"][0];
  CHECK(t1["compress_mb_s"]["median"].get<double>() == Approx(903.03));
  CHECK(t1["compress_mb_s"]["min"].get<double>() == Approx(903.03 * 0.9));
  CHECK(t1["compress_mb_s"]["cv"].get<double>() > 0);
  CHECK(report["sensors"]["before"][1]["celsius"].is_null());  // unreadable, not zero

  json bad_sum = report;
  bad_sum["network"]["runs"][0]["intervals"][1]["streams"][2]["bits_per_second"] = 1.0;
  auto s1 = check_benchmark_report(bad_sum);
  REQUIRE_FALSE(s1.is_ok());
  CHECK_THAT(s1.message(), Catch::Contains("streams sum to"));

  json bad_zstd = report;
  bad_zstd["compression"]["guest"][1]["compressed_bytes"] = 9'000'000;
  auto s2 = check_benchmark_report(bad_zstd);
  REQUIRE_FALSE(s2.is_ok());
  CHECK_THAT(s2.message(), Catch::Contains("compressed size is not below"));

  json nothing = report;
  nothing["network"]["runs"][0]["total"]["received_bytes"] = 0;
  CHECK_FALSE(check_benchmark_report(nothing).is_ok());
}

TEST_CASE("HTML report is well-formed, self-contained, escaped, with the charts", "[bench]") {
  BenchmarkRun run = sample_run("b-000000000001", kHostile, true);
  run.pool = "<b>pool</b>";
  std::string html = render_benchmark_html({run});
  REQUIRE(xml_count(html, "/h:html") == 1);  // well-formed XML
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("alert(&#39;x&#39;)") != std::string::npos);
  CHECK(html.find("<b>pool") == std::string::npos);
  CHECK(html.find("http://") == html.find("http://www.w3.org"));  // only namespaces, no assets
  CHECK(html.find("src=") == std::string::npos);
  CHECK(xml_count(html, "//h:span[@id='emulated-badge']") == 1);
  // 2 throughput charts, 1 CPU split (the reverse run has none), 1 direction bar chart,
  // 2 compression charts.
  CHECK(xml_count(html, "//s:svg") == 6);
  CHECK(xml_count(html,
                  "//s:svg[s:title[starts-with(., 'Throughput per interval')]]//s:polyline") == 10);
  CHECK(xml_count(html, "//s:svg[s:title[starts-with(., 'Host CPU split')]]") == 1);
  CHECK(xml_count(html, "//s:svg[s:title[starts-with(., 'Host CPU split')]]//s:text[.='hk']") == 1);
  CHECK(xml_count(html, "//s:svg[s:title[starts-with(., 'Host CPU split')]]//s:text[.='vm']") == 1);
  CHECK(xml_count(html, "//s:g[@class='whisker']") == 4);
  CHECK(xml_count(html, "//h:table[@class='settings']//h:th[.='pinned host cores']") == 1);
  CHECK(html.find("2,3") != std::string::npos);

  BenchmarkRun native = sample_run("b-000000000002", "vm-b", false);
  CHECK(xml_count(render_benchmark_html({native}), "//h:span[@id='emulated-badge']") == 0);
}

TEST_CASE("comparison: ratios vs the first run, HTML side by side, CSV", "[bench]") {
  BenchmarkRun a = sample_run("b-00000000000a", "vm-a", true);
  BenchmarkRun b = sample_run("b-00000000000b", "=HYPERLINK(\"x\"),vm", true, 2.0);
  json cmp = compare_benchmark_runs({a, b});
  REQUIRE(cmp["runs"].size() == 2);
  bool found = false;
  for (const auto& m : cmp["metrics"]) {
    if (m["key"] == "compression.guest.t1.compress_mb_s") {
      found = true;
      CHECK(m["ratios"][0].get<double>() == Approx(1.0));
      CHECK(m["ratios"][1].get<double>() == Approx(2.0));
    }
    if (m["key"] == "network.host-to-guest.mtu1500.gbit_s") {
      CHECK(m["values"][0].get<double>() == Approx(28.087998992308357));
    }
  }
  CHECK(found);

  std::string html = render_benchmark_html({a, b});
  REQUIRE(xml_count(html, "/h:html") == 1);
  CHECK(xml_count(html, "//s:svg") >= 4);
  CHECK(html.find("\xC3\x97"
                  "2.00") != std::string::npos);  // ×2.00

  // A run without the compression suite: its compression bars are "n/a", never 0.
  BenchmarkRun c = sample_run("b-00000000000c", "vm-c", true);
  c.report.erase("compression");
  std::string three = render_benchmark_html({a, b, c});
  REQUIRE(xml_count(three, "/h:html") == 1);
  CHECK(xml_count(three,
                  "//s:svg[s:title[starts-with(., 'zstd compress MB/s (guest, 1 "
                  "thread)')]]//s:text[.='n/a']") == 1);
  CHECK(xml_count(three,
                  "//s:svg[s:title[starts-with(., 'zstd compress MB/s (guest, 1 "
                  "thread)')]]//s:rect[s:title]") == 2);
  CHECK(xml_count(three, "//h:th[.='Key settings']") == 0);
  CHECK(xml_count(three, "//h:h2[.='Key settings']") == 1);

  std::string csv = render_benchmark_csv({a, b});
  CHECK(csv.rfind("run_id,created_at,vm_name,", 0) == 0);
  CHECK(csv.find("\"'=HYPERLINK(\"\"x\"\"),vm\"") != std::string::npos);  // quoted and defused
  CHECK(csv.find(",=") == std::string::npos);
  CHECK(csv.find("compression.guest.t2.decompress_mb_s") != std::string::npos);
}

TEST_CASE("SVG charts stay well-formed with hostile names, long runs and many streams", "[bench]") {
  std::string svg = svg_bar_chart(kHostile, kHostile, {{kHostile, 1.5, 1.0, 2.0, kHostile}});
  CHECK(xml_count(svg, "/s:svg") == 1);
  std::string lines = svg_line_chart(kHostile, "s", "Gbit/s", {{kHostile, {{1, 2}, {2, 3}}, true}});
  CHECK(xml_count(lines, "/s:svg//s:polyline") == 1);

  // The x axis ends at the test's duration although iperf3's last interval ends a bit later.
  std::string axis = svg_line_chart("t", "seconds", "Gbit/s",
                                    {{"sum", {{1.0004, 1}, {2.0002, 1}, {3.0004, 1}}, true}});
  CHECK(xml_count(axis, "/s:svg/s:text[.='3']") == 1);
  CHECK(xml_count(axis, "/s:svg/s:text[.='4']") == 0);

  // 40 streams: every line is drawn, the legend keeps 15 of them, the sum, and a count.
  std::vector<SvgLineSeries> many;
  for (int i = 0; i < 40; ++i)
    many.push_back({"port " + std::to_string(5000 + i), {{1, 1.0 * i}}, false});
  many.push_back({"sum", {{1, 780}}, true});
  std::string crowded = svg_line_chart("many", "s", "Gbit/s", many);
  CHECK(xml_count(crowded, "/s:svg//s:polyline") == 41);
  CHECK(xml_count(crowded, "/s:svg/s:rect[@width='10']") == 16);
  CHECK(xml_count(crowded, "/s:svg/s:text[.='sum']") == 1);
  CHECK(xml_count(crowded, "/s:svg/s:text[.='+25 more']") == 1);
}

}  // namespace
}  // namespace armhive
