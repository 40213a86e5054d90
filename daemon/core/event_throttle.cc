#include "daemon/core/event_throttle.h"

#include <algorithm>

namespace armhive {
namespace {

constexpr std::string_view kOtherSources = "other sources";
constexpr size_t kTopSources = 5;

}  // namespace

std::string ThrottleSummary::text() const {
  std::string out = std::to_string(suppressed) + " more " + kind + " from " +
                    std::to_string(sources) + (sources == 1 ? " source" : " sources") + " in " +
                    std::to_string(window.count()) + " s (not recorded one by one):";
  for (size_t i = 0; i < top_sources.size(); ++i) {
    out +=
        (i == 0 ? " " : ", ") + top_sources[i].first + " " + std::to_string(top_sources[i].second);
  }
  if (sources > top_sources.size()) out += ", ...";
  return out;
}

bool EventThrottle::admit(std::string_view kind, std::string_view source, TimePoint now) {
  MutexLock lock(mu_);
  auto it = windows_.find(kind);
  if (it != windows_.end() && now >= it->second.start + options_.window) {
    close(it->first, it->second);
    windows_.erase(it);
    it = windows_.end();
  }
  if (it == windows_.end()) it = windows_.emplace(std::string(kind), Window{now}).first;
  Window& w = it->second;
  auto by_source = w.admitted_by_source.find(source);
  const size_t from_source = by_source == w.admitted_by_source.end() ? 0 : by_source->second;
  const bool room_for_source =
      by_source != w.admitted_by_source.end() || w.admitted_by_source.size() < options_.max_sources;
  if (w.admitted < options_.per_kind && from_source < options_.per_source && room_for_source) {
    ++w.admitted;
    ++w.admitted_by_source[std::string(source)];
    return true;
  }
  ++w.suppressed;
  auto counted = w.suppressed_by_source.find(source);
  if (counted != w.suppressed_by_source.end()) {
    ++counted->second;
  } else if (w.suppressed_by_source.size() < options_.max_sources) {
    w.suppressed_by_source.emplace(std::string(source), 1);
  } else {
    ++w.suppressed_by_source[std::string(kOtherSources)];
  }
  return false;
}

void EventThrottle::close(const std::string& kind, Window& w) {
  if (w.suppressed == 0) return;
  ThrottleSummary s;
  s.kind = kind;
  s.suppressed = w.suppressed;
  s.window_start = w.start;
  s.window = options_.window;
  s.sources = w.suppressed_by_source.size();
  std::vector<std::pair<std::string, uint64_t>> all(w.suppressed_by_source.begin(),
                                                    w.suppressed_by_source.end());
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  all.resize(std::min(all.size(), kTopSources));
  s.top_sources = std::move(all);
  closed_.push_back(std::move(s));
}

std::vector<ThrottleSummary> EventThrottle::due(TimePoint now) {
  MutexLock lock(mu_);
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (now >= it->second.start + options_.window) {
      close(it->first, it->second);
      it = windows_.erase(it);
    } else {
      ++it;
    }
  }
  std::vector<ThrottleSummary> out;
  out.swap(closed_);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.window_start < b.window_start; });
  return out;
}

std::optional<TimePoint> EventThrottle::next_due() const {
  MutexLock lock(mu_);
  std::optional<TimePoint> next;
  if (!closed_.empty()) next = closed_.front().window_start;  // due already
  for (const auto& [kind, w] : windows_) {
    if (w.suppressed == 0) continue;
    TimePoint end = w.start + options_.window;
    if (!next || end < *next) next = end;
  }
  return next;
}

}  // namespace armhive
