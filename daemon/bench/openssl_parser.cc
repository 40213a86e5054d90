#include "daemon/bench/openssl_parser.h"

#include <cmath>
#include <regex>
#include <set>

#include "base/bounded_number.h"

namespace armhive {
namespace {

constexpr double kMaxRate = 1e8;

// Rates are printed with one decimal and times with six: a time matches a rate when it is
// within the rounding of both.
bool time_matches_rate(double seconds, double rate) {
  double expected = 1.0 / rate;
  double rate_rounding = expected * (0.05 / rate);  // d(1/r) for a 0.05 error in r
  return std::fabs(seconds - expected) <= 0.5e-6 + rate_rounding + expected * 1e-3;
}

}  // namespace

Result<OpensslSpeedResult> parse_openssl_speed(std::string_view output) {
  if (output.size() > 1'000'000) return invalid_argument("crypto", "openssl output too long");
  std::string text(output);
  OpensslSpeedResult r;
  static const std::regex kVersion(R"((?:^|\n)version: (\d+\.\d+\.\d+[a-z]?)\s*(?:\n|$))");
  static const std::regex kChild(R"((?:^|\n)Forked child (\d+))");
  static const std::regex kHeader(R"((?:^|\n)\s+sign\s+verify\s+sign/s\s+verify/s[ \t]*\r?\n)");
  static const std::regex kRow(R"(^rsa\s+(\S+)\s+bits\s+(\S+)s\s+(\S+)s\s+(\S+)\s+(\S+)\s*$)");
  std::smatch m;
  if (std::regex_search(text, m, kVersion)) r.version = m[1];
  std::set<std::string> children;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kChild);
       it != std::sregex_iterator(); ++it) {
    children.insert((*it)[1]);
  }
  if (!children.empty()) r.processes = static_cast<int>(children.size());

  // The last table wins (a -multi run prints only the parent's).
  size_t table = std::string::npos;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kHeader);
       it != std::sregex_iterator(); ++it) {
    table = static_cast<size_t>(it->position() + it->length());
  }
  if (table == std::string::npos) {
    return invalid_argument("crypto",
                            "no RSA table in `openssl speed` output (truncated or failed run)");
  }
  std::set<int> seen;
  size_t pos = table;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("rsa ", 0) != 0) break;  // the table ends at the first other line
    std::smatch row;
    if (!std::regex_match(line, row, kRow)) {
      return invalid_argument("crypto", "malformed RSA row \"" + line.substr(0, 80) + "\"");
    }
    auto bits = parse_bounded_int(row[1].str(), 512, 16384, "RSA bits");
    std::string field = "crypto.rsa" + row[1].str().substr(0, 8);
    if (!bits.is_ok()) return invalid_argument("crypto", "RSA key size \"" + row[1].str() + "\"");
    if (!seen.insert(static_cast<int>(*bits)).second)
      return invalid_argument(field, "the table lists this key size twice");
    auto sign_s = parse_bounded_double(row[2].str(), 0, 1e4, "sign time");
    auto verify_s = parse_bounded_double(row[3].str(), 0, 1e4, "verify time");
    auto sign = parse_bounded_double(row[4].str(), 0, kMaxRate, "sign/s");
    auto verify = parse_bounded_double(row[5].str(), 0, kMaxRate, "verify/s");
    if (!sign_s.is_ok() || !verify_s.is_ok() || !sign.is_ok() || !verify.is_ok() || *sign <= 0 ||
        *verify <= 0) {
      return invalid_argument(
          field, "rates must be numbers in (0, 10^8] per second: \"" + line.substr(0, 80) + "\"");
    }
    if (!time_matches_rate(*sign_s, *sign) || !time_matches_rate(*verify_s, *verify)) {
      return invalid_argument(field,
                              "the times per operation are not the reciprocals of the rates: \"" +
                                  line.substr(0, 80) + "\"");
    }
    r.rsa.push_back({static_cast<int>(*bits), *sign, *verify});
  }
  if (r.rsa.empty()) {
    return invalid_argument("crypto", "the RSA table of `openssl speed` has no rows (truncated?)");
  }
  return r;
}

Result<std::string> parse_openssl_version(std::string_view output) {
  std::string text(output.substr(0, 4096));
  static const std::regex kTool(R"(^OpenSSL (\d+\.\d+\.\d+[a-z]?)\b)");
  static const std::regex kLibrary(R"(\(Library: OpenSSL (\d+\.\d+\.\d+[a-z]?)\b)");
  std::smatch tool, lib;
  if (!std::regex_search(text, tool, kTool)) {
    return invalid_argument("crypto", "no version in `openssl version` output");
  }
  if (std::regex_search(text, lib, kLibrary) && lib[1] != tool[1]) {
    return invalid_argument("crypto", "the openssl tool (" + tool[1].str() + ") and its library (" +
                                          lib[1].str() + ") differ");
  }
  return tool[1].str();
}

}  // namespace armhive
