// The audit log's retention and its queue for what strangers cause (issue 33 finding 3).
#include <catch2/catch.hpp>
#include <chrono>

#include "base/metrics.h"
#include "daemon/store/audit_log.h"
#include "tests/support/manual_clock.h"
#include "tests/support/store_backends.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

size_t rows_of(AuditLog& audit, std::string_view action = {}) {
  auto rows = audit.recent(100000);
  REQUIRE(rows.is_ok());
  size_t n = 0;
  for (const auto& e : *rows) n += action.empty() || e.action == action ? 1 : 0;
  return n;
}

TEST_CASE("audit log: rows older than keep are pruned, newer ones stay", "[store][audit]") {
  ManualClock clock;
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  AuditOptions options;
  options.keep = std::chrono::hours(90 * 24);
  auto audit = AuditLog::open(**db, clock, options);
  REQUIRE(audit.is_ok());
  AuditLog& log = **audit;
  REQUIRE(log.record("ci", "lease.create", "l-old").is_ok());
  clock.advance(std::chrono::hours(24 * 10));
  REQUIRE(log.record("ci", "lease.create", "l-newer").is_ok());
  // 89 days after the first row: nothing is old enough.
  clock.advance(std::chrono::hours(24 * 79));
  CHECK(*log.prune() == 0);
  CHECK(rows_of(log) == 2);
  // 91 days after it: the first row goes, the one 81 days old stays.
  clock.advance(std::chrono::hours(24 * 2));
  CHECK(*log.prune() == 1);
  auto rows = log.recent(10);
  REQUIRE(rows.is_ok());
  REQUIRE(rows->size() == 1);
  CHECK((*rows)[0].lease_id == "l-newer");
}

TEST_CASE("audit log: the writer thread prunes at start, off the caller's thread",
          "[store][audit]") {
  ManualClock clock;
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  auto audit = AuditLog::open(**db, clock, {});
  REQUIRE(audit.is_ok());
  REQUIRE((*audit)->record("ci", "lease.create", "l-old").is_ok());
  clock.advance(std::chrono::hours(24 * 91));
  (*audit)->start();
  // The writer's first pass prunes; stop() joins it.
  (*audit)->stop();
  CHECK(rows_of(**audit) == 0);
}

TEST_CASE("audit log: strangers' entries are throttled per source and summarised",
          "[store][audit]") {
  ManualClock clock;
  Metrics metrics;
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  auto audit = AuditLog::open(**db, clock, {}, &metrics);
  REQUIRE(audit.is_ok());
  AuditLog& log = **audit;
  size_t admitted = 0;
  for (int i = 0; i < 1000; ++i) {
    admitted += log.record_stranger("anonymous", "http.refused", "192.0.2.7", "", "413") ? 1 : 0;
  }
  CHECK(admitted == 5);
  // Queued, not written, until the writer (or a flush) takes them.
  CHECK(rows_of(log) == 0);
  REQUIRE(log.flush().is_ok());
  CHECK(rows_of(log, "http.refused") == 5);
  clock.advance(61s);
  REQUIRE(log.flush().is_ok());
  auto rows = log.recent(1);
  REQUIRE(rows.is_ok());
  CHECK((*rows)[0].actor == "armhived");
  CHECK((*rows)[0].action == "http.refused");
  CHECK_THAT((*rows)[0].detail, Catch::StartsWith("995 more http.refused from 1 source"));
  CHECK_THAT(metrics.exposition(),
             Catch::Contains("armhive_audit_suppressed_total{action=\"http.refused\"} 995"));
}

TEST_CASE("audit log: a full queue drops its oldest entries, counts them and says so",
          "[store][audit]") {
  ManualClock clock;
  Metrics metrics;
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  AuditOptions options;
  options.queue_capacity = 10;
  options.strangers.per_source = 1000;
  options.strangers.per_kind = 1000;
  auto audit = AuditLog::open(**db, clock, options, &metrics);
  REQUIRE(audit.is_ok());
  AuditLog& log = **audit;
  for (int i = 0; i < 25; ++i) {
    CHECK(log.record_stranger("anonymous", "http.refused", "192.0.2.7", "", std::to_string(i)));
  }
  REQUIRE(log.flush().is_ok());
  CHECK(rows_of(log, "http.refused") == 10);
  auto newest = log.recent(2);
  REQUIRE(newest.is_ok());
  CHECK((*newest)[0].action == "audit.dropped");
  CHECK_THAT((*newest)[0].detail, Catch::StartsWith("15 audit entries"));
  CHECK((*newest)[1].detail == "24");  // the newest kept, the oldest dropped
  CHECK_THAT(metrics.exposition(), Catch::Contains("armhive_audit_dropped_total 15"));
}

}  // namespace
}  // namespace armhive
