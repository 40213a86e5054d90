// End-to-end: a real CI job on the `ci` image, through the GitLab Runner custom executor driver
// (`armhive gitlab`), driven exactly as GitLab Runner drives it: config, prepare, `run SCRIPT
// STAGE` for every stage in the runner's order, each script shaped as the runner writes them
// for its bash shell, then cleanup. Everything the job reaches is in the "outside" namespace
// (tests/fixtures/ci-job/outside-services): the project's git remote, a Debian repository with
// its one build dependency, and the artifact store. The guest reaches it through its lease's
// NAT network only. The job on branch main passes and uploads its build; on branch broken its
// test step fails with the runner's BUILD_FAILURE_EXIT_CODE and the failing case in the log.
// Prints the stage times for BENCHMARKS.md.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/client.h"
#include "base/process_runner.h"
#include "base/sha256.h"
#include "daemon/github/webhook_signature.h"
#include "tests/support/daemon_process.h"
#include "tests/support/e2e_daemon.h"
#include "tests/support/github_standin.h"
#include "tests/support/outside_netns.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

constexpr int kApiPort = 18495;
constexpr const char* kBuildFailure = "37";
constexpr const char* kSystemFailure = "38";

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The pool of the jobs: one warm ci VM on a NAT network of its own (the job's only way out).
std::string config(const std::string& github) {
  return github + R"(
[[networks]]
name = "cijob"
mode = "nat"
bridge = "ahbr9"
cidr = "10.89.0.1/24"
dhcp_start = "10.89.0.10"
dhcp_end = "10.89.0.50"

[host.cpus]
housekeeping = "0"
dedicated = "1"

[[pools]]
name = "ci"
image = "ci"
vcpus = 1
memory_mib = 1024
network = "cijob"
max = 1
max_starting = 1
default_ttl = "30m"
max_ttl = "1h"
cpu_policy = "dedicated"
min_warm = 1
)";
}

// bash's $'...' quoting of any text (GitLab Runner's bash writer quotes the same way).
std::string ansi_c_quote(const std::string& s) {
  std::string q = "$'";
  for (char c : s) {
    if (c == '\\' || c == '\'') {
      q += '\\';
      q += c;
    } else if (c == '\n') {
      q += "\\n";
    } else {
      q += c;
    }
  }
  return q + "'";
}

// One stage's script as GitLab Runner writes it for the bash shell: the job's variables exported
// and each command echoed before it runs, all in one `eval` under `set -eo pipefail`.
std::string runner_script(const std::map<std::string, std::string>& vars,
                          const std::vector<std::string>& commands, bool in_project_dir) {
  std::string body;
  for (const auto& [k, v] : vars) body += "export " + k + "=" + ansi_c_quote(v) + "\n";
  if (in_project_dir) body += "cd \"$CI_PROJECT_DIR\"\n";
  for (const auto& c : commands) {
    body += "echo " + ansi_c_quote("\x1b[32;1m$ " + c + "\x1b[0;m") + "\n" + c + "\n";
  }
  return "#!/usr/bin/env bash\n\nset -eo pipefail\nset +o noclobber\n: | eval " +
         ansi_c_quote(body) + "\nexit 0\n";
}

struct StageRun {
  int exit_code = -1;
  std::string out, err;
  double seconds = 0;
};

struct Job {
  std::string id;
  std::string branch;
  std::string server;  // outside-services' URL
  std::string cli = ARMHIVE_CLI_PATH;
  std::map<std::string, std::string> cli_env;  // ARMHIVE_SERVER, ARMHIVE_TOKEN, HOME
  std::string scripts_dir;

