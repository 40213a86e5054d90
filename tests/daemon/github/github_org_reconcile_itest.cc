// An organisation's lost webhooks healed in the repositories [github] reconcile_repos lists
// (daemon/github/README.md, "Healing"): the provider over the real engine (fake hypervisor),
// the real REST client and the GitHub stand-in (github_api_standin.py) on loopback, which keeps
// each repository's runs and jobs apart and answers 404 for a repository it is told is missing.
// What is checked is what GitHub and the operator see: the runners GitHub was asked for and
// where, the leases, the events and GET /v1/github's state.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "daemon/github/github_api.h"
#include "daemon/github/github_provider.h"
#include "daemon/startup/startup_runner.h"
#include "tests/support/engine_harness.h"
#include "tests/support/github_standin.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("armhive-gh-org-" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// armhived's GitHub provider for organisation octo-org, pass 1 looking in `repositories`.
struct OrgFixture {
  explicit OrgFixture(std::vector<std::string> repositories)
      : standin(dir.path.string()), h({ci_pool(1, 4)}) {
    h.start();
    GithubApiOptions api_options;
    api_options.api_url = "http://127.0.0.1:" + std::to_string(standin.port());
    api_options.scope = "orgs/octo-org";
    api_options.token = "github_pat_org_itest";
    api_options.clock = &h.clock;
    auto made = make_github_api(std::move(api_options));
    REQUIRE(made.is_ok());
    api = std::move(made).value();
    auto r = StartupRunner::open(*h.engine, *h.hypervisor, *h.db, h.clock, {},
                                 [](const StartupEvent&) {});
    REQUIRE(r.is_ok());
    startups = std::move(r).value();
    options.webhook_secret = "webhook-secret";
    options.label_pools = {{"armhive-arm64", "ci"}};
    options.runner_command = {"/opt/actions-runner/run.sh"};
    options.reconcile_period = 60s;
    options.job_repositories = std::move(repositories);
    provider = std::make_unique<GithubProvider>(
        options, *h.engine,
        [this](const std::string& id, const StartupRequestDto& s) {
          return startups->set_startup(id, s);
        },
        *api, h.clock,
        [this](const GithubEvent& e) {
          std::lock_guard lock(mu);
          events += e.type + " " + e.detail + "\n";
        });
  }
  ~OrgFixture() {
    provider.reset();
    startups.reset();
  }

