// The GitHub REST client against the loopback stand-in (github_api_standin.py). As a GitHub
// App (the stand-in checks the JWT's RS256 signature with openssl against the App's public
// key): the installation token is bought once and used for the runner calls; a wrong key gets
// 401. With a token: runners listed page by page, a repository's queued jobs, GitHub's
// rate-limit headers read, a 429 with Retry-After (seconds or an HTTP date) and an exhausted
// window backed off, secondary limits in a row backed off longer each time.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "daemon/github/github_api.h"
#include "tests/support/manual_clock.h"

extern char** environ;

namespace armhive {
namespace {

namespace fs = std::filesystem;

std::string pem_of(EVP_PKEY* key, bool private_part) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (private_part) {
    PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  } else {
    PEM_write_bio_PUBKEY(bio, key);
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

struct StandIn {
  fs::path dir = fs::temp_directory_path() / ("armhive-gh-app-" + std::to_string(::getpid()));
  pid_t pid = -1;
  int port = 0;
  // With `public_pem`, the stand-in knows GitHub App 4242 by it; without, no App.
  explicit StandIn(const std::string& public_pem = {}) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string script =
        std::string(ARMHIVE_SOURCE_DIR) + "/tests/daemon/github/github_api_standin.py";
    std::vector<std::string> args = {"python3", script, (dir / "port").string(),
                                     (dir / "record").string()};
    if (!public_pem.empty()) {
      std::ofstream(dir / "app.pub") << public_pem;
      args.push_back("4242");
      args.push_back((dir / "app.pub").string());
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    REQUIRE(posix_spawnp(&pid, "python3", nullptr, nullptr, argv.data(), environ) == 0);
    for (int i = 0; i < 100 && !fs::exists(dir / "port"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::ifstream(dir / "port") >> port;
    REQUIRE(port > 0);
  }
  ~StandIn() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // POST /_control (the stand-in's test hook) with `body`, through the client's own stack
  // would be circular: python's urllib does it.
  void control(const nlohmann::json& body) const {
    const std::string code =
        "import sys,urllib.request;urllib.request.urlopen(urllib.request.Request("
        "'http://127.0.0.1:" +
        std::to_string(port) + "/_control',data=sys.argv[1].encode(),method='POST')).read()";
    pid_t child = -1;
    std::vector<std::string> args = {"python3", "-c", code, body.dump()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    REQUIRE(posix_spawnp(&child, "python3", nullptr, nullptr, argv.data(), environ) == 0);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
  }
  std::vector<nlohmann::json> record() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(dir / "record");
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }
};

GithubApiOptions app_options(int port, const std::string& private_pem) {
  GithubApiOptions o;
  o.api_url = "http://127.0.0.1:" + std::to_string(port);
  o.scope = "orgs/octo-org";
  o.app_id = 4242;
  o.app_private_key = private_pem;
  o.installation_id = 77;
  return o;
}

TEST_CASE("github api: a GitHub App buys one installation token and uses it", "[github][app]") {
  EVP_PKEY* key = EVP_RSA_gen(2048);
  EVP_PKEY* other = EVP_RSA_gen(2048);
  REQUIRE(key != nullptr);
  REQUIRE(other != nullptr);
  StandIn standin(pem_of(key, false));

  auto api = make_github_api(app_options(standin.port, pem_of(key, true)));
  REQUIRE(api.is_ok());
  JitRequest req;
  req.name = "armhive-1";
  req.labels = {"self-hosted", "armhive-arm64"};
  auto first = (*api)->generate_jitconfig(req);
  INFO(first.status().to_string());
  REQUIRE(first.is_ok());
  REQUIRE((*api)->generate_jitconfig(req).is_ok());
  auto rec = standin.record();
  REQUIRE(rec.size() == 3);
  CHECK(rec[0]["path"] == "/app/installations/77/access_tokens");
  CHECK(rec[0]["status"] == 201);
  const std::string token = rec[0]["installation_token"];
  for (size_t i : {1u, 2u}) {
    CHECK(rec[i]["path"] == "/orgs/octo-org/actions/runners/generate-jitconfig");
    CHECK(rec[i]["authorization"] == "Bearer " + token);  // the cached installation token
  }

  // Signed with a key GitHub does not know: 401, as the stand-in checks the signature.
  auto wrong = make_github_api(app_options(standin.port, pem_of(other, true)));
  REQUIRE(wrong.is_ok());
  auto refused = (*wrong)->generate_jitconfig(req);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == ErrorCode::kPermissionDenied);
  CHECK_THAT(refused.status().message(), Catch::Contains("installation access token"));
  EVP_PKEY_free(key);
  EVP_PKEY_free(other);

  auto no_key = make_github_api(app_options(standin.port, "not a key"));
  CHECK(no_key.status().field() == "github.app_private_key_file");
}

TEST_CASE("github api: credentials a reload replaces are used from the next call",
          "[github][app][reload]") {
  EVP_PKEY* key = EVP_RSA_gen(2048);
  EVP_PKEY* other = EVP_RSA_gen(2048);
  REQUIRE(key != nullptr);
  REQUIRE(other != nullptr);
  StandIn standin(pem_of(key, false));
  JitRequest req;
  req.name = "armhive-1";
  req.labels = {"self-hosted", "armhive-arm64"};

  // Started with a key GitHub does not know: refused until the right one is set.
  auto api = make_github_api(app_options(standin.port, pem_of(other, true)));
  REQUIRE(api.is_ok());
  CHECK((*api)->generate_jitconfig(req).status().code() == ErrorCode::kPermissionDenied);
  GithubCredentials right{"", 4242, pem_of(key, true), 77};
  REQUIRE(check_github_credentials(right).is_ok());
  REQUIRE((*api)->set_credentials(right).is_ok());
  auto jit = (*api)->generate_jitconfig(req);
  INFO(jit.status().to_string());
  REQUIRE(jit.is_ok());
  // Then a fine-grained token instead of the App: no installation token is bought any more.
  GithubCredentials token{"github_pat_rotated", 0, "", 0};
  REQUIRE(check_github_credentials(token).is_ok());
  REQUIRE((*api)->set_credentials(token).is_ok());
  REQUIRE((*api)->generate_jitconfig(req).is_ok());
  auto rec = standin.record();
  REQUIRE(rec.size() == 4);
  CHECK(rec[0]["status"] == 401);
  CHECK(rec[1]["path"] == "/app/installations/77/access_tokens");
  CHECK(rec[1]["status"] == 201);
  CHECK(rec[2]["authorization"] == "Bearer " + rec[1]["installation_token"].get<std::string>());
  CHECK(rec[3]["authorization"] == "Bearer github_pat_rotated");
  EVP_PKEY_free(key);
  EVP_PKEY_free(other);

  // What a reload refuses before it applies anything.
  CHECK(check_github_credentials({"", 4242, "not a key", 77}).field() ==
        "github.app_private_key_file");
  CHECK(check_github_credentials({"two words", 0, "", 0}).field() == "github.token_file");
  CHECK(check_github_credentials({"", 0, "", 0}).field() == "github.token_file");
}

GithubApiOptions token_options(int port, const std::string& scope, const Clock* clock) {
  GithubApiOptions o;
  o.api_url = "http://127.0.0.1:" + std::to_string(port);
  o.scope = scope;
  o.token = "github_pat_itest";
  o.clock = clock;
  return o;
}

TEST_CASE("github api: runners are listed page by page, as GitHub lists them", "[github][heal]") {
  StandIn standin;
  std::vector<std::string> names;
  for (int i = 0; i < 230; ++i) names.push_back("elsewhere-" + std::to_string(i));
  standin.control({{"add_runners", names}});
  auto api = make_github_api(token_options(standin.port, "orgs/octo-org", nullptr));
  REQUIRE(api.is_ok());
  JitRequest req;
  req.name = "armhive-1";
  req.labels = {"self-hosted", "armhive-arm64"};
  auto jit = (*api)->generate_jitconfig(req);
  REQUIRE(jit.is_ok());

  auto listed = (*api)->list_runners();
  INFO(listed.status().to_string());
  REQUIRE(listed.is_ok());
  REQUIRE(listed->size() == 231);
  CHECK((*listed)[0].name == "elsewhere-0");
  CHECK((*listed)[0].status == "offline");
  CHECK((*listed)[0].labels == std::vector<std::string>{"self-hosted"});
  CHECK(listed->back().id == jit->runner_id);
  CHECK(listed->back().name == "armhive-1");
  CHECK(listed->back().labels == std::vector<std::string>{"self-hosted", "armhive-arm64"});
  std::vector<std::string> paths;
  for (const auto& r : standin.record()) {
    if (r["method"] == "GET") paths.push_back(r["path"]);
  }
  CHECK(paths == std::vector<std::string>{"/orgs/octo-org/actions/runners?per_page=100&page=1",
                                          "/orgs/octo-org/actions/runners?per_page=100&page=2",
                                          "/orgs/octo-org/actions/runners?per_page=100&page=3"});

  // GitHub forgets one (removed by hand); a deleted one goes too.
  standin.control({{"forget_runner", jit->runner_id}});
  REQUIRE((*api)->delete_runner(listed->front().id).is_ok());
  auto again = (*api)->list_runners();
  REQUIRE(again.is_ok());
  CHECK(again->size() == 229);
  for (const auto& r : *again) CHECK(r.name != "armhive-1");
}

TEST_CASE("github api: a repository's queued jobs are listed from its queued and running runs",
          "[github][heal]") {
  StandIn standin;
  standin.control({{"queue_job", {{"id", 101}, {"run_id", 11}, {"labels", {"self-hosted"}}}}});
  standin.control(
      {{"queue_job", {{"id", 102}, {"run_id", 11}, {"labels", {"x"}}, {"status", "in_progress"}}}});
  standin.control(
      {{"queue_job", {{"id", 103}, {"run_id", 12}, {"labels", {"self-hosted", "armhive-arm64"}}}}});
  auto api = make_github_api(token_options(standin.port, "repos/octo-org/example", nullptr));
  REQUIRE(api.is_ok());
  // Run 13 is in progress (job 104 runs) with job 105 still waiting for a runner.
  standin.control(
      {{"queue_job", {{"id", 104}, {"run_id", 13}, {"labels", {"x"}}, {"status", "in_progress"}}}});
  standin.control({{"queue_job", {{"id", 105}, {"run_id", 13}, {"labels", {"armhive-arm64"}}}}});
  auto queued = (*api)->list_queued_jobs("octo-org/example");
  INFO(queued.status().to_string());
  REQUIRE(queued.is_ok());
  REQUIRE(queued->size() == 3);
  CHECK((*queued)[0].job_id == 101);
  CHECK((*queued)[0].run_id == 11);
  CHECK((*queued)[0].labels == std::vector<std::string>{"self-hosted"});
  CHECK((*queued)[1].job_id == 103);
  CHECK((*queued)[1].run_id == 12);
  CHECK((*queued)[1].labels == std::vector<std::string>{"self-hosted", "armhive-arm64"});
  CHECK((*queued)[2].job_id == 105);
  CHECK((*queued)[2].run_id == 13);
  auto rec = standin.record();
  // 2 run lists + one job list per run (11 is in both lists, listed once).
  REQUIRE(rec.size() == 5);
  CHECK(rec[0]["path"] == "/repos/octo-org/example/actions/runs?status=queued&per_page=100");
  CHECK(rec[1]["path"] == "/repos/octo-org/example/actions/runs?status=in_progress&per_page=100");
  CHECK(rec[2]["path"] == "/repos/octo-org/example/actions/runs/11/jobs?per_page=100&page=1");
  CHECK(rec[3]["path"] == "/repos/octo-org/example/actions/runs/12/jobs?per_page=100&page=1");
  CHECK(rec[4]["path"] == "/repos/octo-org/example/actions/runs/13/jobs?per_page=100&page=1");
}

TEST_CASE("github api: an organisation lists the queued jobs of the repositories it is asked for",
          "[github][heal]") {
  StandIn standin;
  standin.control(
      {{"queue_job",
        {{"id", 201}, {"run_id", 21}, {"labels", {"armhive-arm64"}}, {"repo", "octo-org/app"}}}});
  standin.control(
      {{"queue_job",
        {{"id", 202}, {"run_id", 22}, {"labels", {"armhive-arm64"}}, {"repo", "octo-org/lib"}}}});
  standin.control({{"missing_repo", "octo-org/gone"}});
  auto api = make_github_api(token_options(standin.port, "orgs/octo-org", nullptr));
  REQUIRE(api.is_ok());

  // GitHub compares names without regard to case; the path is the name as configured.
  auto app = (*api)->list_queued_jobs("Octo-Org/App");
  INFO(app.status().to_string());
  REQUIRE(app.is_ok());
  REQUIRE(app->size() == 1);
  CHECK((*app)[0].job_id == 201);
  CHECK((*app)[0].run_id == 21);
  auto rec = standin.record();
  REQUIRE(rec.size() == 3);
  CHECK(rec[0]["path"] == "/repos/Octo-Org/App/actions/runs?status=queued&per_page=100");
  CHECK(rec[1]["path"] == "/repos/Octo-Org/App/actions/runs?status=in_progress&per_page=100");
  CHECK(rec[2]["path"] == "/repos/Octo-Org/App/actions/runs/21/jobs?per_page=100&page=1");

  // A repository GitHub does not show: kNotFound, naming the call and GitHub's message.
  auto gone = (*api)->list_queued_jobs("octo-org/gone");
  REQUIRE_FALSE(gone.is_ok());
  CHECK(gone.status().code() == ErrorCode::kNotFound);
  CHECK_THAT(gone.status().message(), Catch::Contains("HTTP 404 (Not Found)"));
  // Names that are not OWNER/NAME never reach GitHub (they would be a URL's path).
  for (const char* bad : {"octo-org", "octo-org/", "octo-org/a/b", "../x", "octo-org/..",
                          "octo-org/a b", "octo-org/a?b"}) {
    INFO(bad);
    CHECK((*api)->list_queued_jobs(bad).status().code() == ErrorCode::kInvalidArgument);
  }
  CHECK(standin.record().size() == 4);
}

TEST_CASE("github api: rate-limit headers are read, a 429 with Retry-After is honoured",
          "[github][heal]") {
  StandIn standin;
  ManualClock clock(SystemClock().now());
  auto api = make_github_api(token_options(standin.port, "orgs/octo-org", &clock));
  REQUIRE(api.is_ok());
  CHECK((*api)->rate_limit().remaining == -1);  // nothing said yet
  REQUIRE((*api)->list_runners().is_ok());
  GithubRateLimit seen = (*api)->rate_limit();
  CHECK(seen.remaining == 4999);
  CHECK(seen.reset > SystemClock().now());
  CHECK(seen.backoff_until == TimePoint{});

  // A secondary rate limit: 429, Retry-After 30.
  standin.control({{"fail_next", {429}}, {"retry_after", 30}});
  auto limited = (*api)->list_runners();
  REQUIRE_FALSE(limited.is_ok());
  CHECK(limited.status().code() == kGithubRateLimited);
  CHECK_THAT(limited.status().message(), Catch::Contains("rate limited until"));
  CHECK_THAT(limited.status().message(), Catch::Contains("HTTP 429"));
  CHECK((*api)->rate_limit().backoff_until == clock.now() + std::chrono::seconds(30));
  const size_t asked = standin.record().size();
  clock.advance(std::chrono::seconds(29));
  JitRequest req;
  req.name = "armhive-2";
  req.labels = {"self-hosted"};
  auto during = (*api)->generate_jitconfig(req);
  CHECK(during.status().code() == kGithubRateLimited);
  CHECK(standin.record().size() == asked);  // not sent
  clock.advance(std::chrono::seconds(1));
  CHECK((*api)->generate_jitconfig(req).is_ok());

  // A server error is no rate limit: no backoff.
  standin.control({{"fail_next", {502}}});
  auto failed = (*api)->list_runners();
  CHECK(failed.status().code() == ErrorCode::kUnavailable);
  CHECK((*api)->rate_limit().backoff_until <= clock.now());
  REQUIRE((*api)->list_runners().is_ok());
}

TEST_CASE("github api: an exhausted rate-limit window backs off until its reset",
          "[github][heal]") {
  StandIn standin;
  ManualClock clock(SystemClock().now());
  auto api = make_github_api(token_options(standin.port, "orgs/octo-org", &clock));
  REQUIRE(api.is_ok());
  standin.control({{"rate_limit", 2}});
  REQUIRE((*api)->list_runners().is_ok());
  CHECK((*api)->rate_limit().remaining == 1);
  REQUIRE((*api)->list_runners().is_ok());
  CHECK((*api)->rate_limit().remaining == 0);
  auto over = (*api)->delete_runner(100);  // 403, remaining 0: GitHub's primary limit
  REQUIRE_FALSE(over.is_ok());
  CHECK(over.code() == kGithubRateLimited);
  CHECK_THAT(over.message(), Catch::Contains("HTTP 403"));
  // The stand-in's window resets 60 s after the control call on its own clock, which the
  // manual clock does not follow: bound it by the wall clock read after the call, not by when
  // the test began (a loaded machine may take seconds in between).
  const TimePoint after = SystemClock().now();
  GithubRateLimit rl = (*api)->rate_limit();
  CHECK(rl.backoff_until == rl.reset);
  CHECK(rl.backoff_until > clock.now());
  CHECK(rl.backoff_until <= after + std::chrono::seconds(60));
}

TEST_CASE("github api: secondary limits without Retry-After back off longer each time in a row",
          "[github][heal][ratelimit]") {
  StandIn standin;
  ManualClock clock(SystemClock().now());
  auto api = make_github_api(token_options(standin.port, "orgs/octo-org", &clock));
  REQUIRE(api.is_ok());
  // 429 without Retry-After, each time the backoff has ended: 1, 2, 4, 8 minutes, then 15.
  for (int minutes : {1, 2, 4, 8, 15, 15}) {
    INFO(minutes << " min");
    standin.control({{"fail_next", {429}}});
    auto limited = (*api)->list_runners();
    REQUIRE(limited.status().code() == kGithubRateLimited);
    CHECK((*api)->rate_limit().backoff_until == clock.now() + std::chrono::minutes(minutes));
    clock.advance(std::chrono::minutes(minutes));
  }
  // A call GitHub serves ends the run: the next secondary limit waits a minute again.
  REQUIRE((*api)->list_runners().is_ok());
  standin.control({{"fail_next", {429}}});
  CHECK((*api)->list_runners().status().code() == kGithubRateLimited);
  CHECK((*api)->rate_limit().backoff_until == clock.now() + std::chrono::minutes(1));
  clock.advance(std::chrono::minutes(1));
  // A server error neither ends the run nor counts in it.
  standin.control({{"fail_next", {502, 429}}});
  CHECK((*api)->list_runners().status().code() == ErrorCode::kUnavailable);
  CHECK((*api)->list_runners().status().code() == kGithubRateLimited);
  CHECK((*api)->rate_limit().backoff_until == clock.now() + std::chrono::minutes(2));
}

TEST_CASE("github api: a Retry-After HTTP date is honoured from the reply's own Date",
          "[github][heal][ratelimit]") {
  StandIn standin;
  ManualClock clock(SystemClock().now());
  auto api = make_github_api(token_options(standin.port, "orgs/octo-org", &clock));
  REQUIRE(api.is_ok());
  // GitHub's clock says 2015: the date is two minutes after its reply, whatever ours says.
  standin.control({{"date", "Wed, 21 Oct 2015 07:28:00 GMT"}});
  standin.control({{"fail_next", {429}}, {"retry_after", "Wed, 21 Oct 2015 07:30:00 GMT"}});
  auto limited = (*api)->list_runners();
  REQUIRE(limited.status().code() == kGithubRateLimited);
  CHECK((*api)->rate_limit().backoff_until == clock.now() + std::chrono::minutes(2));
  clock.advance(std::chrono::minutes(2));
  REQUIRE((*api)->list_runners().is_ok());

  // A date before the reply: the call failed, but the next one may go at once.
  standin.control({{"fail_next", {429}}, {"retry_after", "Wed, 21 Oct 2015 07:27:00 GMT"}});
  CHECK((*api)->list_runners().status().code() == kGithubRateLimited);
  CHECK((*api)->rate_limit().backoff_until == clock.now());
  REQUIRE((*api)->list_runners().is_ok());

  // Far ahead: at most an hour.
  standin.control({{"fail_next", {429}}, {"retry_after", "Fri, 01 Jan 2100 00:00:00 GMT"}});
  CHECK((*api)->list_runners().status().code() == kGithubRateLimited);
  CHECK((*api)->rate_limit().backoff_until == clock.now() + std::chrono::hours(1));
  clock.advance(std::chrono::hours(1));
  REQUIRE((*api)->list_runners().is_ok());

  // Not a date (nor seconds): as if there were no Retry-After, a minute.
  standin.control({{"fail_next", {429}}, {"retry_after", "tomorrow"}});
  CHECK((*api)->list_runners().status().code() == kGithubRateLimited);
  CHECK((*api)->rate_limit().backoff_until == clock.now() + std::chrono::minutes(1));
}

}  // namespace
}  // namespace armhive
