#include "base/bounded_number.h"

#include <charconv>
#include <cmath>
#include <string>

namespace armhive {
namespace {

std::string quoted(std::string_view text) {
  std::string s(text.substr(0, 32));
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  return "\"" + s + (text.size() > 32 ? "...\"" : "\"");
}

Status not_a_number(std::string_view text, std::string_view what, const char* kind) {
  return invalid_argument(std::string(what),
                          std::string(what) + ": " + quoted(text) + " is not " + kind);
}

template <typename T>
Status out_of_range(T value, T min, T max, std::string_view what) {
  auto text = [](T v) {
    if constexpr (std::is_floating_point_v<T>) {
      char buf[64];
      auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 6);
      return std::string(buf, r.ptr);
    } else {
      return std::to_string(v);
    }
  };
  return invalid_argument(std::string(what), std::string(what) + " " + text(value) +
                                                 " is outside the plausible range " + text(min) +
                                                 ".." + text(max));
}

template <typename T>
Result<T> parse_integer(std::string_view text, T min, T max, std::string_view what) {
  T v{};
  const char* end = text.data() + text.size();
  auto r = std::from_chars(text.data(), end, v);
  if (text.empty() || r.ptr != end) return not_a_number(text, what, "an integer");
  if (r.ec == std::errc::result_out_of_range) {
    return invalid_argument(std::string(what),
                            std::string(what) + " " + quoted(text) + " is too large");
  }
  if (r.ec != std::errc()) return not_a_number(text, what, "an integer");
  if (v < min || v > max) return out_of_range(v, min, max, what);
  return v;
}

}  // namespace

Result<uint64_t> parse_bounded_uint(std::string_view text, uint64_t min, uint64_t max,
                                    std::string_view what) {
  return parse_integer<uint64_t>(text, min, max, what);
}

Result<int64_t> parse_bounded_int(std::string_view text, int64_t min, int64_t max,
                                  std::string_view what) {
  return parse_integer<int64_t>(text, min, max, what);
}

Result<double> parse_bounded_double(std::string_view text, double min, double max,
                                    std::string_view what) {
  // from_chars accepts "nan", "inf" and hex forms only as numbers: allow plain decimals only.
  bool digit = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      digit = true;
    } else if (c != '.' && c != '-' && c != '+' && c != 'e' && c != 'E') {
      return not_a_number(text, what, "a decimal number");
    }
  }
  if (!digit) return not_a_number(text, what, "a decimal number");
  double v = 0;
  const char* end = text.data() + text.size();
  auto r = std::from_chars(text.data(), end, v, std::chars_format::general);
  if (r.ptr != end || (r.ec != std::errc() && r.ec != std::errc::result_out_of_range)) {
    return not_a_number(text, what, "a decimal number");
  }
  if (r.ec == std::errc::result_out_of_range) {
    return invalid_argument(std::string(what),
                            std::string(what) + " " + quoted(text) + " is out of range");
  }
  ARMHIVE_RETURN_IF_ERROR(check_bounded(v, min, max, what));
  return v;
}

Status check_bounded(double value, double min, double max, std::string_view what) {
  if (std::isnan(value)) return invalid_argument(std::string(what), std::string(what) + " is NaN");
  if (!std::isfinite(value)) {
    return invalid_argument(std::string(what), std::string(what) + " is infinite");
  }
  if (value < min || value > max) return out_of_range(value, min, max, what);
  return Status::ok();
}

}  // namespace armhive