  // The CI variables of the job (GitLab's names); the runner gives them to the driver as
  // CUSTOM_ENV_ copies and writes them into every script.
  std::map<std::string, std::string> ci_vars() const {
    return {{"CI", "true"},
            {"GITLAB_CI", "true"},
            {"CI_JOB_ID", id},
            {"CI_PIPELINE_ID", "700"},
            {"CI_PROJECT_ID", "42"},
            {"CI_PROJECT_PATH", "group/crcframe"},
            {"CI_PROJECT_DIR", "/builds/group/crcframe"},
            {"CI_COMMIT_REF_NAME", branch},
            {"CI_REPOSITORY_URL", server + "/git/project.git"},
            {"ARMHIVE_POOL", "ci"},
            {"JOB_SERVER", server}};
  }

  // What GitLab Runner gives the driver: the job response it writes (JOB_RESPONSE_FILE: the
  // job's identity), CUSTOM_ENV_ copies of the job's variables, the failure codes.
  std::map<std::string, std::string> driver_env() const {
    std::map<std::string, std::string> e = cli_env;
    nlohmann::json response = {{"id", std::stoll(id)}, {"job_info", {{"project_id", 42}}}};
    for (const auto& [k, v] : ci_vars())
      response["variables"].push_back({{"key", k}, {"value", v}});
    const std::string response_path = scripts_dir + "/" + id + "-job-response.json";
    std::ofstream(response_path) << response.dump();
    e["JOB_RESPONSE_FILE"] = response_path;
    for (const auto& [k, v] : ci_vars()) e["CUSTOM_ENV_" + k] = v;
    e["BUILD_FAILURE_EXIT_CODE"] = kBuildFailure;
    e["SYSTEM_FAILURE_EXIT_CODE"] = kSystemFailure;
    return e;
  }

  StageRun driver(std::vector<std::string> args) const {
    args.insert(args.begin(), cli);
    SubprocessRunner run;
    const auto t0 = SteadyClock::now();
    auto r = run.run({.argv = args, .env = driver_env(), .timeout = 20min});
    REQUIRE(r.is_ok());
    return {r->exit_code, r->out, r->err,
            std::chrono::duration<double>(SteadyClock::now() - t0).count()};
  }

  StageRun stage(const std::string& name, const std::vector<std::string>& commands) const {
    const std::string path = scripts_dir + "/" + id + "-" + name;
    std::ofstream(path) << runner_script(ci_vars(), commands,
                                         name != "prepare_script" && name != "get_sources");
    return driver({"gitlab", "run", path, name});
  }
};

// The stages of a job in GitLab Runner's order; those after a failed step_script are the
// runner's failure branch. What each runs is what the runner or the job's .gitlab-ci.yml would.
struct JobResult {
  std::map<std::string, StageRun> stages;
  std::string log;  // every stage's output in order, as the job log shows it
  int step_exit = -1;
};

