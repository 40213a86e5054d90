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

}  // namespace
}  // namespace armhive
