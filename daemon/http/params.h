#pragma once

#include <chrono>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"
#include "daemon/http/message.h"

namespace armhive {

// Typed query parameters and JSON replies for the handlers. Errors name the parameter.

// A positive integer ≤ max; `fallback` when absent.
Result<size_t> parse_size_param(const HttpRequest& req, const char* key, size_t fallback,
                                size_t max);
// "true"/"1"/"" or "false"/"0"; `fallback` when absent.
Result<bool> parse_bool_param(const HttpRequest& req, const char* key, bool fallback);
// "30s", "2m", "45" -> milliseconds.
Result<std::chrono::milliseconds> parse_timeout_param(const std::string& text);

void write_json(HttpResponse& res, int status, const nlohmann::json& j);
void write_text(HttpResponse& res, int status, std::string body, std::string content_type);

}  // namespace armhive
