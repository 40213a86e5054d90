#include "cli/output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "api/json.h"
#include "base/validation.h"

namespace armhive {

int exit_code_for(const Status& s) {
  switch (s.code()) {
    case ErrorCode::kOk:
      return kExitOk;
    case ErrorCode::kTimeout:
      return kExitTimeout;
    case ErrorCode::kInternal:
    case ErrorCode::kUnavailable:
      return kExitServer;
    default:
      return kExitApi;
  }
}

int report(const Status& s) {
  std::cerr << "armhive: " << s.message();
  if (!s.field().empty() && s.message().find(s.field()) == std::string::npos) {
    std::cerr << " (field " << s.field() << ")";
  }
  std::cerr << "\n";
  switch (s.code()) {
    case ErrorCode::kUnauthenticated:
      std::cerr << "hint: give a token with --token, ARMHIVE_TOKEN or `token = \"ah_...\"` in "
                   "~/.config/armhive/config.toml (an admin creates one with `armhived token "
                   "create NAME --role ci`)\n";
      break;
    case ErrorCode::kPermissionDenied:
      std::cerr << "hint: this token's role does not allow it; use a ci or dev token\n";
      break;
    case ErrorCode::kNotFound:
      std::cerr << "hint: `armhive lease ls` lists your leases, `armhive pools` the pools\n";
      break;
    default:
      break;
  }
  return exit_code_for(s);
}

int usage_error(const Status& s) {
  std::cerr << "armhive: " << s.message();
  if (!s.field().empty() && s.message().find(s.field()) == std::string::npos) {
    std::cerr << " (" << s.field() << ")";
  }
  std::cerr << "\n";
  return kExitUsage;
}

void print_json(const nlohmann::json& j) { std::cout << dump_json(j, 2) << "\n"; }

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string labels_text(const std::map<std::string, std::string>& labels) {
  std::string out;
  for (const auto& [k, v] : labels) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out.empty() ? "-" : out;
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

std::string bytes_text(int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(std::max<int64_t>(bytes, 0)) + " B";
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  return buf;
}

std::string seconds_text(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  if (seconds < 60) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", seconds);
    return buf;
  }
  return format_duration(static_cast<int64_t>(std::llround(seconds)));
}

std::string cpus_text(double cpu_seconds, double wall_seconds) {
  if (!(wall_seconds > 0)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", cpu_seconds / wall_seconds);
  return buf;
}

}  // namespace armhive
