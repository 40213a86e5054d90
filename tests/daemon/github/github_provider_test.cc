#include "daemon/github/github_provider.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <thread>

#include "daemon/github/webhook_signature.h"
#include "daemon/startup/startup_runner.h"
#include "tests/support/engine_harness.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

constexpr const char* kSecret = "webhook-secret";
constexpr const char* kRepository = "octo-org/example";

// GitHub's runner and job endpoints, recorded: the runners it lists are those it made and
// did not delete (nor `forget`), plus any a test adds; the queued jobs of each repository are
// what a test says (`failing`: what listing a repository answers instead).
// `rate_limit_next` makes the next call fail as GitHub's 429 does and sets the backoff.
class FakeGithubApi final : public GithubApi {
 public:
  explicit FakeGithubApi(const Clock& clock) : clock_(clock) {}
  Result<JitRunner> generate_jitconfig(const JitRequest& request) override {
    std::lock_guard lock(mu);
    ++calls;
    if (Status s = limited(); !s.is_ok()) return s;
    requests.push_back(request);
    if (fail) return Status(ErrorCode::kPermissionDenied, "GitHub generate-jitconfig: HTTP 403");
    JitRunner r;
    r.runner_id = next_id++;
    r.runner_name = request.name;
    r.encoded_jit_config = "JITCONFIG-" + std::to_string(r.runner_id) + "-very-secret";
    listed[r.runner_id] = r.runner_name;
    return r;
  }
  Status delete_runner(int64_t runner_id) override {
    std::lock_guard lock(mu);
    ++calls;
    if (Status s = limited(); !s.is_ok()) return s;
    deleted.push_back(runner_id);
    listed.erase(runner_id);
    return Status::ok();
  }
  Result<std::vector<GithubRunnerInfo>> list_runners() override {
    std::lock_guard lock(mu);
    ++calls;
    ++list_calls;
    if (Status s = limited(); !s.is_ok()) return s;
    std::vector<GithubRunnerInfo> out;
    for (const auto& [id, name] : listed) {
      GithubRunnerInfo r;
      r.id = id;
      r.name = name;
      r.status = "offline";
      out.push_back(r);
    }
    return out;
  }
  Result<std::vector<QueuedJob>> list_queued_jobs(const std::string& repository) override {
    std::lock_guard lock(mu);
    ++calls;
    if (Status s = limited(); !s.is_ok()) return s;
    repositories_listed.push_back(repository);
    if (auto it = failing.find(repository); it != failing.end()) return it->second;
    return queued[repository];
  }
  GithubRateLimit rate_limit() const override {
    std::lock_guard lock(mu);
    return rate;
  }
  void forget(int64_t runner_id) {
    std::lock_guard lock(mu);
    listed.erase(runner_id);
  }

  mutable std::mutex mu;
  std::vector<JitRequest> requests;
  std::vector<int64_t> deleted;
  std::map<int64_t, std::string> listed;
  std::map<std::string, std::vector<QueuedJob>> queued;  // by repository
  std::map<std::string, Status> failing;                 // repositories whose listing fails
  std::vector<std::string> repositories_listed;
  GithubRateLimit rate;
  int calls = 0;
  int list_calls = 0;
  int64_t next_id = 40;
  bool fail = false;
  std::optional<Seconds> rate_limit_next;

 private:
  Status limited() {
    const TimePoint now = clock_.now();
    if (now < rate.backoff_until) {
      FAIL_CHECK("a GitHub call during the backoff");
      return Status(kGithubRateLimited, "GitHub rate limited until later");
    }
    if (!rate_limit_next) return Status::ok();
    rate.backoff_until = now + *rate_limit_next;
    rate.remaining = 0;
    rate_limit_next.reset();
    return Status(kGithubRateLimited,
                  "GitHub rate limited until " + to_rfc3339(rate.backoff_until) + " (HTTP 429)");
  }
  const Clock& clock_;
};

std::string job_body(const std::string& action, int64_t id, const std::string& runner = "") {
  std::string r = runner.empty() ? "null" : "\"" + runner + "\"";
  return R"({"action":")" + action + R"(","workflow_job":{"id":)" + std::to_string(id) +
         R"(,"labels":["self-hosted","armhive-arm64"],"runner_name":)" + r +
         R"(},"organization":{"login":"octo-org"}})";
}

