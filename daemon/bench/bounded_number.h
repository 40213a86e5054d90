#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace armhive {

// Number parsing for the benchmark parsers, which must never throw and must reject what a
// tool cannot have meant: text that is not entirely one number (after surrounding blanks),
// NaN, infinities and values outside [lo, hi]. Pure; any thread.
std::optional<double> parse_bounded_double(std::string_view text, double lo, double hi);
std::optional<int64_t> parse_bounded_int(std::string_view text, int64_t lo, int64_t hi);

// A finite JSON-style number already parsed (e.g. by nlohmann) checked the same way.
bool finite_in_range(double v, double lo, double hi);

}  // namespace armhive
