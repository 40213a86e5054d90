#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/thread_annotations.h"
#include "daemon/core/clock.h"

namespace armhive {

// How much of what strangers cause is recorded one by one. The defaults keep a flood from one
// address to 5 rows a minute per kind, and from everyone together to 50, plus one summary row.
struct EventThrottleOptions {
  size_t per_source = 5;  // events recorded per (kind, source) per window
  size_t per_kind = 50;   // events recorded per kind per window, all sources together
  Seconds window{60};
  // Sources told apart per kind and window; the suppressed events of any more are counted under
  // "other sources" (a flood from many addresses costs no more memory than from 256).
  size_t max_sources = 256;
};

// The events of one kind a window did not record one by one.
struct ThrottleSummary {
  std::string kind;
  uint64_t suppressed = 0;
  TimePoint window_start;
  Seconds window{0};
  // The sources with the most suppressed events, most first (at most 5), and how many there were.
  std::vector<std::pair<std::string, uint64_t>> top_sources;
  size_t sources = 0;

  // "1995 more http.refused from 1 source in 60 s (not recorded one by one): 127.0.0.1 1995"
  std::string text() const;
};

// Rate limits what unauthenticated parties can make armhived record (audit rows, events, log
// lines): refusals on public routes, badly signed webhooks, connections to a forward port.
// Per kind, a window opens with the kind's first event; in it the first `per_source` events of
// each source (and at most `per_kind` of all) are admitted, the rest counted. When the window
// has ended, due() hands out one summary per kind that suppressed anything. Memory is bounded
// by the kinds (fixed strings of the callers) times max_sources.
//
// Pure logic: times come from the caller (tests move them). Threading: thread-safe.
class EventThrottle {
 public:
  explicit EventThrottle(EventThrottleOptions options = {}) : options_(options) {}

  // Whether this event is recorded one by one. False: it is counted for its window's summary.
  bool admit(std::string_view kind, std::string_view source, TimePoint now) EXCLUDES(mu_);
  // The summaries of the windows that have ended by `now` (each handed out once), oldest first.
  std::vector<ThrottleSummary> due(TimePoint now) EXCLUDES(mu_);
  // When the next summary comes due; nullopt when no window has suppressed anything.
  std::optional<TimePoint> next_due() const EXCLUDES(mu_);

 private:
  struct Window {
    TimePoint start;
    size_t admitted = 0;
    std::map<std::string, size_t, std::less<>> admitted_by_source;
    std::map<std::string, uint64_t, std::less<>> suppressed_by_source;
    uint64_t suppressed = 0;
  };
  void close(const std::string& kind, Window& w) REQUIRES(mu_);

  const EventThrottleOptions options_;
  mutable Mutex mu_;
  std::map<std::string, Window, std::less<>> windows_ GUARDED_BY(mu_);
  std::vector<ThrottleSummary> closed_ GUARDED_BY(mu_);
};

}  // namespace armhive