struct Fixture {
  Fixture() : h({ci_pool(1, 3)}), api(h.clock) {
    h.start();
    auto r =
        StartupRunner::open(*h.engine, *h.hypervisor, *h.db, h.clock, {},
                            [this](const StartupEvent& e) { record(e.type + " " + e.detail); });
    REQUIRE(r.is_ok());
    startups = std::move(r).value();
    GithubProviderOptions& o = options;
    o.webhook_secret = kSecret;
    o.label_pools = {{"armhive-arm64", "ci"}};
    o.idle_timeout = 300s;
    o.runner_command = {"/opt/actions-runner/run.sh"};
    o.reconcile_period = 60s;
    o.job_repositories = {kRepository};  // a repository scope's own
    o.metrics = &metrics;
    provider = std::make_unique<GithubProvider>(
        o, *h.engine,
        [this](const std::string& id, const StartupRequestDto& s) {
          return startups->set_startup(id, s);
        },
        api, h.clock, [this](const GithubEvent& e) { record(e.type + " " + e.detail); });
  }
  ~Fixture() {
    provider.reset();
    startups.reset();
  }
  void record(const std::string& line) {
    std::lock_guard lock(mu);
    events.push_back(line);
  }
  std::string all_events() {
    std::lock_guard lock(mu);
    std::string out;
    for (const auto& e : events) out += e + "\n";
    return out;
  }
  Status deliver(const std::string& body, const std::string& delivery,
                 const std::string& event = "workflow_job", const std::string& secret = kSecret) {
    return provider->deliver(event, delivery, webhook_signature(secret, body), body, "192.0.2.1");
  }
  Lease lease_of(const GithubProvider::Runner& r) { return *h.engine->get_lease(r.lease_id); }
  bool ended(const std::string& lease_id) {
    for (int i = 0; i < 1000; ++i) {
      auto l = h.engine->get_lease(lease_id);
      if (l.is_ok() && is_terminal(l->state)) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }

  Harness h;
  FakeGithubApi api;
  Metrics metrics;
  GithubProviderOptions options;  // as the provider started
  std::unique_ptr<StartupRunner> startups;
  std::unique_ptr<GithubProvider> provider;
  std::mutex mu;
  std::vector<std::string> events;
};

TEST_CASE("github: a queued job gets a JIT runner in a VM of its pool, completed releases it",
          "[github]") {
  Fixture f;
  REQUIRE(f.h.settle(1));
  REQUIRE(f.deliver(job_body("queued", 1001), "d-1").is_ok());
  f.provider->run_once();

  REQUIRE(f.api.requests.size() == 1);
  CHECK(f.api.requests[0].name == "armhive-1001");
  CHECK(f.api.requests[0].labels == std::vector<std::string>{"self-hosted", "armhive-arm64"});
  CHECK(f.api.requests[0].runner_group_id == 1);
  auto runners = f.provider->runners();
  REQUIRE(runners.size() == 1);
  CHECK(runners[0].runner_id == 40);
  Lease l = f.lease_of(runners[0]);
  CHECK(l.pool == "ci");
  CHECK(l.owner == "github");
  CHECK(l.labels.at("github.job") == "1001");
  CHECK(l.labels.at("github.runner") == "armhive-1001");
  CHECK(l.idempotency_key == "github-job-1001");

  // The runner starts in the guest with the JIT configuration as a secret variable only.
  for (int i = 0; i < 100 && f.h.hypervisor->running_processes().empty(); ++i) {
    f.startups->poll_once();
  }
  auto pids = f.h.hypervisor->running_processes();
  REQUIRE(pids.size() == 1);
  CHECK(f.h.hypervisor->saw(l.vm_name + ": /opt/actions-runner/run.sh"));
  // The JIT configuration beside a root login's variables (daemon/startup), on no command line.
  auto env = f.h.hypervisor->started_env(pids[0]);
  CHECK(std::count(env.begin(), env.end(),
                   "ACTIONS_RUNNER_INPUT_JITCONFIG=JITCONFIG-40-very-secret") == 1);
  CHECK(std::count(env.begin(), env.end(), "HOME=/root") == 1);
  auto view = f.startups->view(l.id);
  REQUIRE(view);
  CHECK(view->release_on_exit);
  CHECK(view->secret_env == std::vector<std::string>{"ACTIONS_RUNNER_INPUT_JITCONFIG"});

  // A redelivery of the same job (new delivery id) makes no second runner.
  REQUIRE(f.deliver(job_body("queued", 1001), "d-2").is_ok());
  REQUIRE(f.deliver(job_body("in_progress", 1001, "armhive-1001"), "d-3").is_ok());
  REQUIRE(f.deliver(job_body("completed", 1001, "armhive-1001"), "d-4").is_ok());
  f.provider->run_once();
  CHECK(f.api.requests.size() == 1);
  CHECK(f.ended(l.id));
  CHECK(f.provider->runners().empty());
  CHECK(f.api.deleted.empty());  // a JIT runner that ran its job removes itself
  CHECK(f.all_events().find("very-secret") == std::string::npos);

  // The signed body of `queued` sent again under a fresh delivery id (the id is a header the
  // signature does not cover) once the job is over: no second runner, no second lease.
  REQUIRE(f.deliver(job_body("queued", 1001), "d-5").is_ok());
  f.provider->run_once();
  CHECK(f.api.requests.size() == 1);
  CHECK(f.provider->runners().empty());
  CHECK(f.h.engine->list_leases({}).value().size() == 1);
  CHECK(f.all_events().find("job=1001 was delivered before: ignored") != std::string::npos);
}

TEST_CASE(
    "github: bad signatures, replays and bad bodies are refused and audited, other labels are "
    "ignored",
    "[github]") {
  Fixture f;
  const std::string body = job_body("queued", 2002);
  Status no_signature = f.provider->deliver("workflow_job", "d-1", "", body, "192.0.2.1");
  CHECK(no_signature.code() == ErrorCode::kUnauthenticated);
  Status forged = f.provider->deliver("workflow_job", "d-1", webhook_signature("guess", body), body,
                                      "192.0.2.1");
  CHECK(forged.code() == ErrorCode::kUnauthenticated);
  // A refused forgery does not burn the delivery id.
  REQUIRE(f.deliver(job_body("waiting", 2002), "d-1").is_ok());
  CHECK(f.deliver(job_body("waiting", 2002), "d-1").code() == ErrorCode::kConflict);
  CHECK(f.deliver("{\"action\":1}", "d-5").code() == ErrorCode::kInvalidArgument);
  CHECK(f.provider->deliver("workflow_job", "d-6", webhook_signature(kSecret, "x"), "x", "a")
            .code() == ErrorCode::kInvalidArgument);
  // Another event, and a job for other runners: accepted, nothing done.
  CHECK(f.deliver("{\"zen\":\"Keep it simple.\"}", "d-7", "ping").is_ok());
  std::string other = job_body("queued", 2003);
  other.replace(other.find("armhive-arm64"), 13, "ubuntu-latest");
  CHECK(f.deliver(other, "d-8").is_ok());
  f.provider->run_once();
  CHECK(f.api.requests.empty());
  CHECK(f.h.engine->list_leases({}).value().empty());
  const std::string audit = f.all_events();
  CHECK(audit.find("github.webhook_rejected delivery d-1 from 192.0.2.1: the delivery is not "
                   "signed") != std::string::npos);
  CHECK(audit.find("does not match") != std::string::npos);
  CHECK(audit.find("(a replay)") != std::string::npos);
}

TEST_CASE("github: a runner that takes no job is deleted from GitHub and its VM released",
          "[github]") {
  Fixture f;
  REQUIRE(f.h.settle(1));
  REQUIRE(f.deliver(job_body("queued", 3003), "d-1").is_ok());
  f.provider->run_once();
  auto runners = f.provider->runners();
  REQUIRE(runners.size() == 1);
  f.h.clock.advance(299s);
  f.provider->run_once();
  CHECK(f.provider->runners().size() == 1);
  f.h.clock.advance(2s);
  f.provider->run_once();
  CHECK(f.provider->runners().empty());
  CHECK(f.api.deleted == std::vector<int64_t>{runners[0].runner_id});
  CHECK(f.ended(runners[0].lease_id));
  CHECK(f.all_events().find("github.runner_idle") != std::string::npos);
}

TEST_CASE(
    "github: a job cancelled before it ran deletes its runner, GitHub failures leave nothing "
    "behind",
    "[github]") {
  Fixture f;
  REQUIRE(f.h.settle(1));
  REQUIRE(f.deliver(job_body("queued", 4004), "d-1").is_ok());
  f.provider->run_once();
  auto runners = f.provider->runners();
  REQUIRE(runners.size() == 1);
  REQUIRE(f.deliver(job_body("completed", 4004), "d-2").is_ok());  // no runner_name
  f.provider->run_once();
  CHECK(f.api.deleted == std::vector<int64_t>{runners[0].runner_id});
  CHECK(f.ended(runners[0].lease_id));

  f.api.fail = true;
  REQUIRE(f.deliver(job_body("queued", 4005), "d-3").is_ok());
  f.provider->run_once();
  CHECK(f.provider->runners().empty());
  LeaseFilter active;
  active.include_ended = false;
  // Releasing a lease is asynchronous (the engine destroys its VM on its own threads): nothing
  // is left once the engine has settled. A lease still active after that is named.
  const bool none_left =
      eventually(*f.h.engine, [&] { return f.h.engine->list_leases(active).value().empty(); });
  const std::vector<Lease> left = f.h.engine->list_leases(active).value();
  for (const auto& l : left) {
    std::string labels;
    for (const auto& [k, v] : l.labels) labels += k + "=" + v + " ";
    UNSCOPED_INFO("left active: " << l.id << " " << to_string(l.state) << " " << labels);
  }
  UNSCOPED_INFO("events: " << f.all_events());
  CHECK(none_left);
  CHECK(f.all_events().find("github.error job 4005: no runner configuration") != std::string::npos);
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("github heals: a queued job no webhook announced gets a runner in one pass",
          "[github][heal]") {
  Fixture f;
  REQUIRE(f.h.settle(1));
  f.api.queued[kRepository] = {QueuedJob{5005, 77, {"self-hosted", "armhive-arm64"}},
                               QueuedJob{5006, 77, {"ubuntu-latest"}}};  // for other runners
  f.provider->run_once();

  REQUIRE(f.api.requests.size() == 1);
  CHECK(f.api.requests[0].name == "armhive-5005");
  CHECK(f.api.requests[0].labels == std::vector<std::string>{"self-hosted", "armhive-arm64"});
  auto runners = f.provider->runners();
  REQUIRE(runners.size() == 1);
  CHECK(runners[0].job_id == 5005);
  Lease l = f.lease_of(runners[0]);
  CHECK(l.pool == "ci");
  CHECK(l.labels.at("github.job") == "5005");
  CHECK(l.idempotency_key == "github-job-5005");
  CHECK(
      has(f.all_events(), "github.reconciled job=5005 run=77 repository=octo-org/example pool=ci"));
  auto st = f.provider->state();
  CHECK(st.reconciled_jobs_total == 1);
  CHECK(st.runners == 1);
  CHECK(st.last_reconcile == f.h.clock.now());
  CHECK(st.last_reconcile_error.empty());
  CHECK(f.metrics.value("armhive_github_reconciled_jobs_total") == 1);

  // The next pass, with GitHub still listing the job queued (no runner took it yet): the
  // runner of ours is found, by runners_ and by its lease's github.job.
  f.h.clock.advance(61s);
  f.provider->run_once();
  CHECK(f.api.requests.size() == 1);
  CHECK(f.provider->state().reconciled_jobs_total == 1);
}

TEST_CASE("github heals: the late webhook of a job a pass served launches no second runner",
          "[github][heal]") {
  Fixture f;
  REQUIRE(f.h.settle(1));
  f.api.queued[kRepository] = {QueuedJob{5105, 78, {"self-hosted", "armhive-arm64"}}};
  f.provider->run_once();
  REQUIRE(f.api.requests.size() == 1);
  auto runners = f.provider->runners();
  REQUIRE(runners.size() == 1);
  // It runs and completes; its runner and lease are gone. Then the queued delivery GitHub was
  // late with arrives.
  f.api.queued[kRepository].clear();
  REQUIRE(f.deliver(job_body("in_progress", 5105, "armhive-5105"), "d-1").is_ok());
  REQUIRE(f.deliver(job_body("completed", 5105, "armhive-5105"), "d-2").is_ok());
  f.provider->run_once();
  CHECK(f.ended(runners[0].lease_id));
  CHECK(f.provider->runners().empty());
  REQUIRE(f.deliver(job_body("queued", 5105), "d-late").is_ok());
  f.provider->run_once();
  CHECK(f.api.requests.size() == 1);
  CHECK(f.provider->runners().empty());
}

TEST_CASE("github heals: a runner named armhive-* that no lease of ours has is deleted",
          "[github][heal]") {
  Fixture f;
  REQUIRE(f.h.settle(1));
  REQUIRE(f.deliver(job_body("queued", 6006), "d-1").is_ok());
  f.provider->run_once();  // the webhook's runner first, then the pass
  auto runners = f.provider->runners();
  REQUIRE(runners.size() == 1);
  {
    std::lock_guard lock(f.api.mu);
    f.api.listed[7] = "armhive-999";   // its lease ended, its VM is gone
    f.api.listed[8] = "someone-else";  // not ours
  }
  f.h.clock.advance(61s);
  f.provider->run_once();
  CHECK(f.api.deleted == std::vector<int64_t>{7});
  CHECK(has(f.all_events(), "github.ghost_deleted runner=armhive-999 runner_id=7"));
  CHECK(f.provider->state().ghosts_deleted_total == 1);
  CHECK(f.metrics.value("armhive_github_ghost_runners_deleted_total") == 1);
  CHECK(f.provider->runners().size() == 1);  // the live runner is no ghost
  CHECK_FALSE(is_terminal(f.lease_of(runners[0]).state));
}

TEST_CASE("github heals: a runner GitHub no longer lists has its lease released after the grace",
          "[github][heal]") {
  Fixture f;
  REQUIRE(f.h.settle(1));
  REQUIRE(f.deliver(job_body("queued", 7007), "d-1").is_ok());
  f.provider->run_once();
  auto runners = f.provider->runners();
  REQUIRE(runners.size() == 1);
  f.api.forget(runners[0].runner_id);  // removed by hand in GitHub's settings, say

  f.h.clock.advance(61s);  // a pass, but within the grace (2 x 60 s): kept
  f.provider->run_once();
  CHECK(f.provider->runners().size() == 1);
  f.h.clock.advance(60s);
  f.provider->run_once();
  CHECK(f.provider->runners().empty());
  CHECK(f.ended(runners[0].lease_id));
  CHECK(f.api.deleted.empty());  // GitHub has it no more: nothing to delete
  CHECK(has(f.all_events(), "github.runner_forgotten"));
  CHECK(f.provider->state().forgotten_runners_total == 1);
}

TEST_CASE("github heals: a rate-limited reply backs off, no call before it ends, the queue kept",
          "[github][heal]") {
  Fixture f;
  REQUIRE(f.h.settle(1));
  f.provider->run_once();  // the first pass, nothing to do
  f.api.rate_limit_next = 90s;
  REQUIRE(f.deliver(job_body("queued", 8008), "d-1").is_ok());
  REQUIRE(f.deliver(job_body("queued", 8009), "d-2").is_ok());
  f.provider->run_once();
  CHECK(f.api.requests.empty());
  auto st = f.provider->state();
  CHECK(st.pending_jobs == 2);
  CHECK(st.rate_limited_total == 1);
  CHECK(st.rate_limit.remaining == 0);
  CHECK(st.rate_limit.backoff_until == f.h.clock.now() + 90s);
  CHECK(f.metrics.value("armhive_github_rate_limited_total") == 1);
  CHECK(has(f.all_events(), "github.rate_limited GitHub rate limited until"));

  // A pass is due at 60 s, the sweep every run: neither calls GitHub before 90 s (the fake
  // fails the test on any call during the backoff).
  const int calls = f.api.calls;
  f.h.clock.advance(70s);
  f.provider->run_once();
  CHECK(f.api.calls == calls);
  CHECK(f.provider->state().pending_jobs == 2);

  f.h.clock.advance(21s);
  f.provider->run_once();
  REQUIRE(f.api.requests.size() == 2);  // both, in the order they came
  CHECK(f.api.requests[0].name == "armhive-8008");
  CHECK(f.api.requests[1].name == "armhive-8009");
  CHECK(f.provider->state().pending_jobs == 0);
  CHECK(f.provider->runners().size() == 2);
}

TEST_CASE(
    "github heals an organisation: at most 100 runners a pass across its repositories, the rest "
    "at the next",
    "[github][heal][org]") {
  Fixture f;
  REQUIRE(f.h.settle(1));
  GithubProviderOptions org = f.options;
  org.job_repositories = {"octo-org/app", "octo-org/lib"};
  f.provider->reconfigure(org);
  for (int64_t i = 0; i < 60; ++i) {
    f.api.queued["octo-org/app"].push_back(QueuedJob{10000 + i, 1, {"armhive-arm64"}});
    f.api.queued["octo-org/lib"].push_back(QueuedJob{20000 + i, 2, {"armhive-arm64"}});
  }
  f.provider->run_once();
  CHECK(f.api.repositories_listed == std::vector<std::string>{"octo-org/app", "octo-org/lib"});
  REQUIRE(f.api.requests.size() == 100);  // in the order GitHub listed them
  CHECK(f.api.requests[59].name == "armhive-10059");
  CHECK(f.api.requests[60].name == "armhive-20000");
  CHECK(f.api.requests[99].name == "armhive-20039");
  CHECK(f.provider->state().reconciled_jobs_total == 100);

  f.h.clock.advance(61s);
  f.provider->run_once();
  REQUIRE(f.api.requests.size() == 120);
  CHECK(f.api.requests[100].name == "armhive-20040");
  CHECK(f.api.requests[119].name == "armhive-20059");
  CHECK(f.provider->state().reconciled_jobs_total == 120);
}

TEST_CASE(
    "github heals an organisation: a repository that cannot be listed is told and skipped, "
    "GitHub's rate limit ends the pass",
    "[github][heal][org]") {
  Fixture f;
  REQUIRE(f.h.settle(1));
  GithubProviderOptions org = f.options;
  org.job_repositories = {"octo-org/flaky", "octo-org/app", "octo-org/lib"};
  f.provider->reconfigure(org);
  f.api.failing["octo-org/flaky"] =
      Status(ErrorCode::kUnavailable, "GitHub list queued runs: HTTP 502");
  f.api.queued["octo-org/app"] = {QueuedJob{9001, 1, {"armhive-arm64"}}};
  f.api.queued["octo-org/lib"] = {QueuedJob{9002, 2, {"armhive-arm64"}}};
  {
    std::lock_guard lock(f.api.mu);
    f.api.listed[7] = "armhive-999";  // a ghost
  }
  f.provider->run_once();
  REQUIRE(f.api.requests.size() == 2);
  CHECK(f.api.deleted == std::vector<int64_t>{7});
  CHECK(has(f.all_events(),
            "github.error repository octo-org/flaky: its queued jobs were not listed: GitHub list "
            "queued runs: HTTP 502"));
  CHECK(f.provider->state().last_reconcile_error ==
        "repository octo-org/flaky: GitHub list queued runs: HTTP 502");

  // Rate limited while listing app: lib is not asked, nor is any runner deleted or made; the
  // pass ends as every rate-limited pass does.
  f.api.failing["octo-org/flaky"] =
      Status(ErrorCode::kNotFound, "GitHub list queued runs: HTTP 404");
  f.api.failing["octo-org/app"] = Status(kGithubRateLimited, "GitHub rate limited until later");
  f.api.queued["octo-org/lib"].push_back(QueuedJob{9003, 2, {"armhive-arm64"}});
  {
    std::lock_guard lock(f.api.mu);
    f.api.listed[8] = "armhive-998";
    f.api.repositories_listed.clear();
  }
  f.h.clock.advance(61s);
  f.provider->run_once();
  CHECK(f.api.repositories_listed == std::vector<std::string>{"octo-org/flaky", "octo-org/app"});
  CHECK(f.api.requests.size() == 2);
  CHECK(f.api.deleted == std::vector<int64_t>{7});
  CHECK(f.provider->state().rate_limited_total == 1);
  CHECK(has(f.all_events(), "(no such repository, or the token or App cannot see it)"));
  CHECK(f.provider->state().last_reconcile_error == "GitHub rate limited until later");
}

TEST_CASE(
    "github reload: a new webhook secret verifies at once and the old one only within its overlap",
    "[github][reload]") {
  Fixture f;
  const std::string ping = R"({"zen":"Keep it logically awesome."})";
  REQUIRE(f.deliver(ping, "d-1", "ping").is_ok());

  GithubProviderOptions next = f.options;
  next.webhook_secret = "rotated-secret";
  next.webhook_secret_overlap = 600s;
  f.provider->reconfigure(next);
  CHECK(f.deliver(ping, "d-2", "ping", "rotated-secret").is_ok());
  // GitHub's settings not changed yet: the old secret is still good, and that is said.
  CHECK(f.deliver(ping, "d-3", "ping", kSecret).is_ok());
  CHECK(has(f.all_events(), "signed with the previous webhook secret"));
  // A reload that changes something else keeps the overlap going.
  next.idle_timeout = 120s;
  f.provider->reconfigure(next);
  CHECK(f.deliver(ping, "d-4", "ping", kSecret).is_ok());
  f.h.clock.advance(601s);
  CHECK(f.deliver(ping, "d-5", "ping", kSecret).code() == ErrorCode::kUnauthenticated);
  CHECK(f.deliver(ping, "d-6", "ping", "rotated-secret").is_ok());

  // No overlap (a leaked secret): the one replaced is refused at once.
  next.webhook_secret = "third-secret";
  next.webhook_secret_overlap = 0s;
  f.provider->reconfigure(next);
  CHECK(f.deliver(ping, "d-7", "ping", "rotated-secret").code() == ErrorCode::kUnauthenticated);
  CHECK(f.deliver(ping, "d-8", "ping", "third-secret").is_ok());
  CHECK_FALSE(has(f.all_events(), "rotated-secret"));
}

TEST_CASE(
    "github reload: the reconcile period, runner group and command apply to the next pass and job",
    "[github][reload]") {
  Fixture f;
  REQUIRE(f.h.settle(1));
  f.provider->run_once();  // the first pass, at once
  REQUIRE(f.api.list_calls == 1);

  // A longer period: the pass the old one made due is put off.
  GithubProviderOptions next = f.options;
  next.reconcile_period = 3600s;
  f.provider->reconfigure(next);
  f.h.clock.advance(61s);
  f.provider->run_once();
  CHECK(f.api.list_calls == 1);
  // A shorter one: due one new period after the last pass began, which is past.
  next.reconcile_period = 10s;
  next.runner_group_id = 7;
  next.runner_command = {"/opt/other-runner/run.sh"};
  f.provider->reconfigure(next);
  f.provider->run_once();
  CHECK(f.api.list_calls == 2);
  f.h.clock.advance(5s);
  f.provider->run_once();
  CHECK(f.api.list_calls == 2);
  f.h.clock.advance(5s);
  f.provider->run_once();
  CHECK(f.api.list_calls == 3);

  REQUIRE(f.deliver(job_body("queued", 2002), "d-1").is_ok());
  f.provider->run_once();
  REQUIRE(f.api.requests.size() == 1);
  CHECK(f.api.requests[0].runner_group_id == 7);
  auto runners = f.provider->runners();
  REQUIRE(runners.size() == 1);
  Lease l = f.lease_of(runners[0]);
  for (int i = 0; i < 100 && f.h.hypervisor->running_processes().empty(); ++i) {
    f.startups->poll_once();
  }
  CHECK(f.h.hypervisor->saw(l.vm_name + ": /opt/other-runner/run.sh"));

  // Labels: a job whose label no longer maps to a pool gets no runner.
  next.label_pools = {{"other-label", "ci"}};
  f.provider->reconfigure(next);
  REQUIRE(f.deliver(job_body("queued", 2003), "d-2").is_ok());
  f.provider->run_once();
  CHECK(f.api.requests.size() == 1);
}

}  // namespace
}  // namespace armhive
