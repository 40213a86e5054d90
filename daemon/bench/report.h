#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "daemon/bench/benchmark_service.h"
#include "daemon/bench/host_sampler.h"
#include "daemon/bench/iperf3_parser.h"
#include "daemon/bench/stats.h"
#include "daemon/bench/zstd_parser.h"

namespace armhive {

// Report JSON (schema "armhive.bench.report/1", documented in README.md): the builders the
// runner uses, a consistency check, and the derived views (comparison, CSV, HTML).
// Pure functions; any thread.

inline constexpr const char* kReportSchema = "armhive.bench.report/1";

// One iperf3 run: "network.runs[i]". `direction` is "host-to-guest" (client sends) or
// "guest-to-host" (-R).
nlohmann::json network_run_json(const IperfResult& result, int mtu,
                                const std::optional<HostCpuUsage>& host_cpu,
                                const std::string& host_cpu_error);
nlohmann::json host_cpu_json(const HostCpuUsage& usage);
nlohmann::json spread_json(const SampleSpread& spread, const std::vector<double>& samples);
// Repeated zstd results of one thread count: "compression.guest[i]" /
// "compression.host.results[i]".
nlohmann::json zstd_series_json(int threads, const std::vector<ZstdBenchResult>& repeats);
nlohmann::json sensors_json(const std::vector<TempSensorReading>& readings);

// Checks what a user would check: positive throughput, per-interval stream sums equal the
// interval sum (within 0.5 % rounding), compressed size below the input, medians inside
// [min, max]. kInternal naming the first inconsistency.
Status check_benchmark_report(const nlohmann::json& report);

// One comparable figure of a run, e.g. key "network.guest-to-host.mtu1500.gbit_s".
struct BenchMetric {
  std::string key;
  std::string label;      // "guest→host Gbit/s (MTU 1500)"
  std::string unit;       // "Gbit/s", "MB/s", "x", "count"
  std::string suite;      // "network", "compression"
  std::string direction;  // network only
  int mtu = 0;            // network only
  int threads = 0;        // compression only
  double value = 0;       // the median for repeated figures
  std::optional<double> min, max, stddev, cv;
  bool higher_is_better = true;
};
std::vector<BenchMetric> extract_benchmark_metrics(const nlohmann::json& report);

// README.md "Comparison JSON": ratios are value / value of the first run (null when either is
// missing or the first is 0).
nlohmann::json compare_benchmark_runs(const std::vector<BenchmarkRun>& runs);

// RFC 4180 CSV, one row per (run, metric); cells that a spreadsheet would read as a formula
// are prefixed with a single quote.
std::string render_benchmark_csv(const std::vector<BenchmarkRun>& runs);

// Self-contained HTML: one run = its report, several = a comparison page.
std::string render_benchmark_html(const std::vector<BenchmarkRun>& runs);

}  // namespace armhive
