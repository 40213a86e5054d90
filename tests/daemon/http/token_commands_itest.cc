#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "daemon/http/token_commands.h"
#include "daemon/store/database.h"
#include "daemon/store/token_store.h"

namespace armhive {
namespace {

struct Run {
  int code;
  std::string out;
  std::string err;
};

Run token(Database& db, std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = run_token_command(args, db, out, err);
  return {code, out.str(), err.str()};
}

TEST_CASE("token commands: create prints the secret once, list and revoke", "[http][tokens]") {
  auto db = Database::open(":memory:");
  REQUIRE(db.is_ok());
  Run created =
      token(**db, {"create", "gitlab", "--role", "ci", "--max-leases", "3", "--max-ttl", "4h"});
  INFO(created.err);
  REQUIRE(created.code == 0);
  std::string secret = created.out.substr(0, created.out.find('\n'));
  CHECK(looks_like_token(secret));
  CHECK(created.out == secret + "\n");  // nothing else on stdout
  CHECK(created.err.find("only time") != std::string::npos);

  SystemClock clock;
  auto store = TokenStore::open(**db, clock);
  REQUIRE(store.is_ok());
  auto who = (*store)->authenticate(secret);
  REQUIRE(who.is_ok());
  CHECK(who->role == TokenRole::kCi);
  CHECK(who->max_leases == 3);
  CHECK(who->max_ttl == Seconds(4 * 3600));

  Run listed = token(**db, {"list"});
  CHECK(listed.code == 0);
  CHECK(listed.out.find("gitlab") != std::string::npos);
  CHECK(listed.out.find("4h") != std::string::npos);
  CHECK(listed.out.find(secret) == std::string::npos);
  Run as_json = token(**db, {"list", "--json"});
  auto j = nlohmann::json::parse(as_json.out);
  REQUIRE(j.size() == 1);
  CHECK(j[0]["name"] == "gitlab");
  CHECK(j[0]["revoked_at"].is_null());

  CHECK(token(**db, {"create", "gitlab"}).code == 2);
  CHECK(token(**db, {"revoke", "gitlab"}).code == 0);
  CHECK((*store)->authenticate(secret).status().code() == ErrorCode::kUnauthenticated);
  CHECK(token(**db, {"revoke", "nobody"}).code == 2);
  auto after = nlohmann::json::parse(token(**db, {"list", "--json"}).out);
  CHECK(after[0]["revoked_at"].is_string());
}

TEST_CASE("token commands: usage errors say what to fix", "[http][tokens]") {
  auto db = Database::open(":memory:");
  REQUIRE(db.is_ok());
  Run none = token(**db, {});
  CHECK(none.code == 1);
  CHECK(none.err.find("usage:") != std::string::npos);
  Run role = token(**db, {"create", "x", "--role", "root"});
  CHECK(role.code == 1);
  CHECK(role.err.find("--role must be admin, ci, dev or read") != std::string::npos);
  CHECK(token(**db, {"create", "x", "--max-ttl", "soon"}).code == 1);
  CHECK(token(**db, {"create", "x", "--max-leases", "-3"}).code == 1);
  CHECK(token(**db, {"create"}).code == 1);
  CHECK(token(**db, {"create", "Bad Name"}).code == 1);
  CHECK(token(**db, {"frobnicate"}).code == 1);
}

TEST_CASE("token commands: a bootstrap admin token from a file", "[http][tokens]") {
  auto db = Database::open(":memory:");
  REQUIRE(db.is_ok());
  SystemClock clock;
  auto store = TokenStore::open(**db, clock);
  REQUIRE(store.is_ok());
  auto dir = std::filesystem::temp_directory_path() /
             ("armhive-bootstrap-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string secret = "ah_" + std::string(40, 'Q');
  std::ofstream(dir / "admin.token") << "  " << secret << "  \n# comment\n";
  auto read = read_token_file((dir / "admin.token").string());
  REQUIRE(read.is_ok());
  CHECK(*read == secret);
  REQUIRE(install_bootstrap_token(**store, *read).is_ok());
  auto who = (*store)->authenticate(secret);
  REQUIRE(who.is_ok());
  CHECK(who->name == "bootstrap-admin");
  CHECK(who->role == TokenRole::kAdmin);
  CHECK(install_bootstrap_token(**store, "password").code() == ErrorCode::kInvalidArgument);
  CHECK(read_token_file((dir / "missing").string()).status().code() == ErrorCode::kUnavailable);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace armhive
