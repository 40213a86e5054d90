#pragma once

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "daemon/bench/benchmark_service.h"
#include "daemon/bench/suites.h"

namespace armhive {

// The memory, crypto and storage suites (README.md "What a run does"), blocking, on the
// runner's worker thread. Each fills `out` with its report object as far as it got (figures in
// suite_figures.h form, settings and tool versions, the host baseline or why there is none)
// and returns why it stopped early. None leaves anything behind in the guest: the storage
// suite removes its test file on every path.
Status run_memory_suite(const SuiteContext& ctx, const MemoryOptions& opts, nlohmann::json& out);
Status run_crypto_suite(const SuiteContext& ctx, const CryptoOptions& opts, nlohmann::json& out);
Status run_storage_suite(const SuiteContext& ctx, const StorageOptions& opts, nlohmann::json& out);

}  // namespace armhive
