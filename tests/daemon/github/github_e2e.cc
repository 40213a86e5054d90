// End-to-end: startup commands and the GitHub provider with a real armhived and real aarch64
// guests (tiny image) inside the sandbox. GitHub's API is a loopback stand-in
// (github_api_standin.py); the "runner" is a shell command that records its JIT configuration
// in the guest, where the test reads it through the guest agent.

#include <libvirt/libvirt.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "base/process_runner.h"
#include "daemon/github/webhook_signature.h"
#include "tests/support/daemon_process.h"
#include "tests/support/e2e_daemon.h"
#include "tests/support/github_standin.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

std::string random_hex(size_t bytes) {
  std::random_device rd;
  std::string out;
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < bytes; ++i) {
    unsigned v = rd() & 0xff;
    out += kHex[v >> 4];
    out += kHex[v & 0xf];
  }
  return out;
}

// Everything a leaked secret could sit in: the database (sqlite3 .dump), the daemon's log,
// the domain XML with metadata of every domain, and the event stream.
std::string everywhere(DaemonProcess& daemon) {
  SubprocessRunner run;
  std::string out;
  auto dump =
      run.run({.argv = {"sqlite3", daemon.state_dir() + "/armhive.db", ".dump"}, .timeout = 60s});
  REQUIRE(dump.is_ok());
  REQUIRE(dump->ok());
  REQUIRE(dump->out.find("CREATE TABLE startups") != std::string::npos);
  out += dump->out;
  out += daemon.full_log();
  virConnectPtr conn = virConnectOpen("qemu:///system");
  REQUIRE(conn != nullptr);
  virDomainPtr* domains = nullptr;
  int n = virConnectListAllDomains(conn, &domains, 0);
  for (int i = 0; i < n; ++i) {
    if (char* xml = virDomainGetXMLDesc(domains[i], 0)) {
      out += xml;
      free(xml);
    }
    virDomainFree(domains[i]);
  }
  free(domains);
  virConnectClose(conn);
  auto api = daemon.client();
  REQUIRE(api->stream_events(0, false,
                             [&](const EventDto& e) {
                               out += e.type + " " + e.detail + "\n";
                               return true;
                             })
              .is_ok());
  return out;
}

std::string guest_file(Client& api, const std::string& lease, const std::string& path) {
  ExecRequestDto req;
  req.argv = {"/bin/cat", path};
  req.timeout_s = 30;
  auto r = api.exec(lease, req);
  if (!r.is_ok() || r->exit_code != 0) return {};
  std::string out = r->out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// The lease of job `job`'s runner once its startup command (the runner) runs; "" if none
// within 300 s.
std::string runner_lease(Client& api, const std::string& job) {
  LeaseQuery mine;
  mine.labels = {{"github.job", job}};
  std::string lease_id;
  bool running = eventually(
      [&] {
        auto page = api.list_leases(mine);
        if (!page.is_ok() || page->items.empty()) return false;
        lease_id = page->items[0].id;
        auto l = api.get_lease(lease_id);
        return l.is_ok() && l->startup && l->startup->state == "running";
      },
      300s);
  return running ? lease_id : std::string();
}

TEST_CASE(
    "startup: a lease's command runs in the guest with its environment, release_on_exit ends the "
    "lease, a bad argv is 400",
    "[github-e2e]") {
  DaemonProcess daemon(e2e_state() + "/startup", e2e_state() + "/images", 18480,
                       one_core_pool_toml(1));
  Status started = daemon.start();
  INFO(daemon.log());
  REQUIRE(started.is_ok());
  auto api = daemon.client();

  LeaseCreateRequest bad;
  bad.pool = "ci";
  bad.startup = StartupRequestDto{};  // argv: []
  auto refused = api->create_lease(bad);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == ErrorCode::kInvalidArgument);
  CHECK(refused.status().field() == "startup.argv");
  CHECK(api->list_leases({}).value().items.empty());  // nothing was leased

  const std::string token = "tok-" + random_hex(16);
  LeaseCreateRequest req;
  req.pool = "ci";
  StartupRequestDto s;
  s.argv = {"/bin/sh", "-c", "echo \"$GREETING:$TOKEN\" > /run/startup.out; exit 3"};
  s.env["GREETING"] = {"hello", false};
  s.env["TOKEN"] = {token, true};
  req.startup = s;
  auto lease = api->create_lease(req);
  REQUIRE(lease.is_ok());
  REQUIRE(lease->startup);
  CHECK(lease->startup->secret_env == std::vector<std::string>{"TOKEN"});
  REQUIRE(eventually(
      [&] {
        auto l = api->get_lease(lease->id);
        return l.is_ok() && l->startup && l->startup->state == "exited";
      },
      180s));
  auto l = api->get_lease(lease->id).value();
  CHECK(l.state == "ready");  // no release_on_exit
  CHECK(l.startup->exit_code == 3);
  CHECK(l.startup->env.at("GREETING") == "hello");
  CHECK(l.startup->env.count("TOKEN") == 0);
  CHECK(guest_file(*api, lease->id, "/run/startup.out") == "hello:" + token);
  CHECK(everywhere(daemon).find(token) == std::string::npos);
  REQUIRE(api->release_lease(lease->id).is_ok());

  LeaseCreateRequest once;
  once.pool = "ci";
  once.startup = StartupRequestDto{{"/bin/sleep", "2"}, {}, true};
  auto second = api->create_lease(once);
  REQUIRE(second.is_ok());
  REQUIRE(eventually(
      [&] {
        auto g = api->get_lease(second->id);
        return g.is_ok() && g->state == "released";
      },
      300s));
  auto g = api->get_lease(second->id).value();
  REQUIRE(g.startup);
  CHECK(g.startup->state == "exited");
  CHECK(g.startup->exit_code == 0);
  daemon.kill(SIGTERM);
}

