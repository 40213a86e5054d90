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

// The job as the runner describes it to every stage.
struct GitlabJob {
  std::string job_id;                  // CUSTOM_ENV_CI_JOB_ID (required)
  std::string pipeline_id;             // CUSTOM_ENV_CI_PIPELINE_ID
  std::string project_id;              // CUSTOM_ENV_CI_PROJECT_ID
  std::string project_path;            // CUSTOM_ENV_CI_PROJECT_PATH
  std::string pool;                    // CUSTOM_ENV_ARMHIVE_POOL, else the driver's --pool
  std::optional<int64_t> ttl_seconds;  // CUSTOM_ENV_ARMHIVE_TTL ("2h", seconds), else pool's
};

// The exit codes the runner asked for (BUILD_FAILURE_EXIT_CODE, SYSTEM_FAILURE_EXIT_CODE);
// 1 and 2 when unset or not a number 1..255.
struct GitlabExitCodes {
  int build_failure = 1;
  int system_failure = 2;
};
GitlabExitCodes gitlab_exit_codes(const EnvLookup& env);

// kInvalidArgument naming the variable (e.g. "CUSTOM_ENV_CI_JOB_ID") when one is missing or
// malformed. `default_pool` is used when the job sets no ARMHIVE_POOL variable.
Result<GitlabJob> gitlab_job_from_env(const EnvLookup& env, const std::string& default_pool);

// The config stage's answer: builds_dir, cache_dir, builds_dir_is_shared (false: one VM per
// job), hostname, driver {name, version}, job_env.
std::string gitlab_config_json(const std::string& builds_dir, const std::string& cache_dir,
                               std::string_view version);

// The lease's labels (gitlab.job, gitlab.pipeline, gitlab.project), by which run and cleanup
// find it again, and the Idempotency-Key of its creation (a retried prepare gets the same one).
std::map<std::string, std::string> gitlab_labels(const GitlabJob& job);
std::string gitlab_idempotency_key(const GitlabJob& job);
inline constexpr const char* kGitlabJobLabel = "gitlab.job";

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
