#include "base/json_reader.h"

#include <cstdint>

namespace armhive {

using nlohmann::json;

std::string join_field(std::string_view prefix, std::string_view key) {
  if (prefix.empty()) return std::string(key);
  return std::string(prefix) + "." + std::string(key);
}

Status JsonReader::require_object() const {
  if (!j_.is_object()) {
    return invalid_argument(prefix_.empty() ? "body" : prefix_, "must be a JSON object");
  }
  return Status::ok();
}

Status JsonReader::only(std::initializer_list<std::string_view> allowed) const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    bool known = false;
    for (auto a : allowed) known = known || a == it.key();
    if (!known) {
      std::string allowed_list;
      for (auto a : allowed) allowed_list += (allowed_list.empty() ? "" : ", ") + std::string(a);
      return invalid_argument(field(it.key()), "unknown field (allowed: " + allowed_list + ")");
    }
  }
  return Status::ok();
}

const json* JsonReader::find(std::string_view key) const {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return nullptr;
  return &*it;
}

Status JsonReader::missing(std::string_view key) const {
  return invalid_argument(field(key), "is required");
}

Status JsonReader::str(std::string_view key, std::string& out, bool required) const {
  const json* v = find(key);
  if (v == nullptr) return required ? missing(key) : Status::ok();
  if (!v->is_string()) return invalid_argument(field(key), "must be a string");
  out = v->get<std::string>();
  return Status::ok();
}

Status JsonReader::opt_str(std::string_view key, std::optional<std::string>& out) const {
  const json* v = find(key);
  if (v == nullptr) {
    out.reset();
    return Status::ok();
  }
  if (!v->is_string()) return invalid_argument(field(key), "must be a string");
  out = v->get<std::string>();
  return Status::ok();
}

Status JsonReader::number(std::string_view key, double& out) const {
  const json* v = find(key);
  if (v == nullptr) return Status::ok();
  if (!v->is_number()) return invalid_argument(field(key), "must be a number");
  out = v->get<double>();
  return Status::ok();
}

Status JsonReader::boolean(std::string_view key, bool& out) const {
  const json* v = find(key);
  if (v == nullptr) return Status::ok();
  if (!v->is_boolean()) return invalid_argument(field(key), "must be true or false");
  out = v->get<bool>();
  return Status::ok();
}

Status JsonReader::str_list(std::string_view key, std::vector<std::string>& out) const {
  const json* v = find(key);
  if (v == nullptr) return Status::ok();
  if (!v->is_array()) return invalid_argument(field(key), "must be an array of strings");
  out.clear();
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_string()) {
      return invalid_argument(field(key) + "[" + std::to_string(i) + "]", "must be a string");
    }
    out.push_back(e.get<std::string>());
  }
  return Status::ok();
}

Status JsonReader::int_list(std::string_view key, std::vector<int>& out) const {
  const json* v = find(key);
  if (v == nullptr) return Status::ok();
  if (!v->is_array()) return invalid_argument(field(key), "must be an array of integers");
  out.clear();
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    const std::string item = field(key) + "[" + std::to_string(i) + "]";
    if (!e.is_number_integer()) return invalid_argument(item, "must be an integer");
    // Through int64_t/uint64_t so that a large value is refused instead of wrapped.
    if (e.is_number_unsigned() ? e.get<uint64_t>() > uint64_t{INT32_MAX}
                               : (e.get<int64_t>() < INT32_MIN || e.get<int64_t>() > INT32_MAX)) {
      return invalid_argument(item, "is out of range");
    }
    out.push_back(static_cast<int>(e.get<int64_t>()));
  }
  return Status::ok();
}

Status JsonReader::str_map(std::string_view key, std::map<std::string, std::string>& out) const {
  const json* v = find(key);
  if (v == nullptr) return Status::ok();
  if (!v->is_object()) return invalid_argument(field(key), "must be an object of string values");
  out.clear();
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it.value().is_string()) {
      return invalid_argument(field(key) + "." + it.key(), "must be a string");
    }
    out[it.key()] = it.value().get<std::string>();
  }
  return Status::ok();
}

}  // namespace armhive
