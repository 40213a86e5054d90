#include "daemon/github/workflow_job.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "base/json_depth.h"

namespace armhive {

namespace {

using nlohmann::json;

Status bad(const std::string& field, const std::string& why) {
  return invalid_argument(field, why);
}

Status get_string(const json& obj, const char* key, const std::string& prefix, std::string& out,
                  bool required) {
  auto it = obj.find(key);
  const std::string field = prefix + key;
  if (it == obj.end() || it->is_null()) {
    return required ? bad(field, "is required") : Status::ok();
  }
  if (!it->is_string()) return bad(field, "must be a string");
  out = it->get<std::string>();
  if (out.size() > 1024) return bad(field, "is too long");
  return Status::ok();
}

Status get_id(const json& obj, const char* key, const std::string& prefix, int64_t& out,
              bool required) {
  auto it = obj.find(key);
  const std::string field = prefix + key;
  if (it == obj.end() || it->is_null()) {
    return required ? bad(field, "is required") : Status::ok();
  }
  if (!it->is_number_integer() || it->get<int64_t>() < 0) {
    return bad(field, "must be a non-negative integer");
  }
  out = it->get<int64_t>();
  return Status::ok();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

Result<WorkflowJob> parse_workflow_job(std::string_view body) {
  if (body.size() > kMaxWebhookBodyBytes) {
    return Status(ErrorCode::kPayloadTooLarge, "a webhook body may be at most " +
                                                   std::to_string(kMaxWebhookBodyBytes) + " bytes");
  }
  ARMHIVE_RETURN_IF_ERROR(check_json_depth(body, "body"));
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("body", "is not JSON");
  if (!j.is_object()) return bad("body", "must be a JSON object");
  WorkflowJob out;
  ARMHIVE_RETURN_IF_ERROR(get_string(j, "action", "", out.action, true));
  auto job = j.find("workflow_job");
  if (job == j.end() || !job->is_object()) return bad("workflow_job", "must be an object");
  const std::string p = "workflow_job.";
  ARMHIVE_RETURN_IF_ERROR(get_id(*job, "id", p, out.job_id, true));
  ARMHIVE_RETURN_IF_ERROR(get_id(*job, "run_id", p, out.run_id, false));
  ARMHIVE_RETURN_IF_ERROR(get_id(*job, "runner_id", p, out.runner_id, false));
  ARMHIVE_RETURN_IF_ERROR(get_string(*job, "runner_name", p, out.runner_name, false));
  auto labels = job->find("labels");
  if (labels != job->end() && !labels->is_null()) {
    if (!labels->is_array()) return bad(p + "labels", "must be an array of strings");
    if (labels->size() > kMaxJobLabels) {
      return bad(p + "labels", "at most " + std::to_string(kMaxJobLabels) + " labels");
    }
    for (size_t i = 0; i < labels->size(); ++i) {
      const json& l = (*labels)[i];
      const std::string f = p + "labels[" + std::to_string(i) + "]";
      if (!l.is_string()) return bad(f, "must be a string");
      std::string text = l.get<std::string>();
      if (text.empty() || text.size() > kMaxLabelBytes) {
        return bad(f, "must be 1-" + std::to_string(kMaxLabelBytes) + " bytes");
      }
      out.labels.push_back(std::move(text));
    }
  }
  if (auto repo = j.find("repository"); repo != j.end() && repo->is_object()) {
    ARMHIVE_RETURN_IF_ERROR(get_string(*repo, "full_name", "repository.", out.repository, false));
  }
  if (auto org = j.find("organization"); org != j.end() && org->is_object()) {
    ARMHIVE_RETURN_IF_ERROR(get_string(*org, "login", "organization.", out.organization, false));
  }
  return out;
}

Result<std::optional<std::string>> pool_for_labels(
    const std::map<std::string, std::string>& label_pools, const std::vector<std::string>& labels) {
  std::map<std::string, std::string> by_lower;
  for (const auto& [label, pool] : label_pools) by_lower[lower(label)] = pool;
  std::optional<std::string> pool;
  for (const std::string& l : labels) {
    auto it = by_lower.find(lower(l));
    if (it == by_lower.end()) continue;
    if (pool && *pool != it->second) {
      return invalid_argument("labels", "the job's labels map to two pools (" + *pool + ", " +
                                            it->second + "); a job must name one");
    }
    pool = it->second;
  }
  return pool;
}

}  // namespace armhive
