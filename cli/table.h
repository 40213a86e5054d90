#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace armhive {

// A plain-text table for people: a header row and left-aligned columns two spaces apart.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// "in 59m", "3m ago" relative to now, for an RFC 3339 time; the input itself when unparsable.
std::string relative_time(const std::string& rfc3339);
// Seconds since the epoch of an RFC 3339 UTC time ("...Z"); -1 when unparsable.
long long parse_rfc3339(const std::string& s);

}  // namespace armhive
