#include "base/toml_reader.h"

#include "base/validation.h"

namespace armhive {

Result<toml::table> parse_toml(std::string_view text, std::string_view field,
                               std::string_view source) {
  try {
    return toml::parse(text);
  } catch (const toml::parse_error& e) {
    return invalid_argument(
        std::string(field),
        std::string(source) + ": line " + std::to_string(e.source().begin.line) + ", column " +
            std::to_string(e.source().begin.column) + ": " + std::string(e.description()));
  }
}

const toml::node* TomlReader::get(std::string_view key) {
  seen_.insert(std::string(key));
  return table_.get(key);
}

Status TomlReader::str(std::string_view key, std::string& out) {
  const toml::node* n = get(key);
  if (!n) return Status::ok();
  if (!n->is_string()) return invalid_argument(field(key), "must be a string");
  out = n->as_string()->get();
  return Status::ok();
}

Status TomlReader::opt_str(std::string_view key, std::optional<std::string>& out) {
  const toml::node* n = get(key);
  if (!n) return Status::ok();
  if (!n->is_string()) return invalid_argument(field(key), "must be a string");
  out = n->as_string()->get();
  return Status::ok();
}

Status TomlReader::integer(std::string_view key, int64_t& out, int64_t min, int64_t max) {
  const toml::node* n = get(key);
  if (!n) return Status::ok();
  if (!n->is_integer()) return invalid_argument(field(key), "must be an integer");
  int64_t v = n->as_integer()->get();
  if (v < min || v > max) {
    return invalid_argument(
        field(key), "must be between " + std::to_string(min) + " and " + std::to_string(max));
  }
  out = v;
  return Status::ok();
}

Status TomlReader::non_negative(std::string_view key, uint64_t& out) {
  const toml::node* n = get(key);
  if (!n) return Status::ok();
  if (!n->is_integer() || n->as_integer()->get() < 0) {
    return invalid_argument(field(key), "must be a non-negative integer");
  }
  out = static_cast<uint64_t>(n->as_integer()->get());
  return Status::ok();
}

Status TomlReader::number(std::string_view key, double& out, double min, double max) {
  const toml::node* n = get(key);
  if (!n) return Status::ok();
  if (!n->is_number()) return invalid_argument(field(key), "must be a number");
  double v =
      n->is_integer() ? static_cast<double>(n->as_integer()->get()) : n->as_floating_point()->get();
  if (v < min || v > max) {
    return invalid_argument(
        field(key), "must be between " + std::to_string(min) + " and " + std::to_string(max));
  }
  out = v;
  return Status::ok();
}

Status TomlReader::boolean(std::string_view key, bool& out) {
  const toml::node* n = get(key);
  if (!n) return Status::ok();
  if (!n->is_boolean()) return invalid_argument(field(key), "must be true or false");
  out = n->as_boolean()->get();
  return Status::ok();
}

Status TomlReader::duration(std::string_view key, std::chrono::milliseconds& out) {
  const toml::node* n = get(key);
  if (!n) return Status::ok();
  int64_t secs = 0;
  if (n->is_integer()) {
    secs = n->as_integer()->get();
  } else if (n->is_string()) {
    auto parsed = parse_duration(field(key), n->as_string()->get());
    if (!parsed.is_ok()) return parsed.status();
    secs = *parsed;
  } else {
    return invalid_argument(field(key), "must be a duration such as \"2h\" or seconds");
  }
  if (secs <= 0) return invalid_argument(field(key), "must be positive");
  // Ten years is beyond any period or timeout armhive has; larger values would also overflow
  // the milliseconds they are kept in.
  constexpr int64_t kMaxSeconds = int64_t{10} * 366 * 24 * 3600;
  if (secs > kMaxSeconds) return invalid_argument(field(key), "must be at most 10 years");
  out = std::chrono::seconds(secs);
  return Status::ok();
}

Status TomlReader::strings(std::string_view key, std::vector<std::string>& out) {
  const toml::node* n = get(key);
  if (!n) return Status::ok();
  const toml::array* arr = n->as_array();
  if (arr == nullptr) return invalid_argument(field(key), "must be an array of strings");
  for (const auto& e : *arr) {
    if (!e.is_string()) return invalid_argument(field(key), "must be an array of strings");
    out.push_back(e.as_string()->get());
  }
  return Status::ok();
}

Status TomlReader::labels(std::string_view key, std::map<std::string, std::string>& out) {
  const toml::node* n = get(key);
  if (!n) return Status::ok();
  if (!n->is_table()) return invalid_argument(field(key), "must be a table of strings");
  for (const auto& [k, v] : *n->as_table()) {
    if (!v.is_string()) {
      return invalid_argument(field(key) + "." + std::string(k.str()), "must be a string");
    }
    out[std::string(k.str())] = v.as_string()->get();
  }
  return check_labels(field(key), out);
}

const toml::table* TomlReader::table(std::string_view key, Status& status) {
  const toml::node* n = get(key);
  if (!n) return nullptr;
  if (!n->is_table()) status = invalid_argument(field(key), "must be a table");
  return n->as_table();
}

Status TomlReader::no_unknown_keys() const {
  for (const auto& [k, v] : table_) {
    if (!seen_.count(std::string(k.str()))) {
      return invalid_argument(prefix_ + std::string(k.str()), "unknown key");
    }
  }
  return Status::ok();
}

Status TomlReader::only(const std::set<std::string_view>& known) const {
  for (const auto& [k, v] : table_) {
    if (!known.contains(k.str())) {
      return invalid_argument(prefix_ + std::string(k.str()), "unknown key");
    }
  }
  return Status::ok();
}

}  // namespace armhive