TEST_CASE(
    "github: a queued job gets a runner with its JIT configuration in a fresh VM, completed "
    "releases it, bad signatures do nothing, the secret leaks nowhere",
    "[github-e2e]") {
  const std::string dir = e2e_state() + "/github";
  fs::remove_all(dir);
  fs::create_directories(dir);
  GithubStandin standin(dir);
  const int api_port = standin.port();
  const std::string secret = "whsec-" + random_hex(16);
  write_secret_file(dir + "/webhook.secret", secret);
  write_secret_file(dir + "/github.token", "github_pat_e2e");
  const std::string github = R"(
[github]
api_url = "http://127.0.0.1:)" +
                             std::to_string(api_port) + R"("
org = "octo-org"
token_file = ")" + dir + R"(/github.token"
webhook_secret_file = ")" + dir +
                             R"(/webhook.secret"
runner_group_id = 3
idle_timeout = "10m"
# The stand-in runner: records its configuration in the guest and waits for its job.
runner_command = ["/bin/sh", "-c", "echo \"$ACTIONS_RUNNER_INPUT_JITCONFIG\" > /run/runner-jitconfig; exec sleep 3600"]

[github.labels]
armhive-arm64 = "ci"
)";
  DaemonProcess daemon(dir + "/state", e2e_state() + "/images", 18481,
                       one_core_pool_toml(1) + github);
  Status started = daemon.start();
  INFO(daemon.log());
  REQUIRE(started.is_ok());
  auto api = daemon.client();
  REQUIRE(eventually(
      [&] {
        auto pools = api->pools();
        return pools.is_ok() && !pools->empty() && (*pools)[0].warm == 1;
      },
      300s));

  // A forged delivery: 401, nothing asked of GitHub, nothing leased, audited.
  const std::string queued = workflow_job_json("queued", 9001);
  CHECK(post_github_webhook(18481, dir, "d-forged", queued, webhook_signature("guess", queued)) ==
        401);
  CHECK(post_github_webhook(18481, dir, "d-unsigned", queued, "") == 401);
  std::this_thread::sleep_for(1s);
  // The calls that change something at GitHub: the reconcile passes' listings (GET) are
  // not what this test is about (daemon/github/README.md, "Healing").
  auto changes = [&standin] {
    std::vector<json> out;
    for (json& r : standin.requests()) {
      if (r["method"] != "GET") out.push_back(std::move(r));
    }
    return out;
  };
  CHECK(changes().empty());
  CHECK(api->list_leases({}).value().items.empty());
  {
    SubprocessRunner run;
    auto audit = run.run({.argv = {"sqlite3", daemon.state_dir() + "/armhive.db",
                                   "SELECT action || ' ' || detail FROM audit"}});
    REQUIRE(audit.is_ok());
    CHECK(audit->out.find("github.webhook_rejected delivery d-forged") != std::string::npos);
    CHECK(audit->out.find("github.webhook_rejected delivery d-unsigned") != std::string::npos);
  }

  // The real one.
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(post_github_webhook(18481, dir, "d-1", queued, webhook_signature(secret, queued)) == 202);
  CHECK(post_github_webhook(18481, dir, "d-1", queued, webhook_signature(secret, queued)) == 409);
  const std::string lease_id = runner_lease(*api, "9001");
  REQUIRE_FALSE(lease_id.empty());
  const double started_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  auto requests = changes();
  REQUIRE(requests.size() == 1);
  const json& r = requests[0];
  CHECK(r["method"] == "POST");
  CHECK(r["path"] == "/orgs/octo-org/actions/runners/generate-jitconfig");
  CHECK(r["authorization"] == "Bearer github_pat_e2e");
  CHECK(r["api_version"] == "2022-11-28");
  CHECK(r["body"]["name"] == "armhive-9001");
  CHECK(r["body"]["runner_group_id"] == 3);
  CHECK(r["body"]["labels"] == json::array({"self-hosted", "armhive-arm64"}));
  CHECK(r["body"]["work_folder"] == "_work");
  const std::string jit = r["encoded_jit_config"];

  // The runner in the VM got exactly that configuration.
  REQUIRE(
      eventually([&] { return guest_file(*api, lease_id, "/run/runner-jitconfig") == jit; }, 60s));
  auto lease = api->get_lease(lease_id).value();
  CHECK(lease.owner == "github");
  CHECK(lease.labels.at("github.runner") == "armhive-9001");
  CHECK(lease.labels.at("github.runner_id") == std::to_string(r["runner_id"].get<int>()));
  REQUIRE(lease.startup);
  CHECK(lease.startup->secret_env == std::vector<std::string>{"ACTIONS_RUNNER_INPUT_JITCONFIG"});
  CHECK(lease.startup->release_on_exit);
  CHECK(everywhere(daemon).find(jit) == std::string::npos);

  // The job runs, then completes: the lease ends.
  const std::string running = workflow_job_json("in_progress", 9001, "armhive-9001");
  REQUIRE(post_github_webhook(18481, dir, "d-2", running, webhook_signature(secret, running)) ==
          202);
  const std::string done = workflow_job_json("completed", 9001, "armhive-9001");
  REQUIRE(post_github_webhook(18481, dir, "d-3", done, webhook_signature(secret, done)) == 202);
  REQUIRE(eventually(
      [&] {
        auto l = api->get_lease(lease_id);
        return l.is_ok() && l->state == "released";
      },
      120s));
  CHECK(everywhere(daemon).find(jit) == std::string::npos);

  // Timings for BENCHMARKS.md: webhook -> runner started, and its parts as the daemon saw them.
  {
    SubprocessRunner run;
    auto audit = run.run({.argv = {"sqlite3", daemon.state_dir() + "/armhive.db",
                                   "SELECT detail FROM audit WHERE action = "
                                   "'github.runner_started'"}});
    REQUIRE(audit.is_ok());
    std::ofstream(dir + "/timing.json") << json{
        {"webhook_to_runner_running_s", started_s},
        {"runner_started_detail", audit->out},
        {"lease_ready_at", lease.ready_at.value_or("")},
        {"startup_started_at", lease.startup->started_at.value_or("")},
        {"lease_created_at", lease.created_at}}.dump(2);
  }
  daemon.kill(SIGTERM);
}

