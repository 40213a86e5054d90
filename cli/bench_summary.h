#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

namespace armhive {

// Prints a benchmark report (schema armhive.bench.report/1, see daemon/bench/README.md) for
// people: one table per suite with the headline figures (Gbit/s per direction and MTU, zstd
// medians with their spread), the versions and corpus that make figures comparable, and the
// EMULATED warning. Missing parts are skipped, never printed as zero. `--json` has the rest.
void print_bench_summary(const nlohmann::json& report, std::ostream& out);

}  // namespace armhive
