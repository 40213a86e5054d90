#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace armhive {

// CSV (RFC 4180) for reports people open in spreadsheets: the benchmark report and the usage
// report. Pure; any thread.

// One field as written: a value that would start a spreadsheet formula ('=', '+', '-', '@',
// tab or CR first, unless it is a plain number such as "-1.5") gets a leading "'" so that it
// stays text; a field holding ',', '"', CR or LF is quoted with its quotes doubled. Values are
// data from clients (labels, names), so both always apply.
std::string csv_field(std::string_view value);

// The fields, each through csv_field(), joined by ',' and ended by CRLF.
std::string csv_line(const std::vector<std::string>& fields);

}  // namespace armhive
