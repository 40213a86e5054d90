#include "base/csv.h"

namespace armhive {

std::string csv_field(std::string_view value) {
  std::string s(value);
  if (!s.empty() &&
      (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r')) {
    // A leading sign on a plain number is harmless; anything else could be a formula.
    bool numeric = s.size() > 1 && s.find_first_not_of("0123456789.eE+-") == std::string::npos;
    if (!numeric) s = "'" + s;
  }
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ',';
    out += csv_field(fields[i]);
  }
  return out + "\r\n";
}

}  // namespace armhive
