#include "cli/table.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "base/validation.h"

namespace armhive {

void Table::print(std::ostream& out) const {
  std::vector<size_t> widths;
  for (const auto& r : rows_) {
    if (widths.size() < r.size()) widths.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) widths[i] = std::max(widths[i], r[i].size());
  }
  for (const auto& r : rows_) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(widths[i] - r[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

long long parse_rfc3339(const std::string& s) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<long long>(timegm(&tm));
}

std::string relative_time(const std::string& rfc3339) {
  long long t = parse_rfc3339(rfc3339);
  if (t < 0) return rfc3339;
  long long now = static_cast<long long>(std::time(nullptr));
  long long d = t - now;
  if (d >= 0) return "in " + (d == 0 ? std::string("0s") : format_duration(d));
  return format_duration(-d) + " ago";
}

}  // namespace armhive
