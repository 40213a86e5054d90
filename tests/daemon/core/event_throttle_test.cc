#include "daemon/core/event_throttle.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

const TimePoint kT0 = from_unix_ms(1'800'000'000'000);

TEST_CASE("event throttle: a flood from one source is a few events and one summary",
          "[core][throttle]") {
  EventThrottle t({/*per_source=*/5, /*per_kind=*/50, Seconds(60), /*max_sources=*/256});
  size_t admitted = 0;
  for (int i = 0; i < 1000; ++i) admitted += t.admit("http.refused", "192.0.2.1", kT0) ? 1 : 0;
  CHECK(admitted == 5);
  // Other kinds and other sources have budgets of their own.
  CHECK(t.admit("github.webhook_rejected", "192.0.2.1", kT0));
  CHECK(t.admit("http.refused", "192.0.2.2", kT0));
  // Nothing is due while the window runs; then one summary counts the rest.
  CHECK(t.due(kT0 + Seconds(59)).empty());
  REQUIRE(t.next_due() == kT0 + Seconds(60));
  auto due = t.due(kT0 + Seconds(60));
  REQUIRE(due.size() == 1);
  CHECK(due[0].kind == "http.refused");
  CHECK(due[0].suppressed == 995);
  CHECK(due[0].sources == 1);
  CHECK(due[0].text() ==
        "995 more http.refused from 1 source in 60 s (not recorded one by one): 192.0.2.1 995");
  // Handed out once; the next window starts afresh.
  CHECK(t.due(kT0 + Seconds(200)).empty());
  CHECK_FALSE(t.next_due().has_value());
  CHECK(t.admit("http.refused", "192.0.2.1", kT0 + Seconds(200)));
}

TEST_CASE("event throttle: many sources share the kind's budget and bounded memory",
          "[core][throttle]") {
  EventThrottle t({/*per_source=*/5, /*per_kind=*/50, Seconds(60), /*max_sources=*/8});
  size_t admitted = 0;
  for (int i = 0; i < 10000; ++i) {
    admitted += t.admit("forward.connection", "10.0.0." + std::to_string(i % 100), kT0) ? 1 : 0;
  }
  CHECK(admitted <= 50);
  auto due = t.due(kT0 + Seconds(61));
  REQUIRE(due.size() == 1);
  CHECK(due[0].suppressed == 10000 - admitted);
  // 8 sources told apart, the rest under "other sources".
  CHECK(due[0].sources == 9);
  CHECK(due[0].top_sources.size() == 5);
}

}  // namespace
}  // namespace armhive
