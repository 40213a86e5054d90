#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive {

// Parsers of `openssl speed ... rsa2048 rsa4096` (OpenSSL 3.0 format, with or without
// `-multi N`) and `openssl version`. Pure, never throw; any thread.
//
// The table read is the one OpenSSL prints last:
//                     sign    verify    sign/s verify/s
//   rsa 2048 bits 0.000761s 0.000049s   1314.9  20528.6
// With -multi the rates are the children's sum. Each row is checked: bits in 512..16384,
// rates in (0, 10^8] per second, and the printed times must be the reciprocals of the rates
// (within rounding) — text that does not agree with itself is rejected. Errors are
// kInvalidArgument with field "crypto" (no table: truncated output) or "crypto.rsa<bits>".
struct OpensslRsaRow {
  int bits = 0;
  double sign_per_s = 0;
  double verify_per_s = 0;
};

struct OpensslSpeedResult {
  std::string version;  // "3.0.22" from the "version: " line; empty when absent
  int processes = 1;    // -multi children seen ("Forked child N"), 1 without -multi
  std::vector<OpensslRsaRow> rsa;
};
Result<OpensslSpeedResult> parse_openssl_speed(std::string_view output);

// "OpenSSL 3.0.22 25 Aug 2026 (Library: OpenSSL 3.0.22 25 Aug 2026)" -> "3.0.22". Refuses a
// command-line tool and library of different versions (their figures would not be the tool's).
Result<std::string> parse_openssl_version(std::string_view output);

}  // namespace armhive
