// PgDatabase against a real PostgreSQL (tests/support/postgres_server.h): what the stores'
// conformance cases cannot show — values of every type round-trip, placeholders inside quoted
// text stay text, a lost connection fails one call and the next reconnects, two armhived
// migrating one database at once apply each step once, and a body that went on past a failed
// statement commits nothing.
#include <catch2/catch.hpp>
#include <cstdint>
#include <thread>

#include "daemon/store/pg_database.h"
#include "tests/support/postgres_server.h"

namespace armhive {
namespace {

std::unique_ptr<PgDatabase> connect(const TestPostgresDatabase& t) {
  auto db = PgDatabase::connect(t.url());
  INFO(db.status().to_string());
  REQUIRE(db.is_ok());
  return std::move(*db);
}

TEST_CASE("postgresql: placeholders are numbered outside quoted text only", "[store][postgres]") {
  CHECK(PgDatabase::number_placeholders("SELECT ?, '?', \"a?\", ? WHERE x = 'it''s ?' AND y = ?") ==
        "SELECT $1, '?', \"a?\", $2 WHERE x = 'it''s ?' AND y = $3");
  CHECK(PgDatabase::number_placeholders("no parameters") == "no parameters");
}

TEST_CASE("postgresql: every value type round-trips and the result is typed by column",
          "[store][postgres]") {
  auto t = TestPostgresDatabase::make();
  INFO(t.status().to_string());
  REQUIRE(t.is_ok());
  auto db = connect(**t);
  REQUIRE(db->execute("CREATE TABLE v (i BIGINT, d DOUBLE PRECISION, s TEXT, n BIGINT)").is_ok());
  const std::string text = "quote ' double \" backslash \\ unicode \xc3\xa9 ? $1 ;";
  REQUIRE(db->execute("INSERT INTO v VALUES (?, ?, ?, ?)", {int64_t{INT64_MIN}, 0.1, text, nullptr})
              .is_ok());
  REQUIRE(db->execute("INSERT INTO v VALUES (?, ?, ?, ?)", {int64_t{INT64_MAX}, -2.5e300, "", 7})
              .is_ok());
  auto rows = db->query("SELECT i, d, s, n FROM v ORDER BY i");
  REQUIRE(rows.is_ok());
  REQUIRE(rows->size() == 2);
  CHECK(std::get<int64_t>((*rows)[0][0]) == INT64_MIN);
  CHECK(std::get<double>((*rows)[0][1]) == 0.1);
  CHECK(std::get<std::string>((*rows)[0][2]) == text);
  CHECK(sql_is_null((*rows)[0][3]));
  CHECK(std::get<int64_t>((*rows)[1][0]) == INT64_MAX);
  CHECK(std::get<double>((*rows)[1][1]) == -2.5e300);
  CHECK(std::get<int64_t>((*rows)[1][3]) == 7);
  // Aggregates: COUNT is bigint, SUM of bigint is numeric (read as an integer when whole).
  auto agg = db->query("SELECT COUNT(*), SUM(n), SUM(n) / 2.0, i > 0 FROM v GROUP BY i > 0");
  REQUIRE(agg.is_ok());
  REQUIRE_FALSE(agg->empty());
  CHECK(std::holds_alternative<int64_t>((*agg)[0][0]));
  CHECK(std::holds_alternative<int64_t>((*agg)[0][3]));  // a bool as 0 or 1
}

TEST_CASE("postgresql: a duplicate key is a conflict, bad SQL an internal error",
          "[store][postgres]") {
  auto t = TestPostgresDatabase::make();
  REQUIRE(t.is_ok());
  auto db = connect(**t);
  REQUIRE(db->execute("CREATE TABLE k (id TEXT PRIMARY KEY)").is_ok());
  REQUIRE(db->execute("INSERT INTO k VALUES (?)", {"a"}).is_ok());
  Status dup = db->execute("INSERT INTO k VALUES (?)", {"a"});
  CHECK(dup.code() == ErrorCode::kConflict);
  Status bad = db->execute("SELEC 1");
  CHECK(bad.code() == ErrorCode::kInternal);
  CHECK_THAT(bad.to_string(), Catch::Contains("SELEC"));
  // The connection is still good after both.
  CHECK(db->query("SELECT 1")->size() == 1);
}

TEST_CASE("postgresql: a body that goes on past a failed statement commits nothing",
          "[store][postgres]") {
  auto t = TestPostgresDatabase::make();
  REQUIRE(t.is_ok());
  auto db = connect(**t);
  REQUIRE(db->execute("CREATE TABLE k (id TEXT PRIMARY KEY)").is_ok());
  REQUIRE(db->execute("INSERT INTO k VALUES ('a')").is_ok());
  Status s = db->transaction([](Database::Tx& tx) -> Status {
    ARMHIVE_RETURN_IF_ERROR(tx.execute("INSERT INTO k VALUES ('b')"));
    (void)tx.execute("INSERT INTO k VALUES ('a')");  // refused; the body ignores it
    return Status::ok();
  });
  CHECK_FALSE(s.is_ok());
  auto rows = db->query("SELECT id FROM k ORDER BY id");
  REQUIRE(rows.is_ok());
  CHECK(rows->size() == 1);  // 'b' did not land
}

TEST_CASE("postgresql: a lost connection fails one call, the next one reconnects",
          "[store][postgres]") {
  auto t = TestPostgresDatabase::make();
  REQUIRE(t.is_ok());
  auto db = connect(**t);
  auto admin = connect(**t);
  REQUIRE(db->execute("CREATE TABLE k (id TEXT PRIMARY KEY)").is_ok());
  auto pid = db->query("SELECT pg_backend_pid()");
  REQUIRE(pid.is_ok());
  REQUIRE(admin->query("SELECT pg_terminate_backend(?::int)", {sql_int((*pid)[0][0])}).is_ok());
  Status lost = db->execute("INSERT INTO k VALUES ('a')");
  CHECK(lost.code() == ErrorCode::kUnavailable);
  REQUIRE(db->execute("INSERT INTO k VALUES ('b')").is_ok());
  auto rows = db->query("SELECT id FROM k");
  REQUIRE(rows.is_ok());
  CHECK(rows->size() == 1);
}

TEST_CASE("postgresql: two instances migrating one database at once apply each step once",
          "[store][postgres]") {
  auto t = TestPostgresDatabase::make();
  REQUIRE(t.is_ok());
  const std::vector<std::string> steps = {
      "CREATE TABLE m (n INTEGER PRIMARY KEY AUTOINCREMENT, v REAL NOT NULL)",
      "ALTER TABLE m ADD COLUMN w INTEGER NOT NULL DEFAULT 0", "INSERT INTO m (v) VALUES (1.5)"};
  auto a = connect(**t);
  auto b = connect(**t);
  Status sa;
  Status sb;
  std::thread ta([&] { sa = a->migrate("m", steps); });
  std::thread tb([&] { sb = b->migrate("m", steps); });
  ta.join();
  tb.join();
  INFO(sa.to_string() << " / " << sb.to_string());
  CHECK(sa.is_ok());
  CHECK(sb.is_ok());
  auto rows = a->query("SELECT n, v, w FROM m");
  REQUIRE(rows.is_ok());
  REQUIRE(rows->size() == 1);  // the insert step ran once
  CHECK(std::get<double>((*rows)[0][1]) == 1.5);
  CHECK(std::get<int64_t>((*rows)[0][2]) == 0);
  // A third instance knowing fewer steps is refused, naming the step it does not know.
  auto c = connect(**t);
  Status older = c->migrate("m", {steps[0], steps[1]});
  CHECK(older.code() == ErrorCode::kConflict);
  CHECK_THAT(older.to_string(), Catch::Contains("schema step 3"));
}

TEST_CASE("postgresql: a server that is not there and a malformed URL are clear errors",
          "[store][postgres]") {
  auto none = PgDatabase::connect("host=/nonexistent-armhive-socket-dir dbname=x user=armhive");
  REQUIRE_FALSE(none.is_ok());
  CHECK(none.status().code() == ErrorCode::kUnavailable);
  CHECK_THAT(none.status().to_string(), Catch::Contains("/nonexistent-armhive-socket-dir"));
  auto bad = PgDatabase::connect("postgresql://[::1");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(bad.status().to_string(), Catch::Contains("store.url"));
  // The password never appears in what names the server.
  auto secret =
      PgDatabase::connect("postgresql://armhive:hunter2@/x?host=/nonexistent-armhive-socket-dir");
  REQUIRE_FALSE(secret.is_ok());
  CHECK_THAT(secret.status().to_string(), !Catch::Contains("hunter2"));
}

}  // namespace
}  // namespace armhive
