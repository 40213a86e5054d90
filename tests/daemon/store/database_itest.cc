#include <catch2/catch.hpp>
#include <filesystem>

#include "daemon/store/database.h"

namespace armhive {
namespace {

TEST_CASE("database migrations apply once and survive reopening", "[store]") {
  auto dir = std::filesystem::temp_directory_path() / "armhive-db-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string path = (dir / "a.db").string();
  std::vector<std::string> steps = {
      "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE); CREATE INDEX t_name ON t(name)",
      "ALTER TABLE t ADD COLUMN extra TEXT"};
  {
    auto db = Database::open(path);
    REQUIRE(db.is_ok());
    REQUIRE((*db)->migrate("test", steps).is_ok());
    REQUIRE((*db)
                ->execute("INSERT INTO t (name, extra) VALUES (?, ?)",
                          {std::string("a"), std::string("x")})
                .is_ok());
    // A unique violation is a conflict, not a crash; the failed transaction leaves nothing.
    Status s = (*db)->transaction([](Database::Tx& tx) {
      ARMHIVE_RETURN_IF_ERROR(tx.execute("INSERT INTO t (name) VALUES ('b')"));
      return tx.execute("INSERT INTO t (name) VALUES ('a')");
    });
    CHECK(s.code() == ErrorCode::kConflict);
  }
  auto db = Database::open(path);
  REQUIRE(db.is_ok());
  REQUIRE((*db)->migrate("test", steps).is_ok());  // already applied: no-op
  auto rows = (*db)->query("SELECT name, extra FROM t ORDER BY name");
  REQUIRE(rows.is_ok());
  REQUIRE(rows->size() == 1);
  CHECK(sql_text((*rows)[0][0]) == "a");
  CHECK(sql_text((*rows)[0][1]) == "x");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace armhive
