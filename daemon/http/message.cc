#include "daemon/http/message.h"

#include <strings.h>

#include <cctype>

namespace armhive {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

std::string percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (plus_is_space && s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 &&
               hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

void parse_target(std::string_view target, HttpRequest& request) {
  size_t q = target.find('?');
  request.path = percent_decode(target.substr(0, q), /*plus_is_space=*/false);
  request.query.clear();
  if (q == std::string_view::npos) return;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view piece = query.substr(0, amp);
    if (!piece.empty()) {
      size_t eq = piece.find('=');
      request.query.emplace_back(percent_decode(piece.substr(0, eq), true),
                                 eq == std::string_view::npos
                                     ? std::string()
                                     : percent_decode(piece.substr(eq + 1), true));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
}

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) return v;
  }
  return {};
}

bool HttpRequest::has_param(std::string_view name) const {
  for (const auto& [k, v] : query) {
    if (k == name) return true;
  }
  return false;
}

std::string HttpRequest::param(std::string_view name) const {
  for (const auto& [k, v] : query) {
    if (k == name) return v;
  }
  return {};
}

std::vector<std::string> HttpRequest::params(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : query) {
    if (k == name) out.push_back(v);
  }
  return out;
}

}  // namespace armhive
