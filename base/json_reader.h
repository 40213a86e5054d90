#pragma once

#include <initializer_list>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive {

// "prefix.key", or "key" at the top level: the field path carried from validation to the user.
std::string join_field(std::string_view prefix, std::string_view key);

// Typed member access to one JSON object with field paths in errors (kInvalidArgument naming
// "prefix.key", "key[i]"): the one JSON reader of API bodies and benchmark requests. Null
// members count as absent; absent members leave `out` as it is unless `required`. Borrows the
// JSON value; any thread.
class JsonReader {
 public:
  JsonReader(const nlohmann::json& j, std::string prefix) : j_(j), prefix_(std::move(prefix)) {}

  Status require_object() const;
  // kInvalidArgument naming the first member not in `allowed`.
  Status only(std::initializer_list<std::string_view> allowed) const;
  std::string field(std::string_view key) const { return join_field(prefix_, key); }
  const nlohmann::json* find(std::string_view key) const;
  Status missing(std::string_view key) const;

  Status str(std::string_view key, std::string& out, bool required = false) const;
  Status opt_str(std::string_view key, std::optional<std::string>& out) const;
  // Any integer type; out-of-range values are refused, never wrapped.
  template <typename T>
  Status integer(std::string_view key, T& out, bool required = false) const;
  Status number(std::string_view key, double& out) const;
  Status boolean(std::string_view key, bool& out) const;
  Status str_list(std::string_view key, std::vector<std::string>& out) const;
  Status int_list(std::string_view key, std::vector<int>& out) const;
  Status str_map(std::string_view key, std::map<std::string, std::string>& out) const;
  // Iterates an array member of objects, calling parse(element, "key[i]", item).
  template <typename T, typename F>
  Status objects(std::string_view key, std::vector<T>& out, F parse) const;

 private:
  const nlohmann::json& j_;
  std::string prefix_;
};

template <typename T>
Status JsonReader::integer(std::string_view key, T& out, bool required) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return required ? missing(key) : Status::ok();
  if (!v->is_number_integer()) return invalid_argument(field(key), "must be an integer");
  if (v->is_number_unsigned()) {
    auto u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      return invalid_argument(field(key), "is too large");
    }
    out = static_cast<T>(u);
    return Status::ok();
  }
  auto i = v->get<int64_t>();
  if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      (i > 0 && static_cast<uint64_t>(i) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
    return invalid_argument(field(key), "is out of range");
  }
  out = static_cast<T>(i);
  return Status::ok();
}

template <typename T, typename F>
Status JsonReader::objects(std::string_view key, std::vector<T>& out, F parse) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return Status::ok();
  if (!v->is_array()) return invalid_argument(field(key), "must be an array");
  out.clear();
  for (size_t i = 0; i < v->size(); ++i) {
    T item;
    ARMHIVE_RETURN_IF_ERROR(parse((*v)[i], field(key) + "[" + std::to_string(i) + "]", item));
    out.push_back(std::move(item));
  }
  return Status::ok();
}

}  // namespace armhive
