#include "api/startup_json.h"

#include "base/json_reader.h"

namespace armhive {

using nlohmann::json;

bool valid_env_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxStartupEnvNameBytes) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (digit && i > 0))) return false;
  }
  return true;
}

namespace {

Status check_text(const std::string& field, const std::string& text, size_t max_bytes) {
  if (text.find('\0') != std::string::npos) return invalid_argument(field, "must not contain NUL");
  if (text.size() > max_bytes) {
    return invalid_argument(field, "must be at most " + std::to_string(max_bytes) + " bytes");
  }
  return Status::ok();
}

Status parse_env(const json& env, const std::string& field,
                 std::map<std::string, StartupEnvVar>& out) {
  if (!env.is_object()) {
    return invalid_argument(field, "must be an object of NAME: value or {value, secret}");
  }
  if (env.size() > kMaxStartupEnv) {
    return invalid_argument(field, "at most " + std::to_string(kMaxStartupEnv) + " variables");
  }
  for (const auto& [name, v] : env.items()) {
    const std::string f = field + "." + name;
    if (!valid_env_name(name)) {
      return invalid_argument(field, "variable names must match [A-Za-z_][A-Za-z0-9_]* (at most " +
                                         std::to_string(kMaxStartupEnvNameBytes) + " bytes)");
    }
    StartupEnvVar var;
    if (v.is_string()) {
      var.value = v.get<std::string>();
    } else if (v.is_object()) {
      JsonReader r(v, f);
      ARMHIVE_RETURN_IF_ERROR(r.only({"value", "secret"}));
      if (r.find("value") == nullptr) return r.missing("value");
      ARMHIVE_RETURN_IF_ERROR(r.str("value", var.value, true));
      ARMHIVE_RETURN_IF_ERROR(r.boolean("secret", var.secret));
    } else {
      return invalid_argument(f, "must be a string or {\"value\": string, \"secret\": bool}");
    }
    ARMHIVE_RETURN_IF_ERROR(
        check_text(var.secret ? f : f + ".value", var.value, kMaxStartupEnvValueBytes));
    out[name] = std::move(var);
  }
  return Status::ok();
}

}  // namespace

Result<StartupRequestDto> startup_request_from_json(const json& j, const std::string& prefix) {
  if (!j.is_object()) {
    return invalid_argument(prefix,
                            "must be an object: {\"argv\": [...], \"env\": {...}, "
                            "\"release_on_exit\": bool}");
  }
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.only({"argv", "env", "release_on_exit"}));
  StartupRequestDto out;
  const std::string argv_field = r.field("argv");
  const json* argv = r.find("argv");
  if (argv == nullptr) return r.missing("argv");
  if (!argv->is_array() || argv->empty()) {
    return invalid_argument(argv_field, "must be a non-empty array of strings (program first)");
  }
  if (argv->size() > kMaxStartupArgs) {
    return invalid_argument(argv_field,
                            "at most " + std::to_string(kMaxStartupArgs) + " arguments");
  }
  for (size_t i = 0; i < argv->size(); ++i) {
    const std::string f = argv_field + "[" + std::to_string(i) + "]";
    const json& a = (*argv)[i];
    if (!a.is_string()) return invalid_argument(f, "must be a string");
    std::string text = a.get<std::string>();
    if (text.empty()) return invalid_argument(f, "must not be empty");
    ARMHIVE_RETURN_IF_ERROR(check_text(f, text, kMaxStartupArgBytes));
    out.argv.push_back(std::move(text));
  }
  if (const json* env = r.find("env")) {
    ARMHIVE_RETURN_IF_ERROR(parse_env(*env, r.field("env"), out.env));
  }
  ARMHIVE_RETURN_IF_ERROR(r.boolean("release_on_exit", out.release_on_exit));
  return out;
}

json to_json(const StartupRequestDto& r) {
  json env = json::object();
  for (const auto& [name, v] : r.env) {
    env[name] = v.secret ? json{{"value", v.value}, {"secret", true}} : json(v.value);
  }
  return {{"argv", r.argv}, {"env", std::move(env)}, {"release_on_exit", r.release_on_exit}};
}

json to_json(const StartupStatusDto& s) {
  json j = {{"argv", s.argv},
            {"env", s.env},
            {"secret_env", s.secret_env},
            {"release_on_exit", s.release_on_exit},
            {"state", s.state},
            {"exit_code", s.exit_code ? json(*s.exit_code) : json(nullptr)},
            {"started_at", s.started_at ? json(*s.started_at) : json(nullptr)},
            {"ended_at", s.ended_at ? json(*s.ended_at) : json(nullptr)},
            {"detail", s.detail}};
  if (s.signal != 0) j["signal"] = s.signal;
  return j;
}

Status parse_startup_status(const json& j, const std::string& prefix, StartupStatusDto& out) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.str_list("argv", out.argv));
  ARMHIVE_RETURN_IF_ERROR(r.str_map("env", out.env));
  ARMHIVE_RETURN_IF_ERROR(r.str_list("secret_env", out.secret_env));
  ARMHIVE_RETURN_IF_ERROR(r.boolean("release_on_exit", out.release_on_exit));
  ARMHIVE_RETURN_IF_ERROR(r.str("state", out.state, true));
  const bool has_code = r.find("exit_code") != nullptr;  // null: not exited
  int code = 0;
  ARMHIVE_RETURN_IF_ERROR(r.integer("exit_code", code));
  if (has_code) out.exit_code = code;
  ARMHIVE_RETURN_IF_ERROR(r.integer("signal", out.signal));
  ARMHIVE_RETURN_IF_ERROR(r.opt_str("started_at", out.started_at));
  ARMHIVE_RETURN_IF_ERROR(r.opt_str("ended_at", out.ended_at));
  ARMHIVE_RETURN_IF_ERROR(r.str("detail", out.detail));
  return Status::ok();
}

}  // namespace armhive
