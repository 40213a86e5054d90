#include "cli/output.h"

#include <iostream>

#include "api/json.h"

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

}  // namespace armhive
