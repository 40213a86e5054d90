#include "daemon/store/sql_value.h"

#include <cstdio>
#include <cstdlib>

namespace armhive {
namespace {

[[noreturn]] void schema_abort(const char* want) {
  std::fprintf(stderr, "armhive: database column is not %s\n", want);
  std::abort();
}

}  // namespace

int64_t sql_int(const SqlValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (std::holds_alternative<std::nullptr_t>(v)) return 0;
  schema_abort("an integer");
}
double sql_double(const SqlValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (std::holds_alternative<std::nullptr_t>(v)) return 0;
  schema_abort("a number");
}
const std::string& sql_text(const SqlValue& v) {
  static const std::string kEmpty;
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (std::holds_alternative<std::nullptr_t>(v)) return kEmpty;
  schema_abort("text");
}
bool sql_is_null(const SqlValue& v) { return std::holds_alternative<std::nullptr_t>(v); }

}  // namespace armhive