JobResult run_job(const Job& job) {
  JobResult r;
  // Runs a stage; a stage the driver could not run at all (SYSTEM_FAILURE_EXIT_CODE) is
  // reported with the driver's words.
  auto add = [&](const std::string& name, const std::vector<std::string>& commands) {
    StageRun s = job.stage(name, commands);
    r.log += s.out + s.err;  // the runner's job log has both
    r.stages[name] = s;
    if (s.exit_code == std::stoi(kSystemFailure)) FAIL_CHECK(name << ": " << s.err);
    return s.exit_code;
  };
  CHECK(add("prepare_script", {"echo \"Running on $(hostname) via armhive...\""}) == 0);
  // As the runner fetches (GIT_STRATEGY fetch; no --depth: a dumb-HTTP remote cannot be
  // fetched shallow): a fresh repository, the ref fetched, checked out.
  CHECK(add("get_sources",
            {"rm -rf \"$CI_PROJECT_DIR\" && mkdir -p \"$CI_PROJECT_DIR\"",
             "git -C \"$CI_PROJECT_DIR\" init -q",
             "git -C \"$CI_PROJECT_DIR\" remote add origin \"$CI_REPOSITORY_URL\"",
             "git -C \"$CI_PROJECT_DIR\" fetch -q origin "
             "\"+refs/heads/$CI_COMMIT_REF_NAME:refs/remotes/origin/$CI_COMMIT_REF_NAME\"",
             "git -C \"$CI_PROJECT_DIR\" checkout -q -f \"origin/$CI_COMMIT_REF_NAME\"",
             "echo \"== commit $(git -C \"$CI_PROJECT_DIR\" rev-parse HEAD)\""}) == 0);
  CHECK(add("restore_cache", {"echo 'No cache to restore'"}) == 0);
  CHECK(add("download_artifacts", {"echo 'No artifacts to download'"}) == 0);
  // The job's script: its build dependency from the outside repository only, then configure,
  // build and test. Each step prints the guest's clock, for the stage times.
  const std::string list = "/etc/apt/sources.list.d/outside.list";
  const std::string apt =
      "apt-get -q -o Dir::Etc::SourceList=" + list + " -o Dir::Etc::SourceParts=/dev/null";
  r.step_exit = add(
      "step_script",
      {"echo \"== step apt $(date +%s.%N)\"",
       "echo \"deb [trusted=yes] $JOB_SERVER/debian ./\" > " + list,
       "DEBIAN_FRONTEND=noninteractive " + apt + " --error-on=any update",
       "DEBIAN_FRONTEND=noninteractive " + apt + " install -y --no-install-recommends zlib1g-dev",
       "echo \"== step configure $(date +%s.%N)\"",
       "cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo",
       "echo \"== step build $(date +%s.%N)\"", "cmake --build build",
       "echo \"== step test $(date +%s.%N)\"", "ctest --test-dir build --output-on-failure",
       "echo \"== step end $(date +%s.%N)\""});
  CHECK(add("after_script", {"echo \"after_script: $(ls build | wc -l) entries in build\""}) == 0);
  const bool ok = r.step_exit == 0;
  CHECK(add(ok ? "archive_cache" : "archive_cache_on_failure", {"echo 'No cache to save'"}) == 0);
  if (ok) {
    // What the runner's artifacts uploader does, to the outside store: the build as a tarball.
    CHECK(add("upload_artifacts_on_success",
              {"echo \"== step upload $(date +%s.%N)\"",
               "name=project-$CI_JOB_ID.tar.gz; out=/tmp/project-$CI_JOB_ID; mkdir -p $out",
               "cp build/libcrcframe.a build/crcframe_test $out/",
               "printf 'job %s\\ncommit %s\\nmachine %s\\n' \"$CI_JOB_ID\" "
               "\"$(git rev-parse HEAD)\" \"$(uname -m)\" > $out/build-info.txt",
               "tar czf /tmp/$name -C /tmp project-$CI_JOB_ID",
               "curl -fsS -T /tmp/$name \"$JOB_SERVER/artifacts/$name\"; echo",
               "echo \"artifact $name sha256 $(sha256sum /tmp/$name | cut -d' ' -f1)\"",
               "echo \"== step end $(date +%s.%N)\""}) == 0);
  } else {
    CHECK(add("upload_artifacts_on_failure", {"echo 'No artifacts to upload on failure'"}) == 0);
  }
  CHECK(add("cleanup_file_variables", {"true"}) == 0);
  return r;
}

// The guest-clock time of the "== step NAME T" line, or -1.
double step_time(const std::string& log, const std::string& name) {
  // At the start of a line: the runner's echo of the command has the tag too, unexpanded.
  const std::string tag = "\n== step " + name + " ";
  size_t at = log.find(tag);
  if (at == std::string::npos) return -1;
  return std::atof(log.c_str() + at + tag.size());
}

std::string sha256_of(const std::string& path) {
  auto sum = sha256_file(path);
  REQUIRE(sum.is_ok());
  return *sum;
}

