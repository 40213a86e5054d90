#include "base/metrics.h"

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

namespace armhive {
namespace {

TEST_CASE("metrics: counters, gauges and histograms render in the text format", "[metrics]") {
  Metrics m;
  m.describe_counter("armhive_api_requests_total", "API requests");
  m.inc("armhive_api_requests_total", {{"method", "GET"}, {"status", "200"}});
  m.inc("armhive_api_requests_total", {{"method", "GET"}, {"status", "200"}}, 2);
  m.set("armhive_warm_vms", {{"pool", "tiny"}}, 3);
  m.describe_histogram("armhive_latency_seconds", "latency", {0.1, 1});
  m.observe("armhive_latency_seconds", {}, 0.05);
  m.observe("armhive_latency_seconds", {}, 0.5);
  m.observe("armhive_latency_seconds", {}, 7);

  std::string text = m.exposition();
  CHECK(text.find("# HELP armhive_api_requests_total API requests\n") != std::string::npos);
  CHECK(text.find("# TYPE armhive_api_requests_total counter\n") != std::string::npos);
  CHECK(text.find("armhive_api_requests_total{method=\"GET\",status=\"200\"} 3\n") !=
        std::string::npos);
  CHECK(text.find("# TYPE armhive_warm_vms gauge\narmhive_warm_vms{pool=\"tiny\"} 3\n") !=
        std::string::npos);
  CHECK(text.find("armhive_latency_seconds_bucket{le=\"0.1\"} 1\n") != std::string::npos);
  CHECK(text.find("armhive_latency_seconds_bucket{le=\"1\"} 2\n") != std::string::npos);
  CHECK(text.find("armhive_latency_seconds_bucket{le=\"+Inf\"} 3\n") != std::string::npos);
  CHECK(text.find("armhive_latency_seconds_count 3\n") != std::string::npos);
  CHECK(text.find("armhive_latency_seconds_sum 7.55\n") != std::string::npos);
  CHECK(m.value("armhive_api_requests_total", {{"method", "GET"}, {"status", "200"}}) == 3);
  CHECK(m.count("armhive_latency_seconds") == 3);
}

TEST_CASE("metrics: label values are escaped and gauges can be cleared", "[metrics]") {
  Metrics m;
  m.set("g", {{"k", "a\"b\\c\nd"}}, 1);
  CHECK(m.exposition().find("g{k=\"a\\\"b\\\\c\\nd\"} 1\n") != std::string::npos);
  m.clear("g");
  CHECK(m.exposition().find("g{") == std::string::npos);
}

TEST_CASE("metrics: a name reused with another type is ignored, not fatal", "[metrics]") {
  Metrics m;
  m.inc("x");
  m.set("x", {}, 5);
  CHECK(m.value("x") == 1);
  CHECK(m.exposition().find("armhive_metrics_misuse_total 1") != std::string::npos);
}

TEST_CASE("metrics: concurrent increments are all counted", "[metrics]") {
  Metrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) m.inc("c", {{"t", "x"}});
    });
  }
  for (auto& t : threads) t.join();
  CHECK(m.value("c", {{"t", "x"}}) == 4000);
}

}  // namespace
}  // namespace armhive
