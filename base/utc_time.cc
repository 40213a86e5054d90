#include "base/utc_time.h"

#include <ctime>

namespace armhive {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {

// `n` digits at `pos` as a number, or -1 when they are not all digits.
int digits(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) return -1;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

bool leap_year(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int days_in_month(int y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap_year(y) ? 29 : kDays[m - 1];
}

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant's algorithm).
int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// The index of `s[pos..pos+3)` in `names` (3-letter names), or -1.
template <size_t N>
int name_index(std::string_view s, size_t pos, const char* const (&names)[N]) {
  if (pos + 3 > s.size()) return -1;
  for (size_t i = 0; i < N; ++i) {
    if (s.substr(pos, 3) == names[i]) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

Result<int64_t> parse_imf_fixdate(std::string_view field, std::string_view text) {
  static constexpr const char* kDays[] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  auto bad = [&] {
    return invalid_argument(std::string(field),
                            "must be an HTTP date such as Sun, 06 Nov 1994 08:49:37 GMT (got \"" +
                                std::string(text.substr(0, 40)) + "\")");
  };
  // "Sun, 06 Nov 1994 08:49:37 GMT": 29 characters at fixed places.
  if (text.size() != 29) return bad();
  const int weekday = name_index(text, 0, kDays);  // 0: Thursday, as 1970-01-01 was
  const int month = name_index(text, 8, kMonths) + 1;
  const int day = digits(text, 5, 2), year = digits(text, 12, 4);
  const int hour = digits(text, 17, 2), minute = digits(text, 20, 2), second = digits(text, 23, 2);
  if (weekday < 0 || month < 1 || text.substr(3, 2) != ", " || text[7] != ' ' || text[11] != ' ' ||
      text[16] != ' ' || text[19] != ':' || text[22] != ':' || text.substr(25) != " GMT" ||
      year < 1900 || day < 1 || day > days_in_month(year, month) || hour < 0 || hour > 23 ||
      minute < 0 || minute > 59 || second < 0 || second > 60) {
    return bad();
  }
  const int64_t days = days_from_civil(year, month, day);
  if (((days % 7) + 7) % 7 != weekday) return bad();
  return days * 86400 + hour * 3600 + minute * 60 + (second == 60 ? 59 : second);
}

Result<int64_t> parse_rfc3339_ms(std::string_view field, std::string_view text) {
  auto bad = [&] {
    return invalid_argument(std::string(field),
                            "must be an RFC 3339 time such as 2026-12-01T08:00:00Z (got \"" +
                                std::string(text.substr(0, 40)) + "\")");
  };
  // YYYY-MM-DDTHH:MM:SS is 19 characters.
  if (text.size() < 20 || text.size() > 64) return bad();
  int year = digits(text, 0, 4), month = digits(text, 5, 2), day = digits(text, 8, 2);
  int hour = digits(text, 11, 2), minute = digits(text, 14, 2), second = digits(text, 17, 2);
  if (year < 1 || month < 1 || month > 12 || day < 1 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't') || text[13] != ':' || text[16] != ':' || hour < 0 ||
      hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 60) {
    return bad();
  }
  if (day > days_in_month(year, month)) return bad();
  if (second == 60) second = 59;
  size_t pos = 19;
  int64_t millis = 0;
  if (text[pos] == '.') {
    size_t first = ++pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (pos - first < 3) millis = millis * 10 + (text[pos] - '0');
      ++pos;
    }
    if (pos == first) return bad();
    for (size_t n = pos - first; n < 3; ++n) millis *= 10;
  }
  int64_t offset_min = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int oh = digits(text, pos + 1, 2), om = digits(text, pos + 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59 || pos + 3 >= text.size() || text[pos + 3] != ':') {
      return bad();
    }
    offset_min = (text[pos] == '+' ? 1 : -1) * (oh * 60 + om);
    pos += 6;
  } else {
    return bad();
  }
  if (pos != text.size()) return bad();
  int64_t secs = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second -
                 offset_min * 60;
  return secs * 1000 + millis;
}

}  // namespace armhive
