#include "cli/gitlab_job.h"

#include <nlohmann/json.hpp>

#include "base/validation.h"

namespace armhive {
namespace {

std::string get(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return v == nullptr ? std::string() : std::string(v);
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string::npos;
}

int exit_code(const EnvLookup& env, const char* name, int fallback) {
  std::string v = get(env, name);
  if (!all_digits(v)) return fallback;
  int64_t n = std::stoll(v);  // at most 18 digits: cannot throw
  return n >= 1 && n <= 255 ? static_cast<int>(n) : fallback;
}

// "7200", "2h", "1h30m", "45m", "30s".
std::optional<int64_t> parse_ttl(const std::string& s) {
  if (all_digits(s)) return std::stoll(s);
  int64_t total = 0, n = 0;
  bool digits = false;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      if (n > 1'000'000'000) return std::nullopt;
      n = n * 10 + (c - '0');
      digits = true;
      continue;
    }
    if (!digits) return std::nullopt;
    if (c == 'h')
      total += n * 3600;
    else if (c == 'm')
      total += n * 60;
    else if (c == 's')
      total += n;
    else
      return std::nullopt;
    n = 0;
    digits = false;
  }
  if (digits || total == 0) return std::nullopt;
  return total;
}

}  // namespace

GitlabExitCodes gitlab_exit_codes(const EnvLookup& env) {
  GitlabExitCodes c;
  c.build_failure = exit_code(env, "BUILD_FAILURE_EXIT_CODE", c.build_failure);
  c.system_failure = exit_code(env, "SYSTEM_FAILURE_EXIT_CODE", c.system_failure);
  return c;
}

Result<GitlabJob> gitlab_job_from_env(const EnvLookup& env, const std::string& default_pool) {
  GitlabJob job;
  job.job_id = get(env, "CUSTOM_ENV_CI_JOB_ID");
  if (!all_digits(job.job_id)) {
    return invalid_argument("CUSTOM_ENV_CI_JOB_ID",
                            "must be the job's numeric id (is this run by GitLab Runner's custom "
                            "executor?)");
  }
  job.pipeline_id = get(env, "CUSTOM_ENV_CI_PIPELINE_ID");
  job.project_id = get(env, "CUSTOM_ENV_CI_PROJECT_ID");
  job.project_path = get(env, "CUSTOM_ENV_CI_PROJECT_PATH");
  for (const auto* id : {&job.pipeline_id, &job.project_id}) {
    if (!id->empty() && !all_digits(*id)) {
      return invalid_argument(
          id == &job.pipeline_id ? "CUSTOM_ENV_CI_PIPELINE_ID" : "CUSTOM_ENV_CI_PROJECT_ID",
          "must be numeric");
    }
  }
  job.pool = get(env, "CUSTOM_ENV_ARMHIVE_POOL");
  if (job.pool.empty()) job.pool = default_pool;
  if (job.pool.empty()) {
    return invalid_argument("CUSTOM_ENV_ARMHIVE_POOL",
                            "no pool: set the CI variable ARMHIVE_POOL (or the driver's --pool)");
  }
  if (Status s = check_name("CUSTOM_ENV_ARMHIVE_POOL", job.pool); !s.is_ok()) return s;
  std::string ttl = get(env, "CUSTOM_ENV_ARMHIVE_TTL");
  if (!ttl.empty()) {
    job.ttl_seconds = parse_ttl(ttl);
    if (!job.ttl_seconds || !check_ttl("CUSTOM_ENV_ARMHIVE_TTL", *job.ttl_seconds).is_ok()) {
      return invalid_argument("CUSTOM_ENV_ARMHIVE_TTL",
                              "must be a duration like 2h, 90m or seconds (1s..30 days)");
    }
  }
  return job;
}

std::string gitlab_config_json(const std::string& builds_dir, const std::string& cache_dir,
                               std::string_view version) {
  nlohmann::json j = {{"builds_dir", builds_dir},
                      {"cache_dir", cache_dir},
                      {"builds_dir_is_shared", false},
                      {"hostname", "armhive"},
                      {"driver", {{"name", "armhive"}, {"version", std::string(version)}}},
                      {"job_env", {{"ARMHIVE_EXECUTOR", "gitlab"}}}};
  return j.dump();
}

std::map<std::string, std::string> gitlab_labels(const GitlabJob& job) {
  std::map<std::string, std::string> l = {{kGitlabJobLabel, job.job_id}};
  if (!job.pipeline_id.empty()) l["gitlab.pipeline"] = job.pipeline_id;
  if (!job.project_id.empty()) l["gitlab.project"] = job.project_id;
  return l;
}

std::string gitlab_idempotency_key(const GitlabJob& job) { return "gitlab-job-" + job.job_id; }

Status check_gitlab_stage(std::string_view stage) {
  bool ok =
      !stage.empty() && stage.size() <= 64 &&
      stage.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") == std::string_view::npos;
  if (!ok) return invalid_argument("stage", "must be a GitLab stage name ([a-z0-9_-], 1-64)");
  return Status::ok();
}

std::string gitlab_script_path(std::string_view stage) {
  return "/tmp/armhive-gitlab/" + std::string(stage) + ".sh";
}

std::vector<std::string> gitlab_stage_argv(std::string_view script, const std::string& shell,
                                           const std::string& path) {
  if (!shell.empty()) return {shell, path};
  if (script.substr(0, 2) == "#!") return {path};
  return {"/bin/sh", path};
}

}  // namespace armhive
