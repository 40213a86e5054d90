#include "daemon/bench/health_band.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace armhive {
namespace {

TEST_CASE("health band: median - 3 x MAD of the last K results flags a slower host", "[bench]") {
  HealthBandOptions o;
  o.window = 5;
  o.min_history = 3;
  // The first two are outside the window of 5 and must not count.
  std::vector<double> history = {1.0, 1.0, 100, 102, 98, 101, 99};
  auto band = baseline_band(history, o);
  REQUIRE(band.has_value());
  CHECK(band->n == 5);
  CHECK(band->median == 100);
  CHECK(band->mad == 1);  // |deviations| 0,2,2,1,1 -> median 1
  CHECK(band->low == 97);
  CHECK(band->high == 103);

  auto ok = check_health("triad MB/s", history, 97.5, true, o);
  CHECK(ok.verdict == HealthVerdict::kWithinBand);
  auto bad = check_health("triad MB/s", history, 90, true, o);
  CHECK(bad.verdict == HealthVerdict::kDegraded);
  CHECK(bad.reason.find("outside its band [97.00, 103.00]") != std::string::npos);
  CHECK(bad.reason.find("-10.0 % from the median") != std::string::npos);
  // Faster is not sick.
  CHECK(check_health("triad MB/s", history, 150, true, o).verdict == HealthVerdict::kWithinBand);
  // Latency: higher is worse.
  CHECK(check_health("lat us", history, 104, false, o).verdict == HealthVerdict::kDegraded);
  CHECK(check_health("lat us", history, 50, false, o).verdict == HealthVerdict::kWithinBand);
  CHECK(check_health("x", history, std::nan(""), true, o).verdict == HealthVerdict::kDegraded);
}

TEST_CASE("health band: too little history gives no verdict, a flat history has a floor",
          "[bench]") {
  HealthBandOptions o;
  auto c = check_health("copy MB/s", {10, 10}, 1, true, o);
  CHECK(c.verdict == HealthVerdict::kInsufficientHistory);
  CHECK(c.reason.find("2 earlier results, 5 needed") != std::string::npos);
  std::vector<double> flat(10, 200.0);
  auto band = baseline_band(flat, o);
  REQUIRE(band.has_value());
  CHECK(band->mad == Approx(2.0));  // 1 % of the median, not 0
  CHECK(check_health("copy", flat, 199, true, o).verdict == HealthVerdict::kWithinBand);
  CHECK(check_health("copy", flat, 190, true, o).verdict == HealthVerdict::kDegraded);
  CHECK_FALSE(baseline_band({1, 2, std::nan(""), 4, 5}, o).has_value());
}

TEST_CASE("health schedule interval: off or at least the configured minimum", "[bench]") {
  CHECK(validate_health_interval(0, 6, "health.interval_hours").is_ok());
  CHECK(validate_health_interval(12, 6, "health.interval_hours").is_ok());
  Status s = validate_health_interval(1, 6, "health.interval_hours");
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.field() == "health.interval_hours");
  CHECK(s.message().find("between 6 and") != std::string::npos);
  CHECK_FALSE(validate_health_interval(-3, 6, "health.interval_hours").is_ok());
}

}  // namespace
}  // namespace armhive