TEST_CASE("a real CI job through the GitLab custom executor on the ci image: passing, failing",
          "[ci-job]") {
  // The job's side (scripts, outside services) here; armhived's state (which DaemonProcess
  // starts afresh) below it.
  const std::string state = e2e_state() + "/ci-job";
  const std::string daemon_state = state + "/armhived";
  fs::remove_all(state);
  fs::create_directories(state + "/scripts");
  const std::string fixture = env_or("ARMHIVE_SOURCE_DIR", ".") + "/tests/fixtures/ci-job";
  const std::string debs = env_or("ARMHIVE_E2E_CI_JOB_DEBS", "");
  REQUIRE_FALSE(debs.empty());  // the "e2e: fetch ci-job packages" fixture's directory

  // Outside: the git remote, the apt repository and the artifact store on one address.
  OutsideNamespace out("armhive-e2e-out");
  pid_t services = out.spawn({fixture + "/outside-services", "serve", "--listen",
                              std::string(OutsideNamespace::kOutsideAddress) + ":0", "--state",
                              state + "/outside", "--debs", debs},
                             state + "/outside.log");
  std::string server;
  REQUIRE(eventually(
      [&] {
        std::string log = read_file(state + "/outside.log");
        size_t at = log.find("ready http://");
        size_t end = log.find('\n', at);
        if (at == std::string::npos || end == std::string::npos) return false;
        server = log.substr(at + 6, end - at - 6);
        return true;
      },
      60s));
  INFO("outside services at " << server);
  std::string main_commit;
  {
    std::istringstream refs(read_file(state + "/outside/git/project.git/info/refs"));
    std::string sha, ref;
    while (refs >> sha >> ref) {
      if (ref == "refs/heads/main") main_commit = sha;
    }
  }
  REQUIRE(main_commit.size() == 40);

  // GitHub's API on loopback (armhived calls it); the runner in the guest reports to the
  // outside services, GitHub's job service as far as a runner sees it.
  const std::string gh_dir = state + "/github";
  fs::create_directories(gh_dir);
  GithubStandin standin(gh_dir);
  const std::string secret = "whsec-ci-job-e2e";
  write_secret_file(gh_dir + "/webhook.secret", secret);
  write_secret_file(gh_dir + "/github.token", "github_pat_e2e");
  const std::string github =
      "[github]\napi_url = \"http://127.0.0.1:" + std::to_string(standin.port()) +
      "\"\norg = \"octo-org\"\ntoken_file = \"" + gh_dir +
      "/github.token\"\nwebhook_secret_file = \"" + gh_dir +
      "/webhook.secret\"\nrunner_group_id = 3\nidle_timeout = \"20m\"\n"
      // One reconcile pass, at the start: the stand-in cannot tell that a JIT runner
      // deregistered itself after its job, so a later pass would delete it as a ghost, and
      // this test checks that armhived deletes none (healing: tests/daemon/github).
      "reconcile_period = \"1h\"\n"
      "runner_command = [\"/bin/bash\", \"-c\", \"curl -fsS -o "
      "/tmp/runner-standin " +
      server + "/jobs/runner-standin && exec bash /tmp/runner-standin " + server +
      "\"]\n\n[github.labels]\narmhive-arm64 = \"ci\"\n";

  DaemonProcess daemon(daemon_state,
                       env_or("ARMHIVE_E2E_CI_CATALOG", "/var/cache/armhive/e2e-catalog/ci"),
                       kApiPort, config(github));
  Status started = daemon.start();
  INFO(started.to_string());
  REQUIRE(started.is_ok());
  auto api = daemon.client();

  Job job;
  job.server = server;
  job.cli_env = {{"ARMHIVE_SERVER", "http://127.0.0.1:" + std::to_string(kApiPort)},
                 {"ARMHIVE_TOKEN", daemon.token()},
                 {"HOME", daemon_state}};
  job.scripts_dir = state + "/scripts";

  auto config_stage = job.driver({"gitlab", "config"});
  REQUIRE(config_stage.exit_code == 0);
  CHECK_THAT(config_stage.out, Catch::Contains("\"builds_dir\":\"/builds\""));

  // 1. Branch main: passes, the artifact lands outside.
  job.id = "9001";
  job.branch = "main";
  auto prepare = job.driver({"gitlab", "prepare"});
  INFO(prepare.err);
  REQUIRE(prepare.exit_code == 0);
  REQUIRE(gitlab_job_leases(*api, job.id, true).size() == 1);
  const std::string lease_id = gitlab_job_leases(*api, job.id, true)[0].id;
  JobResult passing = run_job(job);
  INFO(passing.log);
  CHECK(passing.step_exit == 0);
  CHECK_THAT(passing.log, Catch::Contains("Running on armhive-"));
  CHECK_THAT(passing.log, Catch::Contains("== commit " + main_commit));
  CHECK_THAT(passing.log, Catch::Contains("Setting up zlib1g-dev"));
  CHECK_THAT(passing.log, Catch::Contains("100% tests passed, 0 tests failed out of 1"));
  CHECK_THAT(passing.log, Catch::Contains("$ cmake --build build"));  // the runner's echo
  const std::string artifact = state + "/outside/artifacts/project-9001.tar.gz";
  REQUIRE(fs::exists(artifact));
  CHECK_THAT(passing.log,
             Catch::Contains("artifact project-9001.tar.gz sha256 " + sha256_of(artifact)));
  SubprocessRunner run;
  auto info = run.run({.argv = {"tar", "-xzOf", artifact, "project-9001/build-info.txt"}});
  REQUIRE(info.is_ok());
  CHECK(info->out == "job 9001\ncommit " + main_commit + "\nmachine aarch64\n");
  auto cleanup = job.driver({"gitlab", "cleanup"});
  CHECK(cleanup.exit_code == 0);
  CHECK(eventually([&] { return gitlab_job_leases(*api, job.id, true).empty(); }, 120s));

  // The stage times, from the guest's clock.
  const double apt_s = step_time(passing.log, "configure") - step_time(passing.log, "apt");
  const double configure_s = step_time(passing.log, "build") - step_time(passing.log, "configure");
  const double build_s = step_time(passing.log, "test") - step_time(passing.log, "build");
  std::printf(
      "ci job e2e (GitLab, TCG): prepare %.1f s (the pool's first VM: a cold boot), "
      "get_sources (clone) %.1f s, step_script %.1f s: apt %.1f s, configure %.1f s, build "
      "%.1f s, test %.1f s; upload stage %.1f s, cleanup %.1f s\n",
      prepare.seconds, passing.stages["get_sources"].seconds, passing.stages["step_script"].seconds,
      apt_s, configure_s, build_s, step_time(passing.log, "end") - step_time(passing.log, "test"),
      passing.stages["upload_artifacts_on_success"].seconds, cleanup.seconds);

  // Every request of the job came in through the NAT: from the host's side of the veth pair,
  // never from the guest's own address.
  const std::string requests = read_file(state + "/outside/requests.log");
  INFO(requests);
  for (const char* path : {" GET /git/project.git/info/refs", " GET /debian/./Packages",
                           " GET /debian/./zlib1g-dev_", " PUT /artifacts/project-9001.tar.gz"}) {
    CHECK_THAT(requests, Catch::Contains(std::string(OutsideNamespace::kHostAddress) + path));
  }
  CHECK(requests.find(" 10.89.0.") == std::string::npos);

  // What the job used, final once its lease ended.
  auto ended = api->get_lease(lease_id);
  REQUIRE(ended.is_ok());
  REQUIRE(ended->usage.has_value());
  CHECK(ended->usage->final);
  CHECK(ended->usage->cpu_seconds > 1);
  CHECK(ended->usage->net_rx_bytes > 900'000);  // at least zlib1g-dev's .deb came in
  CHECK(ended->usage->net_tx_bytes > 0);
  std::printf("ci job e2e: the passing job's lease used %.1f CPU s in %.1f s\n",
              ended->usage->cpu_seconds, ended->usage->wall_seconds);

  // 2. Branch broken: the test step fails; the runner gets BUILD_FAILURE_EXIT_CODE, the log
  // names the failing case, and the failure branch of the stages runs.
  job.id = "9002";
  job.branch = "broken";
  prepare = job.driver({"gitlab", "prepare"});
  INFO(prepare.err);
  REQUIRE(prepare.exit_code == 0);
  JobResult failing = run_job(job);
  INFO(failing.log);
  CHECK(failing.step_exit == std::stoi(kBuildFailure));
  CHECK_THAT(failing.log, Catch::Contains("not ok - frame_detects_corruption:"));
  CHECK_THAT(failing.log, Catch::Contains("ok - crc32_matches_zlib"));
  CHECK_THAT(failing.stages["step_script"].err, Catch::Contains("stage step_script failed"));
  CHECK(failing.stages.count("upload_artifacts_on_failure") == 1);
  CHECK_FALSE(fs::exists(state + "/outside/artifacts/project-9002.tar.gz"));
  CHECK(job.driver({"gitlab", "cleanup"}).exit_code == 0);
  CHECK(eventually([&] { return gitlab_job_leases(*api, job.id, true).empty(); }, 120s));

  // 3. GitHub: a signed workflow_job webhook -> generate-jitconfig on the API stand-in -> a
  // lease whose startup command is the runner (tests/fixtures/ci-job/runner-standin) -> the same
  // job -> the runner exits and its lease ends -> `completed` -> the provider lets it go.
  const std::string outside = state + "/outside";
  auto runner_events = [&] {
    std::vector<nlohmann::json> events;
    std::istringstream lines(read_file(outside + "/runner-events.jsonl"));
    std::string line;
    while (std::getline(lines, line)) events.push_back(nlohmann::json::parse(line));
    return events;
  };
  struct GithubRun {
    nlohmann::json started, completed;  // the runner's events
    std::string jit;                    // the JIT configuration the stand-in handed out
    std::string lease_id;
    double webhook_to_started_s = -1;  // both by the host's clock
  };
  auto github_job = [&](int64_t id, const std::string& branch) {
    GithubRun run;
    std::ofstream(outside + "/runner-job") << branch << "\n";
    const size_t seen = runner_events().size();
    const std::string queued = workflow_job_json("queued", id);
    const double t0 =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    REQUIRE(post_github_webhook(kApiPort, gh_dir, "d-queued-" + std::to_string(id), queued,
                                webhook_signature(secret, queued)) == 202);
    const bool completed = eventually(
        [&] {
          auto events = runner_events();
          for (size_t i = seen; i < events.size(); ++i) {
            const auto& e = events[i];
            if (e["event"]["event"] == "started" && run.started.is_null()) run.started = e;
            if (e["event"]["event"] == "completed") run.completed = e;
          }
          return !run.completed.is_null();
        },
        1200s, 1s);
    INFO(read_file(outside + "/runner-events.jsonl"));
    REQUIRE(completed);
    REQUIRE_FALSE(run.started.is_null());
    run.webhook_to_started_s = run.started["time"].get<double>() - t0;
    for (const auto& r : standin.requests()) {
      if (r["path"] == "/orgs/octo-org/actions/runners/generate-jitconfig" &&
          r["body"]["name"] == "armhive-" + std::to_string(id)) {
        run.jit = r["encoded_jit_config"];
      }
    }
    REQUIRE_FALSE(run.jit.empty());
    LeaseQuery q;
    q.labels = {{"github.job", std::to_string(id)}};
    auto page = api->list_leases(q);
    REQUIRE(page.is_ok());
    REQUIRE(page->items.size() == 1);
    run.lease_id = page->items[0].id;
    // The runner's exit ended its lease (release_on_exit); GitHub then says the job completed.
    CHECK(eventually(
        [&] {
          auto l = api->get_lease(run.lease_id);
          return l.is_ok() && l->state == "released";
        },
        120s));
    const std::string runner = "armhive-" + std::to_string(id);
    for (const char* action : {"in_progress", "completed"}) {
      const std::string body = workflow_job_json(action, id, runner);
      CHECK(post_github_webhook(kApiPort, gh_dir,
                                std::string("d-") + action + "-" + std::to_string(id), body,
                                webhook_signature(secret, body)) == 202);
    }
    return run;
  };

  CHECK(eventually(
      [&] {
        auto pools = api->pools();
        return pools.is_ok() && (*pools)[0].warm == 1;
      },
      600s, 1s));
  GithubRun gh_pass = github_job(9101, "main");
  // The runner read exactly the configuration the stand-in handed out, and ran the job on it.
  CHECK(gh_pass.started["event"]["jit_sha256"] == sha256_hex(gh_pass.jit));
  CHECK(gh_pass.completed["event"]["exit_code"] == 0);
  const std::string gh_job = "gh-" + sha256_hex(gh_pass.jit).substr(0, 12);
  const std::string gh_log = read_file(outside + "/artifacts/log-" + gh_job + ".txt");
  INFO(gh_log);
  CHECK_THAT(gh_log, Catch::Contains("== step done"));
  const std::string gh_artifact = outside + "/artifacts/project-" + gh_job + ".tar.gz";
  REQUIRE(fs::exists(gh_artifact));
  CHECK_THAT(gh_log, Catch::Contains("artifact project-" + gh_job + ".tar.gz sha256 " +
                                     sha256_of(gh_artifact)));
  CHECK_THAT(gh_log, Catch::Contains("commit " + main_commit));
  CHECK_THAT(gh_log, Catch::Contains("machine aarch64"));
  // The JIT configuration is a secret: in no request the guest made to the outside.
  CHECK(read_file(outside + "/requests.log").find(gh_pass.jit) == std::string::npos);

  // At once after it: the pool's VM is still booting, so the webhook waits for a cold boot.
  GithubRun gh_fail = github_job(9102, "broken");
  CHECK(gh_fail.completed["event"]["exit_code"] != 0);
  const std::string fail_log =
      read_file(outside + "/artifacts/log-gh-" + sha256_hex(gh_fail.jit).substr(0, 12) + ".txt");
  CHECK_THAT(fail_log, Catch::Contains("not ok - frame_detects_corruption:"));
  CHECK(fail_log.find("== step package") == std::string::npos);
  std::printf(
      "ci job e2e (GitHub, TCG): webhook -> runner's first step %.1f s with a warm VM, %.1f s "
      "right after a job (the refill still booting); runner started -> completed %.1f s "
      "(main), %.1f s (broken)\n",
      gh_pass.webhook_to_started_s, gh_fail.webhook_to_started_s,
      gh_pass.completed["time"].get<double>() - gh_pass.started["time"].get<double>(),
      gh_fail.completed["time"].get<double>() - gh_fail.started["time"].get<double>());
  // A runner that ran its job is GitHub's to remove (JIT runners are deleted after their one
  // job); armhived asked GitHub to delete none of them.
  for (const auto& r : standin.requests()) CHECK(r["method"] != "DELETE");

  // Nothing left behind: no lease active, and once the pool has refilled, one VM's files (the
  // warm VM's) and no forward.
  CHECK(eventually(
      [&] {
        auto pools = api->pools();
        return pools.is_ok() && (*pools)[0].warm == 1 && (*pools)[0].leased == 0;
      },
      600s, 1s));
  CHECK(vm_files(daemon_state).size() == 1);
  LeaseQuery active;
  active.active = true;
  auto left = api->list_leases(active);
  REQUIRE(left.is_ok());
  CHECK(left->items.empty());

  daemon.kill(SIGTERM);
  out.kill(services);
}

}  // namespace
}  // namespace armhive
