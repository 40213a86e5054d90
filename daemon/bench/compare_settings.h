#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/bench/benchmark_service.h"

namespace armhive {

// `armhive bench compare` across hosts and boards: the settings of the runs side by side, which
// of them differ, and which differences make the figures incomparable (a different corpus or
// a different version of a measuring tool: zstd throughput moves by up to 17 % between
// versions). Pure; any thread.
struct SettingLine {
  std::string name;                 // "zstd version"
  std::vector<std::string> values;  // one per run, "–" when the run lacks it
  bool differs = false;             // the runs that have it do not all agree
  bool blocking = false;            // differs and is a corpus or tool version
};

std::vector<SettingLine> line_up_settings(const std::vector<BenchmarkRun>& runs);

// For the comparison JSON: "settings": [{"name", "values", "differs", "blocking"}] and
// "incomparable": ["zstd version: 1.5.4 vs 1.5.5", ...] (empty when the figures compare).
nlohmann::json settings_json(const std::vector<SettingLine>& lines);
nlohmann::json incomparable_json(const std::vector<SettingLine>& lines);

}  // namespace armhive
