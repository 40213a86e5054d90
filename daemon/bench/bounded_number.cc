#include "daemon/bench/bounded_number.h"

#include <charconv>
#include <cmath>

namespace armhive {
namespace {

std::string_view strip(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

bool finite_in_range(double v, double lo, double hi) {
  return std::isfinite(v) && v >= lo && v <= hi;
}

std::optional<double> parse_bounded_double(std::string_view text, double lo, double hi) {
  text = strip(text);
  if (text.empty() || text.size() > 64) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v,
                                   std::chars_format::fixed | std::chars_format::scientific);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (!finite_in_range(v, lo, hi)) return std::nullopt;
  return v;
}

std::optional<int64_t> parse_bounded_int(std::string_view text, int64_t lo, int64_t hi) {
  text = strip(text);
  if (text.empty() || text.size() > 24) return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
    return std::nullopt;
  return v;
}

}  // namespace armhive
