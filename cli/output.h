#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace armhive {

// What every command prints and returns: the stable exit codes, error reports with hints, JSON
// and the small text helpers of the human output. Tables are table.h, progress progress.h.
// Main thread only (they write std::cout / std::cerr).

// Exit codes (stable, for scripts); see main.cc.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;
inline constexpr int kExitApi = 2;
inline constexpr int kExitServer = 3;
inline constexpr int kExitTimeout = 4;

int exit_code_for(const Status& s);

// Prints an API or connection failure and what to do about it; returns its exit code.
int report(const Status& s);
// Prints a bad flag or argument (the field named); returns kExitUsage.
int usage_error(const Status& s);

// Indented JSON on stdout (--json).
void print_json(const nlohmann::json& j);

std::string join(const std::vector<std::string>& v, const std::string& sep);
// "k=v,k2=v2", or "-" when empty.
std::string labels_text(const std::map<std::string, std::string>& labels);
std::string or_dash(const std::string& s);
// "512 B", "1.5 KiB", "200.0 MiB", "1.0 GiB" (binary units).
std::string bytes_text(int64_t bytes);
// "12.3 s" under a minute, else format_duration's "1h30m".
std::string seconds_text(double seconds);
// The average CPUs busy over the wall time ("1.20"), "-" without wall time.
std::string cpus_text(double cpu_seconds, double wall_seconds);

}  // namespace armhive
