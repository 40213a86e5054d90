#pragma once

#include <cstddef>
#include <string_view>

#include "base/status.h"

namespace armhive {

// The deepest nesting of arrays and objects armhived accepts in any JSON it parses from
// outside: API request bodies, qemu-guest-agent replies, GitHub webhooks and REST replies, the
// guest's benchmark reports. The deepest document any legitimate producer sends is about 8
// levels (a GitHub workflow_job webhook; iperf3 -J and fio reports 5 or 6), so 64 leaves 8x
// headroom while bounding what nesting costs: nlohmann's DOM, dump() and comparisons recurse
// once per level, and 60,000 levels inside a 64 KiB body used to cost seconds and gigabytes
// (issue 33 finding 1).
inline constexpr size_t kMaxJsonDepth = 64;

// Checks the nesting depth of `text` without parsing it: one pass, no allocation, so it runs
// before any parser sees the text. kInvalidArgument on `field` ("nests arrays and objects
// deeper than the limit of 64 levels (at byte N)") when an array or object opens at depth
// max_depth + 1.
//
// Strings are skipped as JSON's grammar skips them (a backslash escapes the next byte), so
// brackets inside strings do not count. On malformed text the count is an upper bound of the
// depth any parser reaches before its first syntax error, which is what the check bounds.
// Pure; any thread.
Status check_json_depth(std::string_view text, std::string_view field,
                        size_t max_depth = kMaxJsonDepth);

}  // namespace armhive
