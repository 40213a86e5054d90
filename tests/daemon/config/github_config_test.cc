#include <catch2/catch.hpp>

#include "daemon/config/daemon_config.h"
#include "daemon/config/secret_files.h"

namespace armhive {
namespace {

const std::string kPools = R"(
[[pools]]
name = "ci"
image = "tiny"
)";

Result<DaemonConfig> with_github(const std::string& github) {
  return parse_daemon_config("[github]\n" + github + kPools);
}

TEST_CASE("github is read with its defaults, and its files are secret files", "[config]") {
  auto c = with_github(R"(
api_url = "https://ghe.example.com/api/v3"
org = "octo-org"
token_file = "/etc/armhive/github.token"
webhook_secret_file = "/etc/armhive/github-webhook.secret"
runner_command = ["/opt/runner/run.sh", "--once"]
idle_timeout = "2m"
reconcile_period = "90s"
[github.labels]
armhive-arm64 = "ci"
)");
  REQUIRE(c.is_ok());
  const GithubConfig& g = c->github;
  CHECK(g.enabled);
  CHECK(g.api_url == "https://ghe.example.com/api/v3");
  CHECK(g.org == "octo-org");
  CHECK(g.runner_group_id == 1);
  CHECK(g.idle_timeout == std::chrono::minutes(2));
  CHECK(g.replay_window == std::chrono::hours(24));
  CHECK(g.reconcile_period == std::chrono::seconds(90));
  CHECK(g.webhook_secret_overlap == std::chrono::minutes(10));
  CHECK(g.runner_command == std::vector<std::string>{"/opt/runner/run.sh", "--once"});
  CHECK(g.labels == std::map<std::string, std::string>{{"armhive-arm64", "ci"}});
  std::vector<std::string> secrets;
  for (const SecretFile& f : secret_files(*c)) secrets.push_back(f.path);
  CHECK(std::find(secrets.begin(), secrets.end(), "/etc/armhive/github.token") != secrets.end());
  CHECK(std::find(secrets.begin(), secrets.end(), "/etc/armhive/github-webhook.secret") !=
        secrets.end());
  CHECK_FALSE(parse_daemon_config(kPools)->github.enabled);
}

TEST_CASE("github errors name the key", "[config]") {
  const std::string files =
      "token_file = \"/t\"\nwebhook_secret_file = \"/s\"\n[github.labels]\nx = \"ci\"\n";
  struct Case {
    std::string text;
    const char* field;
  };
  const Case cases[] = {
      {files, "github.org"},                                    // neither org nor repo
      {"org = \"a\"\nrepo = \"a/b\"\n" + files, "github.org"},  // both
      {"org = \"a\"\nwebhook_secret_file = \"/s\"\n[github.labels]\nx = \"ci\"\n",
       "github.token_file"},
      {"org = \"a\"\ntoken_file = \"/t\"\n[github.labels]\nx = \"ci\"\n",
       "github.webhook_secret_file"},
      {"org = \"a\"\ntoken_file = \"/t\"\nwebhook_secret_file = \"/s\"\n", "github.labels"},
      {"org = \"a\"\nrunner_command = [\"run.sh\"]\n" + files, "github.runner_command"},
      {"org = \"a\"\nrunner_command = []\n" + files, "github.runner_command"},
      {"org = \"a\"\nidle_timeout = \"1s\"\n" + files, "github.idle_timeout"},
      {"org = \"a\"\nreconcile_period = \"5s\"\n" + files, "github.reconcile_period"},
      {"org = \"a\"\nreconcile_period = \"2h\"\n" + files, "github.reconcile_period"},
      {"org = \"a\"\nreconcile_period = \"often\"\n" + files, "github.reconcile_period"},
      {"org = \"a\"\nsecret = \"inline\"\n" + files, "github.secret"},
      {"org = \"a\"\nwebhook_secret_overlap = \"2h\"\n" + files, "github.webhook_secret_overlap"},
      {"org = \"a\"\nwebhook_secret_overlap = -1\n" + files, "github.webhook_secret_overlap"},
      {"org = \"a\"\ntoken_file = \"/t\"\nwebhook_secret_file = \"/s\"\n[github.labels]\n"
       "x = \"nope\"\n",
       "github.labels.x"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto r = with_github(c.text);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK(r.status().field() == c.field);
  }
  // No overlap at all is allowed (a leaked secret is refused at the reload).
  for (const std::string zero : {"\"0s\"", "0"}) {
    auto r = with_github("org = \"a\"\nwebhook_secret_overlap = " + zero + "\n" + files);
    REQUIRE(r.is_ok());
    CHECK(r->github.webhook_secret_overlap == std::chrono::milliseconds(0));
  }
}

TEST_CASE("github reconcile_repos lists the organisation's repositories pass 1 looks in",
          "[config][heal]") {
  const std::string files =
      "token_file = \"/t\"\nwebhook_secret_file = \"/s\"\n[github.labels]\nx = \"ci\"\n";
  auto none = with_github("org = \"octo-org\"\n" + files);
  REQUIRE(none.is_ok());
  CHECK(none->github.reconcile_repos.empty());
  // GitHub ignores case in owners: kept as written (the URL is GitHub's to compare).
  auto listed = with_github(
      "org = \"octo-org\"\nreconcile_repos = [\"octo-org/app\", \"Octo-Org/lib.js\", "
      "\"octo-org/my_repo-2\"]\n" +
      files);
  INFO(listed.status().to_string());
  REQUIRE(listed.is_ok());
  CHECK(listed->github.reconcile_repos ==
        std::vector<std::string>{"octo-org/app", "Octo-Org/lib.js", "octo-org/my_repo-2"});
  std::string twenty;
  for (int i = 0; i < 20; ++i)
    twenty += (i ? ", " : "") + ("\"octo-org/r" + std::to_string(i) + "\"");
  CHECK(with_github("org = \"octo-org\"\nreconcile_repos = [" + twenty + "]\n" + files).is_ok());

  struct Case {
    std::string repos;  // the array's entries
    const char* field;
    const char* says;  // part of the message
  };
  const Case cases[] = {
      {"\"other-org/app\"", "github.reconcile_repos[0]",
       "'other-org/app': the owner must be the organisation 'octo-org'"},
      {"\"octo-org/app\", \"octo-org-2/app\"", "github.reconcile_repos[1]",
       "'octo-org-2/app': the owner must be"},
      {"\"app\"", "github.reconcile_repos[0]", "'app' must be OWNER/NAME"},
      {"\"octo-org/\"", "github.reconcile_repos[0]", "'octo-org/': the repository name"},
      {"\"octo-org/a..b\"", "github.reconcile_repos[0]", "'octo-org/a..b': the repository name"},
      {"\"octo-org/..\"", "github.reconcile_repos[0]", "the repository name"},
      {"\"octo-org/a/b\"", "github.reconcile_repos[0]", "'octo-org/a/b': the repository name"},
      {"\"octo-org/a b\"", "github.reconcile_repos[0]", "the repository name"},
      {"\"octo-org/caf\u00e9\"", "github.reconcile_repos[0]", "the repository name"},
      {"\"octo-org/" + std::string(101, 'a') + "\"", "github.reconcile_repos[0]",
       "the repository name"},
      {"\"octo-org/app\", \"octo-org/lib\", \"Octo-Org/App\"", "github.reconcile_repos[2]",
       "'Octo-Org/App' is listed twice"},
      {twenty + ", \"octo-org/r20\"", "github.reconcile_repos", "got 21"},
      {"1", "github.reconcile_repos", "must be an array of strings"},
  };
  for (const Case& c : cases) {
    INFO(c.repos);
    auto r = with_github("org = \"octo-org\"\nreconcile_repos = [" + c.repos + "]\n" + files);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK(r.status().field() == c.field);
    CHECK_THAT(r.status().message(), Catch::Contains(c.says));
  }
  // A repository scope lists its own repository's jobs: the key is refused with it.
  auto with_repo =
      with_github("repo = \"octo-org/example\"\nreconcile_repos = [\"octo-org/app\"]\n" + files);
  REQUIRE_FALSE(with_repo.is_ok());
  CHECK(with_repo.status().field() == "github.reconcile_repos");
  CHECK_THAT(with_repo.status().message(), Catch::Contains("only with github.org"));
}

}  // namespace
}  // namespace armhive