// curl's answer (stdout), or "" when it fails.
std::string curl(const std::vector<std::string>& args) {
  SubprocessRunner run;
  std::vector<std::string> argv = {"curl", "-fsS", "--max-time", "20"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run.run({.argv = argv, .timeout = 30s});
  return r.is_ok() && r->ok() ? r->out : std::string();
}

TEST_CASE(
    "github heals: a job whose webhook never came gets a runner, a ghost runner is deleted, "
    "GET /v1/github shows it",
    "[github-e2e]") {
  const std::string dir = e2e_state() + "/github-heal";
  fs::remove_all(dir);
  fs::create_directories(dir);
  GithubStandin standin(dir);
  const int api_port = standin.port();
  const std::string control = "http://127.0.0.1:" + std::to_string(api_port) + "/_control";
  write_secret_file(dir + "/webhook.secret", "whsec-" + random_hex(16));
  write_secret_file(dir + "/github.token", "github_pat_e2e");
  const std::string github = R"(
[github]
api_url = "http://127.0.0.1:)" +
                             std::to_string(api_port) + R"("
repo = "octo-org/example"
token_file = ")" + dir + R"(/github.token"
webhook_secret_file = ")" + dir +
                             R"(/webhook.secret"
reconcile_period = "10s"
idle_timeout = "10m"
runner_command = ["/bin/sh", "-c", "echo \"$ACTIONS_RUNNER_INPUT_JITCONFIG\" > /run/runner-jitconfig; exec sleep 3600"]

[github.labels]
armhive-arm64 = "ci"
)";
  // A runner of our naming that no lease of this armhived has: left by a VM that died.
  REQUIRE_FALSE(
      curl({"-X", "POST", "--data", R"({"add_runners": ["armhive-4242"]})", control}).empty());
  DaemonProcess daemon(dir + "/state", e2e_state() + "/images", 18482,
                       one_core_pool_toml(0) + github);
  Status started = daemon.start();
  INFO(daemon.log());
  REQUIRE(started.is_ok());
  auto api = daemon.client();

  // GitHub queues job 9100 for armhive-arm64; its webhook is lost (never sent).
  REQUIRE_FALSE(curl({"-X", "POST", "--data",
                      R"({"queue_job": {"id": 9100, "run_id": 77, "labels": ["self-hosted", )"
                      R"("armhive-arm64"]}})",
                      control})
                    .empty());
  const std::string lease_id = runner_lease(*api, "9100");
  REQUIRE_FALSE(lease_id.empty());
  // The runner in the VM has its JIT configuration, as a webhook's would.
  CHECK(eventually([&] { return !guest_file(*api, lease_id, "/run/runner-jitconfig").empty(); },
                   60s));
  bool ghost_deleted = false, jit_asked = false;
  for (const json& r : standin.requests()) {
    ghost_deleted |=
        r["method"] == "DELETE" &&
        r["path"].get<std::string>().rfind("/repos/octo-org/example/actions/runners/", 0) == 0;
    jit_asked |= r["method"] == "POST" &&
                 r["path"] == "/repos/octo-org/example/actions/runners/generate-jitconfig";
  }
  CHECK(ghost_deleted);
  CHECK(jit_asked);
  const std::string state =
      curl({"-H", "Authorization: Bearer " + daemon.token(), "http://127.0.0.1:18482/v1/github"});
  INFO(state);
  REQUIRE_FALSE(state.empty());
  json st = json::parse(state);
  CHECK(st["reconciled_jobs_total"] == 1);
  CHECK(st["ghosts_deleted_total"] == 1);
  CHECK(st["last_reconcile_error"] == "");
  // The job is done at GitHub: nothing new is made for it.
  REQUIRE_FALSE(
      curl({"-X", "POST", "--data",
            R"({"queue_job": {"id": 9100, "run_id": 77, "status": "completed"}})", control})
          .empty());
  REQUIRE(api->release_lease(lease_id).is_ok());
  daemon.kill(SIGTERM);
}

}  // namespace
}  // namespace armhive
