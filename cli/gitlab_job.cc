#include "cli/gitlab_job.h"

#include <algorithm>
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

Result<GitlabJobResponse> parse_gitlab_job_response(std::string_view text) {
  constexpr const char* kField = "JOB_RESPONSE_FILE";
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return invalid_argument(kField, "is not JSON: not a job response GitLab Runner wrote");
  }
  // A JSON integer, or a digit string: ids are GitLab's bigint.
  auto id_of = [](const nlohmann::json& v) -> std::string {
    if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
    if (v.is_number_integer() && v.get<int64_t>() > 0) return std::to_string(v.get<int64_t>());
    if (v.is_string() && all_digits(v.get<std::string>())) return v.get<std::string>();
    return {};
  };
  GitlabJobResponse r;
  if (auto it = j.find("id"); it != j.end()) r.job_id = id_of(*it);
  if (r.job_id.empty() || r.job_id == "0") {
    return invalid_argument(kField, "has no job id (\"id\"): not a job response");
  }
  if (auto info = j.find("job_info"); info != j.end() && info->is_object()) {
    if (auto p = info->find("project_id"); p != info->end()) r.project_id = id_of(*p);
  }
  if (auto vars = j.find("variables"); vars != j.end() && vars->is_array()) {
    // GitLab's own variables come first; a job's `variables:` of the same name come later.
    for (const auto& v : *vars) {
      if (!v.is_object()) continue;
      const auto key = v.value("key", nlohmann::json());
      if (key == "CI_PIPELINE_ID" && r.pipeline_id.empty()) {
        r.pipeline_id = id_of(v.value("value", nlohmann::json()));
      } else if (key == "CI_RUNNER_ID" && r.runner_id.empty()) {
        r.runner_id = id_of(v.value("value", nlohmann::json()));
      }
    }
  }
  if (auto info = j.find("runner_info"); info != j.end() && info->is_object()) {
    // At most 30 days: GitLab's own ceiling for a job timeout is a month.
    if (auto t = info->find("timeout");
        t != info->end() && t->is_number_integer() && t->get<int64_t>() > 0) {
      r.timeout_s = std::min<int64_t>(t->get<int64_t>(), 30 * 24 * 3600);
    }
  }
  return r;
}

Result<GitlabJob> gitlab_job_from_env(const EnvLookup& env, std::string_view job_response,
                                      const std::string& default_pool) {
  ARMHIVE_ASSIGN_OR_RETURN(GitlabJobResponse response, parse_gitlab_job_response(job_response));
  GitlabJob job;
  job.job_id = response.job_id;
  job.pipeline_id = response.pipeline_id;
  job.project_id = response.project_id;
  job.runner_id = response.runner_id;
  job.timeout_s = response.timeout_s;
  job.project_path = get(env, "CUSTOM_ENV_CI_PROJECT_PATH");
  // GitLab sets CI_JOB_ID itself; a different value can only come from the job's own
  // variables, and the lease it would name is another job's.
  if (std::string claimed = get(env, "CUSTOM_ENV_CI_JOB_ID");
      !claimed.empty() && claimed != job.job_id) {
    return Status(ErrorCode::kPermissionDenied,
                  "the job's CI_JOB_ID variable says " +
                      (all_digits(claimed) ? claimed : std::string("something else")) +
                      ", but GitLab Runner's job response says job " + job.job_id +
                      ": a job may not set CI_JOB_ID (it would run in another job's VM)",
                  {}, "CUSTOM_ENV_CI_JOB_ID");
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
  } else if (job.timeout_s > 0) {
    job.ttl_seconds = job.timeout_s + kGitlabCleanupMargin;
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

std::map<std::string, std::string> gitlab_labels(const GitlabJob& job, int64_t now_unix) {
  std::map<std::string, std::string> l = {{kGitlabJobLabel, job.job_id}};
  if (!job.pipeline_id.empty()) l["gitlab.pipeline"] = job.pipeline_id;
  if (!job.project_id.empty()) l["gitlab.project"] = job.project_id;
  if (!job.runner_id.empty()) l[kGitlabRunnerLabel] = job.runner_id;
  if (job.timeout_s > 0) l[kGitlabDeadlineLabel] = std::to_string(now_unix + job.timeout_s);
  return l;
}

bool gitlab_job_timed_out(const std::map<std::string, std::string>& labels, int64_t now_unix) {
  auto it = labels.find(kGitlabDeadlineLabel);
  if (it == labels.end() || !all_digits(it->second)) return false;
  return std::stoll(it->second) < now_unix;  // at most 18 digits: cannot throw
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
