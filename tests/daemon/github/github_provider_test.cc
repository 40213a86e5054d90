#include "daemon/github/github_provider.h"

#include <catch2/catch.hpp>
#include <thread>

#include "daemon/github/webhook_signature.h"
#include "daemon/startup/startup_runner.h"
#include "tests/support/engine_harness.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

constexpr const char* kSecret = "webhook-secret";

// GitHub's two runner endpoints, recorded.
class FakeGithubApi final : public GithubApi {
 public:
  Result<JitRunner> generate_jitconfig(const JitRequest& request) override {
    std::lock_guard lock(mu);
    requests.push_back(request);
    if (fail) return Status(ErrorCode::kPermissionDenied, "GitHub generate-jitconfig: HTTP 403");
    JitRunner r;
    r.runner_id = next_id++;
    r.runner_name = request.name;
    r.encoded_jit_config = "JITCONFIG-" + std::to_string(r.runner_id) + "-very-secret";
    return r;
  }
  Status delete_runner(int64_t runner_id) override {
    std::lock_guard lock(mu);
    deleted.push_back(runner_id);
    return Status::ok();
  }
  std::mutex mu;
  std::vector<JitRequest> requests;
  std::vector<int64_t> deleted;
  int64_t next_id = 40;
  bool fail = false;
};

std::string job_body(const std::string& action, int64_t id, const std::string& runner = "") {
  std::string r = runner.empty() ? "null" : "\"" + runner + "\"";
  return R"({"action":")" + action + R"(","workflow_job":{"id":)" + std::to_string(id) +
         R"(,"labels":["self-hosted","armhive-arm64"],"runner_name":)" + r +
         R"(},"organization":{"login":"octo-org"}})";
}

struct Fixture {
  Fixture() : h({ci_pool(1, 3)}) {
    h.start();
    auto r =
        StartupRunner::open(*h.engine, *h.hypervisor, *h.db, h.clock, {},
                            [this](const StartupEvent& e) { record(e.type + " " + e.detail); });
    REQUIRE(r.is_ok());
    startups = std::move(r).value();
    GithubProviderOptions o;
    o.webhook_secret = kSecret;
    o.label_pools = {{"armhive-arm64", "ci"}};
    o.idle_timeout = 300s;
    o.runner_command = {"/opt/actions-runner/run.sh"};
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
                 const std::string& event = "workflow_job") {
    return provider->deliver(event, delivery, webhook_signature(kSecret, body), body, "192.0.2.1");
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
  std::unique_ptr<StartupRunner> startups;
  std::unique_ptr<GithubProvider> provider;
  std::mutex mu;
  std::vector<std::string> events;
};

TEST_CASE("github: a queued job gets a JIT runner in a VM of its pool; completed releases it",
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
}

TEST_CASE(
    "github: bad signatures, replays and bad bodies are refused and audited; other "
    "labels are ignored",
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
    "github: a job cancelled before it ran deletes its runner; GitHub failures leave "
    "nothing behind",
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
  CHECK(f.h.engine->list_leases(active).value().empty());
  CHECK(f.all_events().find("github.error job 4005: no runner configuration") != std::string::npos);
}

}  // namespace
}  // namespace armhive
