#include "cli/bench_summary.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

namespace armhive {
namespace {

TEST_CASE("bench show summarises a real report for people", "[cli]") {
  // A report captured from `scripts/demo` (tiny guest under TCG).
  std::ifstream in(std::string(ARMHIVE_FIXTURES_DIR) + "/bench/report_tiny_tcg.json");
  REQUIRE(in);
  nlohmann::json report = nlohmann::json::parse(in);
  std::ostringstream out;
  print_bench_summary(report, out);
  const std::string text = out.str();
  INFO(text);
  CHECK(text.find("EMULATED") != std::string::npos);
  CHECK(text.find("host-to-guest") != std::string::npos);
  CHECK(text.find("guest-to-host") != std::string::npos);
  // Gbit/s as the report's goodput, three decimals.
  double bps = report["network"]["runs"][0]["total"]["received_bits_per_second"].get<double>();
  char expect[32];
  std::snprintf(expect, sizeof expect, "%.3f", bps / 1e9);
  CHECK(text.find(expect) != std::string::npos);
  CHECK(text.find("zstd " + report["compression"]["zstd_version"].get<std::string>()) !=
        std::string::npos);
  CHECK(text.find("(CV ") != std::string::npos);
  CHECK(text.find("seed 20260130") != std::string::npos);
}

TEST_CASE("bench show skips what a report does not have", "[cli]") {
  std::ostringstream out;
  print_bench_summary(nlohmann::json::parse(R"({"emulated": false, "network": {"runs": []}})"),
                      out);
  CHECK(out.str().empty());
  print_bench_summary(nlohmann::json::object(), out);
  CHECK(out.str().empty());
}

TEST_CASE("bench compare refuses runs of different corpora or tool versions, says how to override",
          "[cli]") {
  auto cmp = nlohmann::json::parse(R"({
    "runs": [{"id": "b-1"}, {"id": "b-2"}],
    "settings": [
      {"name": "host", "values": ["honeycomb", "thunderx"], "differs": true, "blocking": false},
      {"name": "zstd version", "values": ["1.5.4", "1.5.5"], "differs": true, "blocking": true},
      {"name": "vCPUs", "values": ["4", "4"], "differs": false, "blocking": false}],
    "incomparable": ["zstd version: 1.5.4 vs 1.5.5"], "metrics": []})");
  std::string why = incomparable_message(cmp);
  CHECK(why.find("zstd version: 1.5.4 vs 1.5.5") != std::string::npos);
  CHECK(why.find("--allow-different") != std::string::npos);
  std::ostringstream out;
  print_compare_settings(cmp, out);
  CHECK(out.str().find("host *") != std::string::npos);
  CHECK(out.str().find("zstd version !") != std::string::npos);
  CHECK(out.str().find("vCPUs ") != std::string::npos);
  CHECK(out.str().find("thunderx") != std::string::npos);
  cmp["incomparable"] = nlohmann::json::array();
  CHECK(incomparable_message(cmp).empty());
  CHECK(incomparable_message(nlohmann::json()).empty());
}

TEST_CASE("bench show lists the memory, crypto and storage figures with host ratios", "[cli]") {
  nlohmann::json triad = {{"key", "memory.guest.t1.triad_mb_s"},
                          {"label", "triad, 1 thread"},
                          {"unit", "MB/s"},
                          {"spread", {{"median", 9000.5}, {"cv", 0.02}}}};
  nlohmann::json report = {
      {"emulated", false},
      {"memory",
       {{"tool", "armhive-stream 1 (gcc 12.2.0, -O2 -static -pthread)"},
        {"figures", {triad}},
        {"host", {{"available", true}}},
        {"guest_host_ratio",
         {{"available", true},
          {"ratios", {{{"key", "memory.guest.t1.triad_mb_s"}, {"ratio", 0.975}}}}}}}},
      {"crypto",
       {{"openssl_version", "3.0.22"},
        {"figures", nlohmann::json::array()},
        {"host", {{"available", false}, {"reason", "the host architecture (x86_64) differs"}}}}}};
  std::ostringstream out;
  print_bench_summary(report, out);
  const std::string text = out.str();
  INFO(text);
  CHECK(text.find("Memory bandwidth (armhive-stream 1") != std::string::npos);
  CHECK(text.find("triad, 1 thread") != std::string::npos);
  CHECK(text.find("9000.5 (CV 2%)") != std::string::npos);
  CHECK(text.find("97.5%") != std::string::npos);
  CHECK(text.find("Crypto (3.0.22)") != std::string::npos);
  CHECK(text.find("host: the host architecture (x86_64) differs") != std::string::npos);
}

}  // namespace
}  // namespace armhive
