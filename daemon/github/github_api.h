#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "daemon/core/clock.h"

namespace armhive {

// The GitHub REST calls the provider makes (docs.github.com, "Self-hosted runners" and
// "Workflow runs" / "Workflow jobs"):
//   POST   {api}/{scope}/actions/runners/generate-jitconfig
//          {name, runner_group_id, labels, work_folder} -> 201 {runner: {id, name},
//          encoded_jit_config}
//   DELETE {api}/{scope}/actions/runners/{runner_id}    -> 204
//   GET    {api}/{scope}/actions/runners?per_page=100&page=N
//          -> 200 {total_count, runners: [{id, name, status, busy, labels: [{name}]}]}
//   GET    {api}/repos/OWNER/REPO/actions/runs?status=queued&per_page=100 (and in_progress)
//          -> 200 {total_count, workflow_runs: [{id, ...}]}
//   GET    {api}/repos/OWNER/REPO/actions/runs/{run_id}/jobs?per_page=100&page=N
//          -> 200 {total_count, jobs: [{id, run_id, status, labels: [string]}]}
// where scope is "orgs/ORG" or "repos/OWNER/REPO"; the runs and jobs are a repository's
// whatever the scope (an organisation's runners serve its repositories' jobs).
struct JitRequest {
  std::string name;
  int64_t runner_group_id = 1;  // 1: the "Default" group
  std::vector<std::string> labels;
  std::string work_folder = "_work";
};

struct JitRunner {
  int64_t runner_id = 0;
  std::string runner_name;
  std::string encoded_jit_config;  // a secret: never logged or persisted
};

// A runner as GET .../actions/runners lists it.
struct GithubRunnerInfo {
  int64_t id = 0;
  std::string name;
  std::string status;  // "online" | "offline"
  bool busy = false;
  std::vector<std::string> labels;
};

// A job GitHub has queued and no runner has taken yet.
struct QueuedJob {
  int64_t job_id = 0;
  int64_t run_id = 0;
  std::vector<std::string> labels;  // its runs-on
};

// What GitHub's replies said of the rate limit (X-RateLimit-Remaining, X-RateLimit-Reset,
// Retry-After), for GET /v1/github and /metrics.
struct GithubRateLimit {
  int64_t remaining = -1;     // -1: no reply has said yet
  TimePoint reset{};          // when the window resets; epoch: unknown
  TimePoint backoff_until{};  // no call before this (a rate-limited reply); epoch: none
};

// Bounds of the listing calls: what one reconcile pass may cost at most.
inline constexpr int kMaxRunnerPages = 50;    // 100 runners a page
inline constexpr int kMaxQueuedRuns = 100;    // one page of queued runs
inline constexpr int kMaxJobPagesPerRun = 3;  // 100 jobs a page (a matrix has at most 256)

// Who the calls are made as: a fine-grained token, or a GitHub App (app_id > 0) whose private
// key buys installation tokens (app_token.h). Secrets: token and app_private_key.
struct GithubCredentials {
  std::string token;
  int64_t app_id = 0;
  std::string app_private_key;  // PEM
  int64_t installation_id = 0;
};

// Whether `credentials` can be used, as make_github_api checks them: a token of one line of
// printable text, or an App with a positive installation_id and a key that signs a JWT now.
// kInvalidArgument naming github.token_file / github.installation_id /
// github.app_private_key_file. Pure CPU; any thread.
Status check_github_credentials(const GithubCredentials& credentials);

// Threading: implementations are thread-safe; calls block the calling thread up to their
// timeout, so never call them on an io_context thread.
class GithubApi {
 public:
  virtual ~GithubApi() = default;
  virtual Result<JitRunner> generate_jitconfig(const JitRequest& request) = 0;
  // A runner already gone (404) is not an error.
  virtual Status delete_runner(int64_t runner_id) = 0;
  // Every runner of the scope, page by page (at most kMaxRunnerPages pages).
  virtual Result<std::vector<GithubRunnerInfo>> list_runners() = 0;
  // The queued jobs of `repository` ("OWNER/NAME"), whatever the scope: its queued and its
  // in-progress workflow runs (one page each, kMaxQueuedRuns) and each run's jobs, keeping
  // those with status "queued": 2 + R calls for R runs. kInvalidArgument without a call when
  // `repository` is not OWNER/NAME of GitHub's name characters (it becomes a URL path);
  // kNotFound when GitHub answers 404 (no such repository, or the credentials cannot see it).
  virtual Result<std::vector<QueuedJob>> list_queued_jobs(const std::string& repository) = 0;
  // The rate limit as the last reply said it.
  virtual GithubRateLimit rate_limit() const = 0;
  // Replaces the credentials the calls use (a reload, README "Reload"): a call under way ends
  // with the ones it started with; an App's cached installation token is dropped, so the next
  // call buys one with the new key. `credentials` passed check_github_credentials. The default
  // (fakes of tests) refuses with kConflict. Thread-safe; no I/O.
  virtual Status set_credentials(GithubCredentials credentials);
};

// Every call above fails with kResourceExhausted ("GitHub rate limited until <time>") when
// GitHub answered 429, or 403 with Retry-After or X-RateLimit-Remaining 0, and records a
// backoff (Retry-After, seconds or an HTTP date; else X-RateLimit-Reset; else a minute, doubled
// for each further secondary limit in a row up to 15 minutes until a call succeeds; at most an
// hour: rate_limit_backoff.h); calls before the backoff ends fail the same way without reaching
// GitHub.
inline constexpr ErrorCode kGithubRateLimited = ErrorCode::kResourceExhausted;

struct GithubApiOptions {
  // https://api.github.com, or https://HOST/api/v3 for GitHub Enterprise Server; http:// only
  // for a loopback stand-in (tests).
  std::string api_url = "https://api.github.com";
  std::string scope;  // "orgs/ORG" or "repos/OWNER/REPO"
  std::string token;  // fine-grained token (Authorization: Bearer); a secret
  // Or a GitHub App (app_id > 0, instead of `token`): its PEM private key (a secret) signs a
  // JWT for POST {api}/app/installations/{installation_id}/access_tokens, and the installation
  // token it returns is used until 5 minutes before it expires (app_token.h).
  int64_t app_id = 0;
  std::string app_private_key;
  int64_t installation_id = 0;
  const Clock* clock = nullptr;  // the JWT's and the token's time; null: the system's
  std::chrono::milliseconds timeout{std::chrono::seconds(15)};  // connect + request + response
  std::string ca_file;                                          // empty: the system's trust store
};

// GithubApi over HTTP/1.1 with Boost.Beast (TLS through Boost.Asio SSL / OpenSSL, peer and host
// name verified). Each call opens its own connection on a private io_context, so one slow call
// never holds another; the whole exchange has one deadline.
// kInvalidArgument naming "github.api_url" / "github.scope" / "github.app_private_key_file"...
// for bad options.
Result<std::unique_ptr<GithubApi>> make_github_api(GithubApiOptions options);

}  // namespace armhive
