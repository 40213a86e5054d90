#include "daemon/config/github_reload.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

using namespace std::chrono_literals;

GithubConfig running_table() {
  GithubConfig g;
  g.enabled = true;
  g.org = "octo-org";
  g.token_file = "/etc/armhive/github.token";
  g.webhook_secret_file = "/etc/armhive/github-webhook.secret";
  g.labels = {{"armhive-arm64", "ci"}};
  return g;
}

const GithubSecrets kSecrets{"webhook-secret", "github-token", ""};

bool names(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& l : lines) {
    if (l.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST_CASE("github reload plan: nothing changed is nothing to do", "[config][reload]") {
  GithubReload plan = plan_github_reload(running_table(), kSecrets, running_table(), kSecrets);
  CHECK_FALSE(plan.settings);
  CHECK_FALSE(plan.credentials);
  CHECK(plan.applied.empty());
  CHECK(plan.restart_needed.empty());
  GithubReload off = plan_github_reload(GithubConfig{}, {}, GithubConfig{}, {});
  CHECK(off.applied.empty());
  CHECK(off.restart_needed.empty());
}

TEST_CASE("github reload plan: settings and secrets apply live and no secret is shown",
          "[config][reload]") {
  GithubConfig next = running_table();
  next.reconcile_period = 10s;
  next.idle_timeout = 2min;
  next.runner_group_id = 7;
  next.labels["big-arm64"] = "big";
  GithubSecrets rotated = kSecrets;
  rotated.webhook_secret = "rotated-secret";
  GithubReload plan = plan_github_reload(running_table(), kSecrets, next, rotated);
  CHECK(plan.settings);
  CHECK_FALSE(plan.credentials);
  CHECK(plan.restart_needed.empty());
  CHECK(plan.config.reconcile_period == 10s);
  CHECK(plan.config.labels.size() == 2);
  CHECK(names(plan.applied, "github: reconcile_period 1m -> 10s"));
  CHECK(names(plan.applied, "github: idle_timeout 5m -> 2m"));
  CHECK(names(plan.applied, "github: runner_group_id 1 -> 7"));
  CHECK(names(plan.applied,
              "github: labels {armhive-arm64 = ci} -> {armhive-arm64 = ci, "
              "big-arm64 = big}"));
  CHECK(names(plan.applied,
              "github: the webhook secret changed (deliveries signed with the "
              "previous one are accepted for 10m more)"));
  for (const std::string& line : plan.applied) {
    CHECK(line.find("secret-") == std::string::npos);
    CHECK(line.find("rotated") == std::string::npos);
  }

  // The token, and a switch to a GitHub App: the credentials change.
  GithubSecrets token = kSecrets;
  token.token = "new-token";
  GithubReload t = plan_github_reload(running_table(), kSecrets, running_table(), token);
  CHECK(t.credentials);
  CHECK_FALSE(t.settings);
  CHECK(t.applied == std::vector<std::string>{"github: the token changed"});
  GithubConfig app = running_table();
  app.token_file.clear();
  app.app_id = 12;
  app.installation_id = 34;
  app.app_private_key_file = "/etc/armhive/github-app.pem";
  GithubReload a = plan_github_reload(running_table(), kSecrets, app,
                                      GithubSecrets{"webhook-secret", "", "-----BEGIN ..."});
  CHECK(a.credentials);
  CHECK(a.restart_needed.empty());
  CHECK(names(a.applied, "github: app_id 0 -> 12"));
  CHECK(names(a.applied, "github: the App's private key changed"));
  CHECK_FALSE(names(a.applied, "BEGIN"));
}

TEST_CASE("github reload plan: reconcile_repos applies live and waits with the org it belongs to",
          "[config][reload][heal]") {
  GithubConfig running = running_table();
  running.reconcile_repos = {"octo-org/app"};
  GithubConfig next = running;
  next.reconcile_repos = {"octo-org/app", "octo-org/lib"};
  GithubReload plan = plan_github_reload(running, kSecrets, next, kSecrets);
  CHECK(plan.settings);
  CHECK_FALSE(plan.credentials);
  CHECK(plan.restart_needed.empty());
  CHECK(plan.config.reconcile_repos == next.reconcile_repos);
  CHECK(plan.applied == std::vector<std::string>{"github: reconcile_repos ['octo-org/app'] -> "
                                                 "['octo-org/app', 'octo-org/lib']"});
  // Emptied: pass 1 looks nowhere from then on.
  next.reconcile_repos.clear();
  CHECK(plan_github_reload(running, kSecrets, next, kSecrets).config.reconcile_repos.empty());

  // Another org needs a restart; the repositories read with it are the new org's, so the running
  // list stays with the running org until then.
  next.org = "other-org";
  next.reconcile_repos = {"other-org/app"};
  GithubReload moved = plan_github_reload(running, kSecrets, next, kSecrets);
  CHECK(moved.config.org == "octo-org");
  CHECK(moved.config.reconcile_repos == std::vector<std::string>{"octo-org/app"});
  CHECK(moved.applied.empty());
  REQUIRE(moved.restart_needed.size() == 2);
  CHECK_THAT(moved.restart_needed[1],
             Catch::StartsWith("[github] reconcile_repos: ['octo-org/app'] -> ['other-org/app'] "
                               "is kept until the restart"));
}

TEST_CASE("github reload plan: the scope and the table itself need a restart and are kept",
          "[config][reload]") {
  GithubConfig next = running_table();
  next.org = "other-org";
  next.api_url = "https://ghe.example.com/api/v3";
  next.reconcile_period = 30s;
  GithubReload plan = plan_github_reload(running_table(), kSecrets, next, kSecrets);
  REQUIRE(plan.restart_needed.size() == 2);
  CHECK_THAT(plan.restart_needed[0],
             Catch::StartsWith("[github] api_url: 'https://api.github.com' -> "
                               "'https://ghe.example.com/api/v3' needs a restart"));
  CHECK_THAT(plan.restart_needed[1],
             Catch::StartsWith("[github] org: 'octo-org' -> 'other-org' needs a restart"));
  // The running scope stays; the rest applies.
  CHECK(plan.config.org == "octo-org");
  CHECK(plan.config.api_url == "https://api.github.com");
  CHECK(plan.config.reconcile_period == 30s);
  CHECK(plan.settings);

  GithubReload removed = plan_github_reload(running_table(), kSecrets, GithubConfig{}, {});
  REQUIRE(removed.restart_needed.size() == 1);
  CHECK_THAT(removed.restart_needed[0], Catch::StartsWith("[github] removed: "));
  CHECK_FALSE(removed.settings);
  CHECK(removed.config.enabled);
  GithubReload added = plan_github_reload(GithubConfig{}, {}, running_table(), kSecrets);
  REQUIRE(added.restart_needed.size() == 1);
  CHECK_THAT(added.restart_needed[0], Catch::StartsWith("[github] added: "));
  CHECK(added.applied.empty());
}

}  // namespace
}  // namespace armhive
