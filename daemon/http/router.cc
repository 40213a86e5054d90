#include "daemon/http/router.h"

namespace armhive {
namespace {

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  if (path.empty() || path[0] != '/') return out;
  path.remove_prefix(1);
  for (;;) {
    size_t slash = path.find('/');
    out.emplace_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

bool is_capture(const std::string& segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

}  // namespace

void Router::add(Route route) {
  Entry e{std::move(route), {}};
  e.segments = split_path(e.route.pattern);
  entries_.push_back(std::move(e));
}

Router::Match Router::match(std::string_view method, std::string_view path) const {
  Match m;
  std::vector<std::string> segments = split_path(path);
  if (segments.empty()) return m;
  std::vector<std::string> allowed;
  for (const Entry& e : entries_) {
    if (e.segments.size() != segments.size()) continue;
    std::vector<std::string> params;
    bool ok = true;
    for (size_t i = 0; i < segments.size() && ok; ++i) {
      if (is_capture(e.segments[i])) {
        ok = !segments[i].empty();
        params.push_back(segments[i]);
      } else {
        ok = e.segments[i] == segments[i];
      }
    }
    if (!ok) continue;
    if (e.route.method == method) {
      m.route = &e.route;
      m.params = std::move(params);
      return m;
    }
    bool seen = false;
    for (const auto& a : allowed) seen = seen || a == e.route.method;
    if (!seen) allowed.push_back(e.route.method);
  }
  for (const auto& a : allowed) m.allow += (m.allow.empty() ? "" : ", ") + a;
  return m;
}

}  // namespace armhive
