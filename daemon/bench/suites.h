#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/process_runner.h"
#include "daemon/bench/benchmark_runner.h"
#include "daemon/bench/benchmark_service.h"
#include "daemon/bench/lease_target.h"
#include "daemon/core/hypervisor.h"

namespace armhive {

// The two benchmark suites as blocking functions, run by BenchmarkRunner on its worker thread.
// They never leave a guest process behind: every path after starting the iperf3 server issues
// the stop commands (read the pidfile, kill, remove it) and restores a changed MTU.
struct SuiteContext {
  GuestAgent& agent;  // guest commands (exec)
  ProcessRunner& processes;
  const BenchmarkRunnerOptions& options;
  const LeaseTarget& target;
  std::string run_id;
  std::function<bool()> cancelled;  // true once the daemon is shutting down
};

// Fills `out` with the "network" report object as far as it got; returns why it stopped early.
Status run_network_suite(const SuiteContext& ctx, const NetworkOptions& opts, nlohmann::json& out);
// Fills `out` with the "compression" report object as far as it got.
Status run_compression_suite(const SuiteContext& ctx, const CompressionOptions& opts,
                             nlohmann::json& out);

}  // namespace armhive