namespace armhive {
namespace {

TEST_CASE("github authenticates as a GitHub App instead of with a token", "[config][app]") {
  const std::string rest = R"(org = "octo-org"
webhook_secret_file = "/etc/armhive/github-webhook.secret"
[github.labels]
armhive-arm64 = "ci"
[[pools]]
name = "ci"
image = "tiny"
)";
  auto c = parse_daemon_config(
      "[github]\napp_id = 4242\napp_private_key_file = \"/etc/armhive/app.pem\"\n"
      "installation_id = 77\n" +
      rest);
  INFO(c.status().to_string());
  REQUIRE(c.is_ok());
  CHECK(c->github.app_id == 4242);
  CHECK(c->github.installation_id == 77);
  bool key_is_secret = false;
  for (const auto& f : secret_files(*c)) key_is_secret |= f.path == "/etc/armhive/app.pem";
  CHECK(key_is_secret);

  auto both = parse_daemon_config(
      "[github]\ntoken_file = \"/t\"\napp_id = 1\n"
      "app_private_key_file = \"/k\"\ninstallation_id = 2\n" +
      rest);
  CHECK(both.status().field() == "github.token_file");
  auto partial =
      parse_daemon_config("[github]\napp_id = 1\napp_private_key_file = \"/k\"\n" + rest);
  CHECK(partial.status().field() == "github.installation_id");
}

}  // namespace
}  // namespace armhive
