#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive {

// The pure part of `armhive gitlab` (GitLab Runner's custom executor protocol,
// docs.gitlab.com/runner/executors/custom): what a driver stage reads from the environment
// the runner gives it and what it answers. No I/O; any thread.

// Reads one environment variable; nullptr when unset (std::getenv in the CLI).
using EnvLookup = std::function<const char*(const char*)>;

// The job as GitLab's server described it to the runner: the JSON GitLab Runner (14.1 and
// later) writes for a custom executor's every stage at $JOB_RESPONSE_FILE. Unlike the
// CUSTOM_ENV_ variables, which a job's own `variables:` can set (CI_JOB_ID: 1001 in job 1002's
// .gitlab-ci.yml would otherwise reach job 1001's VM), nothing in the job can change it.
struct GitlabJobResponse {
  std::string job_id;       // "id"
  std::string project_id;   // "job_info"."project_id"
  std::string pipeline_id;  // the first CI_PIPELINE_ID of "variables" (GitLab's own comes first)
  std::string runner_id;    // the first CI_RUNNER_ID of "variables"
  // "runner_info"."timeout": the job's timeout in seconds, after which GitLab fails the job
  // whatever its runner does (0: not given).
  int64_t timeout_s = 0;
};
// kInvalidArgument (field "JOB_RESPONSE_FILE") when it is not a job response: not JSON, or no
// positive integer "id".
Result<GitlabJobResponse> parse_gitlab_job_response(std::string_view json);

// The job as the runner describes it to every stage.
struct GitlabJob {
  std::string job_id;        // the job response's id
  std::string pipeline_id;   // the job response's CI_PIPELINE_ID
  std::string project_id;    // the job response's project_id
  std::string runner_id;     // the job response's CI_RUNNER_ID
  std::string project_path;  // CUSTOM_ENV_CI_PROJECT_PATH (informational)
  std::string pool;          // CUSTOM_ENV_ARMHIVE_POOL, else the driver's --pool
  // CUSTOM_ENV_ARMHIVE_TTL ("2h", seconds); else the job's timeout plus kGitlabCleanupMargin
  // (a runner that dies between prepare and cleanup leaves a lease that ends soon after GitLab
  // gave up on its job, not a pool's default TTL later); else the pool's default.
  std::optional<int64_t> ttl_seconds;
  int64_t timeout_s = 0;  // the job response's timeout (0: not given)
};
// Time left after the job's timeout for the cleanup stage to release the VM itself.
inline constexpr int64_t kGitlabCleanupMargin = 600;

// The exit codes the runner asked for (BUILD_FAILURE_EXIT_CODE, SYSTEM_FAILURE_EXIT_CODE);
// 1 and 2 when unset or not a number 1..255.
struct GitlabExitCodes {
  int build_failure = 1;
  int system_failure = 2;
};
GitlabExitCodes gitlab_exit_codes(const EnvLookup& env);

// The job's identity comes from `job_response` (the text of $JOB_RESPONSE_FILE); the pool and
// TTL the job asks for from its CUSTOM_ENV_ variables. kInvalidArgument naming the variable
// (e.g. "CUSTOM_ENV_ARMHIVE_POOL") when one is malformed, or "JOB_RESPONSE_FILE" when the
// response is not one; kPermissionDenied naming CUSTOM_ENV_CI_JOB_ID when the job set its
// CI_JOB_ID to another job's (a job reaching for another job's VM). `default_pool` is used when
// the job sets no ARMHIVE_POOL variable.
Result<GitlabJob> gitlab_job_from_env(const EnvLookup& env, std::string_view job_response,
                                      const std::string& default_pool);

// The config stage's answer: builds_dir, cache_dir, builds_dir_is_shared (false: one VM per
// job), hostname, driver {name, version}, job_env.
std::string gitlab_config_json(const std::string& builds_dir, const std::string& cache_dir,
                               std::string_view version);

// The lease's labels (gitlab.job, gitlab.pipeline, gitlab.project, gitlab.runner,
// gitlab.job_deadline: the Unix second after which GitLab has failed the job whatever happens,
// when the job response gave a timeout), by which run and cleanup find it again and prepare's
// sweep tells a lease whose job GitLab no longer runs; and the Idempotency-Key of its creation
// (a retried prepare gets the same one). `now_unix` is the lease's creation time.
std::map<std::string, std::string> gitlab_labels(const GitlabJob& job, int64_t now_unix);
std::string gitlab_idempotency_key(const GitlabJob& job);
inline constexpr const char* kGitlabJobLabel = "gitlab.job";
inline constexpr const char* kGitlabRunnerLabel = "gitlab.runner";
inline constexpr const char* kGitlabDeadlineLabel = "gitlab.job_deadline";

// Whether a lease with these labels belongs to a job GitLab has given up on (its
// gitlab.job_deadline passed at `now_unix`): a runner that crashed between prepare and cleanup
// left it. False for leases without a deadline label.
bool gitlab_job_timed_out(const std::map<std::string, std::string>& labels, int64_t now_unix);

// The run stage's stage name (prepare_script, get_sources, build_script, step_*, ...):
// [a-z0-9_-], 1..64 characters, as it becomes part of a guest file name.
Status check_gitlab_stage(std::string_view stage);
// Where the stage's script goes in the guest.
std::string gitlab_script_path(std::string_view stage);
// How the guest runs the stage's script once it is at `path` (executable): with `shell` when
// the driver was given one (--shell); else as the script asks, by its "#!" line (GitLab Runner
// writes "#!/usr/bin/env bash" scripts for the bash shell); else with /bin/sh.
std::vector<std::string> gitlab_stage_argv(std::string_view script, const std::string& shell,
                                           const std::string& path);

}  // namespace armhive
