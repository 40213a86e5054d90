#include "daemon/http/params.h"

#include "api/json.h"
#include "base/validation.h"

namespace armhive {

Result<size_t> parse_size_param(const HttpRequest& req, const char* key, size_t fallback,
                                size_t max) {
  if (!req.has_param(key)) return fallback;
  std::string v = req.param(key);
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) {
    return invalid_argument(key, "must be a positive integer");
  }
  size_t n = std::stoul(v);  // at most 9 digits: cannot throw
  if (n == 0) return invalid_argument(key, "must be a positive integer");
  if (n > max) return invalid_argument(key, "must be at most " + std::to_string(max));
  return n;
}

Result<bool> parse_bool_param(const HttpRequest& req, const char* key, bool fallback) {
  if (!req.has_param(key)) return fallback;
  std::string v = req.param(key);
  if (v == "true" || v == "1" || v.empty()) return true;
  if (v == "false" || v == "0") return false;
  return invalid_argument(key, "must be true or false");
}

Result<std::chrono::milliseconds> parse_timeout_param(const std::string& text) {
  ARMHIVE_ASSIGN_OR_RETURN(int64_t s, parse_duration("timeout", text));
  return std::chrono::milliseconds(s * 1000);
}

void write_json(HttpResponse& res, int status, const nlohmann::json& j) {
  res.status = status;
  res.content_type = "application/json";
  res.body = dump_json(j);
}

void write_text(HttpResponse& res, int status, std::string body, std::string content_type) {
  res.status = status;
  res.content_type = std::move(content_type);
  res.body = std::move(body);
}

}  // namespace armhive
