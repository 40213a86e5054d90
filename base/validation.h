#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/result.h"

namespace armhive {

// The input rules shared by the daemon's core, the API and the CLI: names, SSH keys, labels,
// durations. Every failure is kInvalidArgument naming `field`. Pure; any thread.

inline constexpr int64_t kMaxTtlSeconds = 30LL * 24 * 3600;  // 30 days: above is absurd

// "7200", "2h", "90m", "45s", "1d", "1h30m" -> seconds. Rejects signs, fractions, zero-length
// numbers and overflow; does not range-check (see check_ttl).
Result<int64_t> parse_duration(std::string_view field, std::string_view text);
// 1 s .. kMaxTtlSeconds (30 days).
Status check_ttl(std::string_view field, int64_t seconds);
// "2h", "1h30m", "45s" for people.
std::string format_duration(int64_t seconds);

// [a-z0-9-_.], 1..63 characters.
Status check_name(std::string_view field, std::string_view value);
// "<type> <base64> [comment]", one line, a known OpenSSH key type.
Status check_ssh_key(std::string_view field, std::string_view key);
// At most 32; keys are names, values <= 256 characters without control characters.
Status check_labels(std::string_view field, const std::map<std::string, std::string>& labels);

}  // namespace armhive
