#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace armhive {

// A value bound to a statement or read from a row, the same for every Database (SQLite and
// PostgreSQL): NULL, a 64-bit integer, a double or text.
using SqlValue = std::variant<std::nullptr_t, int64_t, double, std::string>;
using SqlRow = std::vector<SqlValue>;

// Typed access to a column of a row; aborts on a type mismatch (schema invariant). NULL reads
// as 0 or "".
int64_t sql_int(const SqlValue& v);
double sql_double(const SqlValue& v);
const std::string& sql_text(const SqlValue& v);
bool sql_is_null(const SqlValue& v);

}  // namespace armhive
