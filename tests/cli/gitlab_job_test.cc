// The environment GitLab Runner's custom executor gives each driver stage, as `armhive gitlab`
// reads it.
#include "cli/gitlab_job.h"

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>

namespace armhive {
namespace {

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST_CASE("gitlab: config prints what the runner expects", "[cli][gitlab]") {
  auto j = nlohmann::json::parse(gitlab_config_json("/builds", "/cache", "1.2.3"));
  CHECK(j["builds_dir"] == "/builds");
  CHECK(j["cache_dir"] == "/cache");
  CHECK(j["builds_dir_is_shared"] == false);
  CHECK(j["driver"]["name"] == "armhive");
  CHECK(j["driver"]["version"] == "1.2.3");
  CHECK(j["hostname"].is_string());
  CHECK(j["job_env"].is_object());
}

// A job response as GitLab Runner writes it at $JOB_RESPONSE_FILE (the fields the driver reads,
// amid others it ignores).
std::string job_response(const std::string& id, const std::string& pipeline = "77",
                         const std::string& project = "9", int timeout = 0) {
  nlohmann::json j = {
      {"id", std::stoll(id)},
      {"token", "glcbt-64_secret"},
      {"allow_git_fetch", true},
      {"job_info", {{"name", "build"}, {"stage", "test"}, {"project_id", std::stoll(project)}}},
      {"variables",
       {{{"key", "CI_JOB_ID"}, {"value", id}, {"public", true}},
        {{"key", "CI_PIPELINE_ID"}, {"value", pipeline}, {"public", true}},
        {{"key", "CI_RUNNER_ID"}, {"value", "12"}, {"public", true}},
        // What a job's own `variables:` adds comes after GitLab's.
        {{"key", "CI_PIPELINE_ID"}, {"value", "31337"}, {"public", true}},
        {{"key", "CI_RUNNER_ID"}, {"value", "666"}, {"public", true}}}}};
  if (timeout != 0) j["runner_info"] = {{"timeout", timeout}, {"runner_session_url", nullptr}};
  return j.dump();
}

TEST_CASE("gitlab: the job's identity comes from the runner's job response", "[cli][gitlab]") {
  auto job = gitlab_job_from_env(env_of({{"CUSTOM_ENV_CI_JOB_ID", "4242"},
                                         {"CUSTOM_ENV_CI_PIPELINE_ID", "31337"},
                                         {"CUSTOM_ENV_CI_PROJECT_ID", "1"},
                                         {"CUSTOM_ENV_ARMHIVE_POOL", "arm64"},
                                         {"CUSTOM_ENV_ARMHIVE_TTL", "1h30m"}}),
                                 job_response("4242"), "fallback");
  REQUIRE(job.is_ok());
  CHECK(job->pool == "arm64");
  CHECK(*job->ttl_seconds == 5400);
  auto labels = gitlab_labels(*job, 1'000'000);
  CHECK(labels.at("gitlab.job") == "4242");
  CHECK(labels.at("gitlab.pipeline") == "77");  // GitLab's, not the job's own variable
  CHECK(labels.at("gitlab.project") == "9");
  CHECK(labels.at("gitlab.runner") == "12");
  CHECK(labels.count("gitlab.job_deadline") == 0);  // the response gave no timeout
  CHECK(gitlab_idempotency_key(*job) == "gitlab-job-4242");

  // GitLab always sets CI_JOB_ID, but an unset one is no claim.
  auto dflt = gitlab_job_from_env(env_of({}), job_response("1"), "ci");
  REQUIRE(dflt.is_ok());
  CHECK(dflt->job_id == "1");
  CHECK(dflt->pool == "ci");
  CHECK_FALSE(dflt->ttl_seconds);
}

TEST_CASE("gitlab: a lease outlives its job by the cleanup margin only", "[cli][gitlab]") {
  // The job's timeout (1 h) comes from GitLab's job response: the lease ends 10 min after it
  // even when the runner dies before cleanup.
  auto job = gitlab_job_from_env(env_of({}), job_response("5", "77", "9", 3600), "ci");
  REQUIRE(job.is_ok());
  REQUIRE(job->ttl_seconds);
  CHECK(*job->ttl_seconds == 3600 + kGitlabCleanupMargin);
  auto labels = gitlab_labels(*job, 1'000'000);
  CHECK(labels.at("gitlab.job_deadline") == "1003600");
  // prepare's sweep: a lease is the leftover of a dead runner only once GitLab gave up on its
  // job.
  CHECK_FALSE(gitlab_job_timed_out(labels, 1'003'600));
  CHECK(gitlab_job_timed_out(labels, 1'003'601));
  CHECK_FALSE(gitlab_job_timed_out({{"gitlab.job", "5"}}, 9'999'999'999));
  CHECK_FALSE(gitlab_job_timed_out({{"gitlab.job_deadline", "soon"}}, 9'999'999'999));
  // An explicit ARMHIVE_TTL wins; a timeout that is not a positive number is no timeout.
  auto ttl = gitlab_job_from_env(env_of({{"CUSTOM_ENV_ARMHIVE_TTL", "2h"}}),
                                 job_response("5", "77", "9", 3600), "ci");
  REQUIRE(ttl.is_ok());
  CHECK(*ttl->ttl_seconds == 7200);
  auto negative = gitlab_job_from_env(env_of({}), job_response("5", "77", "9", -1), "ci");
  REQUIRE(negative.is_ok());
  CHECK_FALSE(negative->ttl_seconds);
}

TEST_CASE("gitlab: a job that sets CI_JOB_ID to another job's is refused", "[cli][gitlab]") {
  // Job 1002's .gitlab-ci.yml says `variables: {CI_JOB_ID: "1001"}`: the runner passes 1001
  // as CUSTOM_ENV_CI_JOB_ID, its job response still says 1002.
  auto r = gitlab_job_from_env(
      env_of({{"CUSTOM_ENV_CI_JOB_ID", "1001"}, {"CUSTOM_ENV_ARMHIVE_POOL", "ci"}}),
      job_response("1002"), "ci");
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::kPermissionDenied);
  CHECK(r.status().field() == "CUSTOM_ENV_CI_JOB_ID");
  CHECK(r.status().message().find("1001") != std::string::npos);
  CHECK(r.status().message().find("1002") != std::string::npos);
  // Whatever the claim looks like, it never reaches the message raw.
  auto odd = gitlab_job_from_env(env_of({{"CUSTOM_ENV_CI_JOB_ID", "1;\e[2J"}}),
                                 job_response("1002"), "ci");
  REQUIRE_FALSE(odd.is_ok());
  CHECK(odd.status().message().find('\e') == std::string::npos);
}

TEST_CASE("gitlab: a job response that is not one is named", "[cli][gitlab]") {
  for (std::string text : {"", "not json", "[]", "{}", R"({"id": 0})", R"({"id": -4})",
                           R"({"id": "12; rm -rf /"})", R"({"id": 1.5})", R"({"id": null})"}) {
    INFO(text);
    auto r = gitlab_job_from_env(env_of({}), text, "ci");
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "JOB_RESPONSE_FILE");
  }
  auto as_string = parse_gitlab_job_response(R"({"id": "77", "job_info": {"project_id": "5"}})");
  REQUIRE(as_string.is_ok());
  CHECK(as_string->job_id == "77");
  CHECK(as_string->project_id == "5");
  CHECK(as_string->pipeline_id.empty());
}

TEST_CASE("gitlab: a missing or bad variable is named", "[cli][gitlab]") {
  auto field = [](const std::map<std::string, std::string>& vars, const std::string& pool = {}) {
    auto r = gitlab_job_from_env(env_of(vars), job_response("1"), pool);
    REQUIRE_FALSE(r.is_ok());
    return r.status().field();
  };
  CHECK(field({}) == "CUSTOM_ENV_ARMHIVE_POOL");
  CHECK(field({{"CUSTOM_ENV_ARMHIVE_POOL", "Bad Pool"}}) == "CUSTOM_ENV_ARMHIVE_POOL");
  CHECK(field({{"CUSTOM_ENV_ARMHIVE_TTL", "forever"}}, "ci") == "CUSTOM_ENV_ARMHIVE_TTL");
}

TEST_CASE("gitlab: exit codes follow the runner's variables", "[cli][gitlab]") {
  auto c = gitlab_exit_codes(
      env_of({{"BUILD_FAILURE_EXIT_CODE", "37"}, {"SYSTEM_FAILURE_EXIT_CODE", "38"}}));
  CHECK(c.build_failure == 37);
  CHECK(c.system_failure == 38);
  auto d = gitlab_exit_codes(
      env_of({{"BUILD_FAILURE_EXIT_CODE", "0"}, {"SYSTEM_FAILURE_EXIT_CODE", "nope"}}));
  CHECK(d.build_failure == 1);
  CHECK(d.system_failure == 2);
}

TEST_CASE("gitlab: stage names become guest file names only when safe", "[cli][gitlab]") {
  for (const char* ok : {"prepare_script", "get_sources", "build_script", "step_script",
                         "after_script", "cleanup_file_variables"}) {
    CHECK(check_gitlab_stage(ok).is_ok());
  }
  for (const char* bad : {"", "../etc/passwd", "a b", "Build"})
    CHECK_FALSE(check_gitlab_stage(bad).is_ok());
  CHECK(gitlab_script_path("build_script") == "/tmp/armhive-gitlab/build_script.sh");
}

TEST_CASE("gitlab: a stage's script runs as its #! line asks, unless --shell says otherwise",
          "[cli][gitlab]") {
  const std::string path = "/tmp/armhive-gitlab/step_script.sh";
  // GitLab Runner's bash scripts start with "#!/usr/bin/env bash": the guest's bash runs them.
  CHECK(gitlab_stage_argv("#!/usr/bin/env bash\nset -eo pipefail\n", "", path) ==
        std::vector<std::string>{path});
  CHECK(gitlab_stage_argv("echo no interpreter line\n", "", path) ==
        std::vector<std::string>{"/bin/sh", path});
  CHECK(gitlab_stage_argv("", "", path) == std::vector<std::string>{"/bin/sh", path});
  CHECK(gitlab_stage_argv("#!/usr/bin/env bash\n", "/bin/bash", path) ==
        std::vector<std::string>{"/bin/bash", path});
}

}  // namespace
}  // namespace armhive
