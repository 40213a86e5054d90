#include "daemon/config/config_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

namespace armhive {
namespace {

namespace fs = std::filesystem;

std::string located(std::string_view text) {
  auto c = parse_daemon_config(text);
  REQUIRE_FALSE(c.is_ok());
  return locate_config_error("armhived.toml", text, c.status());
}

TEST_CASE("check-config names the file, line and key of what is wrong", "[config][check]") {
  // A value out of range: its own line.
  CHECK(located("[server]\nport = 80\n\n[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n"
                "vcpus = 0\n") == "armhived.toml:7: pools[0].vcpus: must be between 1 and 256");
  // A key that is missing: the line of the table it belongs in.
  CHECK(located("[server]\nport = 80\n[[pools]]\nname = \"ci\"\n") ==
        "armhived.toml:3: pools[0].image: must not be empty");
  // The second pool, not the first.
  CHECK_THAT(located("[[pools]]\nname = \"a\"\nimage = \"tiny\"\n[[pools]]\nname = \"b\"\n"
                     "image = \"tiny\"\nmin_warm = 3\nmax = 2\n"),
             Catch::StartsWith("armhived.toml:7: pools[1].min_warm: "));
  // A key armhived does not know.
  CHECK_THAT(located("[engine]\nthreads = 2\nthread = 4\n[[pools]]\nname = \"a\"\n"
                     "image = \"tiny\"\n"),
             Catch::StartsWith("armhived.toml:3: engine.thread: "));
  // TOML that does not parse: line and column.
  CHECK_THAT(located("[server\nport = 1\n"), Catch::StartsWith("armhived.toml:1:8: "));
  // No pool at all: no line to give.
  CHECK(located("[server]\nport = 80\n") ==
        "armhived.toml: pools: configure at least one [[pools]] table");
}

TEST_CASE("the effective configuration parses back to itself", "[config][check]") {
  for (const char* name : {"armhived.toml", "armhived-honeycomb.toml", "armhived-thunderx.toml",
                           "armhived-lab.toml"}) {
    INFO(name);
    auto c = load_daemon_config(std::string(ARMHIVE_SOURCE_DIR) + "/examples/" + name);
    REQUIRE(c.is_ok());
    const std::string rendered = render_daemon_config(*c);
    auto again = parse_daemon_config(rendered);
    INFO(rendered);
    REQUIRE(again.is_ok());
    CHECK(render_daemon_config(*again) == rendered);
    // What it says is what armhived uses, defaults included.
    CHECK(again->pools.size() == c->pools.size());
    CHECK(again->hosts.size() == c->hosts.size());
    CHECK(again->pools.front().max_ttl == c->pools.front().max_ttl);
    CHECK(again->database_path() == c->database_path());
  }
  auto defaults = parse_daemon_config("[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n");
  REQUIRE(defaults.is_ok());
  const std::string text = render_daemon_config(*defaults);
  CHECK_THAT(text, Catch::Contains("reconcile_period = '30s'"));
  CHECK_THAT(text, Catch::Contains("state_dir = '/var/lib/armhive'"));
  CHECK_THAT(text, Catch::Contains("database = '/var/lib/armhive/armhive.db'"));
  CHECK_THAT(text, Catch::Contains("ssh_permissions = [ 'pty' ]"));

  // [github] reconcile_repos of an organisation, written out and read back; empty too.
  const std::string github =
      "[github]\norg = \"octo-org\"\ntoken_file = \"/t\"\nwebhook_secret_file = \"/s\"\n"
      "REPOS[github.labels]\narmhive-arm64 = \"ci\"\n[[pools]]\nname = \"ci\"\nimage = "
      "\"tiny\"\n";
  auto with = [&](const std::string& repos) {
    std::string t = github;
    t.replace(t.find("REPOS"), 5, repos);
    auto c = parse_daemon_config(t);
    REQUIRE(c.is_ok());
    return c.value();
  };
  const DaemonConfig listed = with("reconcile_repos = [\"octo-org/app\", \"octo-org/lib\"]\n");
  const std::string rendered = render_daemon_config(listed);
  CHECK_THAT(rendered, Catch::Contains("reconcile_repos = [ 'octo-org/app', 'octo-org/lib' ]"));
  auto back = parse_daemon_config(rendered);
  REQUIRE(back.is_ok());
  CHECK(back->github.reconcile_repos == listed.github.reconcile_repos);
  CHECK_THAT(render_daemon_config(with("")), Catch::Contains("reconcile_repos = []"));
  // And an entry that is wrong is located at its line.
  const std::string bad =
      "[github]\norg = \"octo-org\"\ntoken_file = \"/t\"\n"
      "webhook_secret_file = \"/s\"\nreconcile_repos = [\n  \"octo-org/app\",\n"
      "  \"other/lib\",\n]\n[github.labels]\narmhive-arm64 = \"ci\"\n"
      "[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n";
  CHECK_THAT(located(bad), Catch::StartsWith("armhived.toml:7: github.reconcile_repos[1]: "
                                             "'other/lib': the owner must be the organisation"));
}

TEST_CASE("check-config reports every file problem, each at its key", "[config][check]") {
  fs::path dir = fs::temp_directory_path() / ("armhive-check-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path token = dir / "admin.token";
  std::ofstream(token) << "ah_secret\n";
  ::chmod(token.c_str(), 0644);  // others may read it
  const fs::path config = dir / "armhived.toml";
  std::ofstream(config) << "[server]\nbootstrap_token_file = \"" << token.string() << "\"\n"
                        << "tls_cert = \"" << (dir / "no.crt").string() << "\"\n"
                        << "tls_key = \"" << (dir / "no.key").string() << "\"\n"
                        << "[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n";
  ConfigCheck check = check_daemon_config(config.string());
  CHECK(check.parsed);
  REQUIRE(check.problems.size() == 3);
  CHECK_THAT(check.problems[0], Catch::Contains(token.string()));
  CHECK_THAT(check.problems[0], Catch::Contains("chmod 600"));
  CHECK(check.problems[1] ==
        config.string() + ":3: server.tls_cert: cannot read " + (dir / "no.crt").string());
  CHECK(check.problems[2] ==
        config.string() + ":4: server.tls_key: cannot read " + (dir / "no.key").string());

  ConfigCheck missing = check_daemon_config((dir / "nope.toml").string());
  CHECK_FALSE(missing.parsed);
  REQUIRE(missing.problems.size() == 1);
  CHECK_THAT(missing.problems[0], Catch::StartsWith((dir / "nope.toml").string() + ": cannot"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace armhive

namespace armhive {
namespace {

TEST_CASE("a reload names the tables it cannot apply, not the pools", "[config][check]") {
  const std::string base = "[server]\nport = 8470\n[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n";
  auto running = parse_daemon_config(base);
  REQUIRE(running.is_ok());
  CHECK(changed_sections(*running, *running).empty());
  // Pools are the reload's own business; a default written out is no change.
  auto pools = parse_daemon_config(base +
                                   "min_warm = 1\n[[pools]]\nname = \"dev\"\nimage = "
                                   "\"tiny\"\n");
  REQUIRE(pools.is_ok());
  CHECK(changed_sections(*running, *pools).empty());
  auto same = parse_daemon_config(
      "[server]\nport = 8470\nbind = \"127.0.0.1\"\n[[pools]]\n"
      "name = \"ci\"\nimage = \"tiny\"\n");
  REQUIRE(same.is_ok());
  CHECK(changed_sections(*running, *same).empty());
  auto moved = parse_daemon_config(
      "[server]\nport = 9000\n[engine]\nthreads = 2\n[access]\n"
      "listen = \"0.0.0.0\"\n[[pools]]\nname = \"ci\"\n"
      "image = \"tiny\"\n");
  REQUIRE(moved.is_ok());
  // [access] and [github] are planned key by key (access_reload.h, github_reload.h).
  CHECK(changed_sections(*running, *moved) == std::vector<std::string>{"server", "engine"});
}

}  // namespace
}  // namespace armhive
