#pragma once

#include <cstdint>
#include <string_view>

#include "base/result.h"

namespace armhive {

// Numbers read from untrusted text (guest output, tool output, sysfs) with the range they must
// fall in. The whole of `text` must be the number (no sign for the unsigned form, no spaces, no
// "nan"/"inf"); anything else, or a value outside [min, max], is kInvalidArgument naming `what`
// and quoting at most 32 characters of the text. Never throws. Pure; any thread.
Result<uint64_t> parse_bounded_uint(std::string_view text, uint64_t min, uint64_t max,
                                    std::string_view what);
Result<int64_t> parse_bounded_int(std::string_view text, int64_t min, int64_t max,
                                  std::string_view what);
Result<double> parse_bounded_double(std::string_view text, double min, double max,
                                    std::string_view what);

// A value already in hand (e.g. from JSON) that must be finite and within [min, max].
Status check_bounded(double value, double min, double max, std::string_view what);

}  // namespace armhive
