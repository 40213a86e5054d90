#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

namespace armhive {

// Prints a benchmark report (schema armhive.bench.report/1, see daemon/bench/README.md) for
// people: one table per suite with the headline figures (Gbit/s per direction and MTU, zstd
// medians with their spread), the versions and corpus that make figures comparable, and the
// EMULATED warning. Missing parts are skipped, never printed as zero. `--json` has the rest.
void print_bench_summary(const nlohmann::json& report, std::ostream& out);

// `armhive bench compare`: the runs' settings side by side ("Comparison JSON" "settings"), a
// "*" after those that differ and "!" after those that make the runs incomparable.
void print_compare_settings(const nlohmann::json& comparison, std::ostream& out);

// Why the compared runs must not be compared (their corpora or tool versions differ) and how
// to override it; empty when they may be compared.
std::string incomparable_message(const nlohmann::json& comparison);

}  // namespace armhive
