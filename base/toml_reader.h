#pragma once

#include <toml++/toml.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive {

// Reads typed values from one TOML table with field paths in errors (kInvalidArgument naming
// prefix + key, e.g. "pools[0].vcpus"; give prefixes with their trailing dot): the one TOML
// reader of the daemon's configuration and the image recipes. Absent keys leave `out` as it
// is. It remembers the keys it was asked for, so no_unknown_keys() can refuse the rest.
// Borrows the table; one thread at a time.
// Parses TOML text; a syntax error is kInvalidArgument on `field` saying
// "<source>: line L, column C: <what>" so the user can open the file at the spot.
[[nodiscard]] Result<toml::table> parse_toml(std::string_view text, std::string_view field,
                                             std::string_view source);

class TomlReader {
 public:
  TomlReader(const toml::table& table, std::string prefix)
      : table_(table), prefix_(std::move(prefix)) {}

  std::string field(std::string_view key) const { return prefix_ + std::string(key); }

  Status str(std::string_view key, std::string& out);
  Status opt_str(std::string_view key, std::optional<std::string>& out);
  Status integer(std::string_view key, int64_t& out, int64_t min, int64_t max);
  template <typename T>
  Status integer_as(std::string_view key, T& out, int64_t min, int64_t max) {
    int64_t v = static_cast<int64_t>(out);
    ARMHIVE_RETURN_IF_ERROR(integer(key, v, min, max));
    out = static_cast<T>(v);
    return Status::ok();
  }
  // An integer >= 0 ("must be a non-negative integer").
  Status non_negative(std::string_view key, uint64_t& out);
  Status number(std::string_view key, double& out, double min, double max);
  Status boolean(std::string_view key, bool& out);
  // Durations are strings ("2h", "90m", base/validation.h) or integers (seconds), > 0.
  Status duration(std::string_view key, std::chrono::milliseconds& out);
  Status strings(std::string_view key, std::vector<std::string>& out);
  // A table of strings, checked as labels (base/validation.h check_labels).
  Status labels(std::string_view key, std::map<std::string, std::string>& out);
  // The sub-table at key (nullptr when absent; then `status` is set if it is not a table).
  const toml::table* table(std::string_view key, Status& status);
  void skip(std::string_view key) { seen_.insert(std::string(key)); }

  // "unknown key" naming the first key none of the calls above asked for.
  Status no_unknown_keys() const;
  // "unknown key" naming the first key not in `known` (for tables read by hand).
  Status only(const std::set<std::string_view>& known) const;

 private:
  const toml::node* get(std::string_view key);

  const toml::table& table_;
  std::string prefix_;
  std::set<std::string> seen_;
};

}  // namespace armhive