  // A job GitHub queued in `repository` whose webhook never came.
  void queue_job(int64_t id, int64_t run_id, const std::string& repository) {
    standin.control({{"queue_job",
                      {{"id", id},
                       {"run_id", run_id},
                       {"labels", {"self-hosted", "armhive-arm64"}},
                       {"repo", repository}}}});
  }
  // The names of the runners GitHub was asked to make, and where.
  std::vector<std::string> runners_asked_for(const std::string& where) {
    std::vector<std::string> out;
    for (const json& r : standin.requests()) {
      if (r.value("method", "") == "POST" && r.value("path", "") == where) {
        out.push_back(r["body"]["name"].get<std::string>());
      }
    }
    return out;
  }
  std::vector<std::string> org_runners_asked_for() {
    return runners_asked_for("/orgs/octo-org/actions/runners/generate-jitconfig");
  }
  // The paths of the GET requests that named `part`.
  std::vector<std::string> gets_naming(const std::string& part) {
    std::vector<std::string> out;
    for (const json& r : standin.requests()) {
      const std::string path = r.value("path", "");
      if (r.value("method", "") == "GET" && path.find(part) != std::string::npos) {
        out.push_back(path);
      }
    }
    return out;
  }
  // The jobs of the active leases of the provider (github.job).
  std::vector<std::string> leased_jobs() {
    LeaseFilter active;
    active.include_ended = false;
    active.owner = "github";
    const std::vector<Lease> leases = h.engine->list_leases(active).value();
    std::vector<std::string> out;
    for (const Lease& l : leases) out.push_back(l.labels.at("github.job"));
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string all_events() {
    std::lock_guard lock(mu);
    return events;
  }

  TempDir dir;
  GithubStandin standin;
  Harness h;
  std::unique_ptr<GithubApi> api;
  std::unique_ptr<StartupRunner> startups;
  GithubProviderOptions options;
  std::unique_ptr<GithubProvider> provider;
  std::mutex mu;
  std::string events;
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE(
    "github heals an organisation: a job queued in each listed repository gets an org runner in "
    "one pass and a job of a repository not listed gets none",
    "[github][heal][org]") {
  OrgFixture f({"octo-org/app", "octo-org/lib"});
  REQUIRE(f.h.settle(1));
  f.queue_job(301, 31, "octo-org/app");
  f.queue_job(302, 32, "octo-org/lib");
  f.queue_job(303, 33, "octo-org/elsewhere");

  f.provider->run_once();  // the first pass, at once

  // Made at the organisation, as the webhook path makes them; nothing for the third job.
  CHECK(f.org_runners_asked_for() == std::vector<std::string>{"armhive-301", "armhive-302"});
  CHECK(f.runners_asked_for("/repos/octo-org/app/actions/runners/generate-jitconfig").empty());
  CHECK(f.leased_jobs() == std::vector<std::string>{"301", "302"});
  const std::string events = f.all_events();
  INFO(events);
  CHECK(has(events, "github.reconciled job=301 run=31 repository=octo-org/app pool=ci"));
  CHECK(has(events, "github.reconciled job=302 run=32 repository=octo-org/lib pool=ci"));
  CHECK_FALSE(has(events, "job=303"));
  CHECK(f.gets_naming("/repos/octo-org/elsewhere/").empty());
  GithubProviderState st = f.provider->state();
  CHECK(st.reconciled_jobs_total == 2);
  CHECK(st.runners == 2);
  CHECK(st.last_reconcile_error.empty());

  // The next pass: GitHub still lists both jobs queued (no runner took them yet); the runners
  // of ours are found, no second one is made.
  f.h.clock.advance(61s);
  f.provider->run_once();
  CHECK(f.gets_naming("/repos/octo-org/app/actions/runs?status=queued").size() == 2);
  CHECK(f.org_runners_asked_for().size() == 2);
  CHECK(f.provider->state().reconciled_jobs_total == 2);
}

TEST_CASE(
    "github heals an organisation: a listed repository GitHub answers 404 for is told and does "
    "not stop the other repositories nor the ghost runners pass",
    "[github][heal][org]") {
  OrgFixture f({"octo-org/gone", "octo-org/lib"});
  REQUIRE(f.h.settle(1));
  f.standin.control({{"missing_repo", "octo-org/gone"}});
  f.queue_job(401, 41, "octo-org/lib");
  // A runner of our naming whose VM is gone (no lease of ours has it).
  f.standin.control({{"add_runners", {"armhive-999"}}});

  f.provider->run_once();

  CHECK(f.org_runners_asked_for() == std::vector<std::string>{"armhive-401"});
  CHECK(f.leased_jobs() == std::vector<std::string>{"401"});
  bool ghost_deleted = false;
  for (const json& r : f.standin.requests()) {
    ghost_deleted |= r.value("method", "") == "DELETE" && r.value("status", 0) == 204 &&
                     r.value("path", "").rfind("/orgs/octo-org/actions/runners/", 0) == 0;
  }
  CHECK(ghost_deleted);
  const std::string events = f.all_events();
  INFO(events);
  CHECK(has(events,
            "github.error repository octo-org/gone: its queued jobs were not listed: GitHub list "
            "queued runs: HTTP 404 (Not Found) (no such repository, or the token or App cannot "
            "see it)"));
  CHECK(has(events, "github.reconciled job=401 run=41 repository=octo-org/lib"));
  CHECK(has(events, "github.ghost_deleted runner=armhive-999"));
  GithubProviderState st = f.provider->state();
  CHECK(st.reconciled_jobs_total == 1);
  CHECK(st.ghosts_deleted_total == 1);
  // GET /v1/github says the pass ran with a repository it could not list.
  CHECK_THAT(st.last_reconcile_error, Catch::StartsWith("repository octo-org/gone: "));
  CHECK(st.last_reconcile == f.h.clock.now());
}

TEST_CASE("github heals an organisation: a reload's repositories are looked in from the next pass",
          "[github][heal][org][reload]") {
  OrgFixture f({"octo-org/app"});
  REQUIRE(f.h.settle(1));
  f.queue_job(501, 51, "octo-org/lib");
  f.provider->run_once();
  CHECK(f.gets_naming("/repos/octo-org/lib/").empty());
  CHECK(f.org_runners_asked_for().empty());

  GithubProviderOptions next = f.options;
  next.job_repositories = {"octo-org/app", "octo-org/lib"};
  f.provider->reconfigure(next);
  f.h.clock.advance(60s);
  f.provider->run_once();
  CHECK(f.org_runners_asked_for() == std::vector<std::string>{"armhive-501"});
  CHECK(f.leased_jobs() == std::vector<std::string>{"501"});

  // And a repository taken off the list is not asked about any more.
  const size_t app_listings = f.gets_naming("/repos/octo-org/app/").size();
  next.job_repositories = {"octo-org/lib"};
  f.provider->reconfigure(next);
  f.h.clock.advance(60s);
  f.provider->run_once();
  CHECK(f.gets_naming("/repos/octo-org/app/").size() == app_listings);
  CHECK(f.gets_naming("/repos/octo-org/lib/actions/runs?status=queued").size() == 2);
}

}  // namespace
}  // namespace armhive
