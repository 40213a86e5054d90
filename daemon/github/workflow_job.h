#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive {

inline constexpr size_t kMaxWebhookBodyBytes = 1024 * 1024;  // GitHub caps payloads at 25 MB;
                                                             // workflow_job ones are a few KB
inline constexpr size_t kMaxJobLabels = 100;                 // as generate-jitconfig allows
inline constexpr size_t kMaxLabelBytes = 256;

// The parts of a `workflow_job` webhook delivery the provider uses (GitHub's documented
// payload: action; workflow_job.{id, run_id, labels, runner_id, runner_name};
// repository.full_name; organization.login). Pure, any thread.
struct WorkflowJob {
  std::string action;  // queued | waiting | in_progress | completed
  int64_t job_id = 0;
  int64_t run_id = 0;
  std::vector<std::string> labels;  // the job's runs-on
  int64_t runner_id = 0;            // the runner that took it; 0 until one did
  std::string runner_name;
  std::string repository;    // "owner/name"
  std::string organization;  // empty for a repository of a user
};

// Parses a delivery body. Members the provider does not use are ignored (GitHub adds members);
// those it uses must have their documented types, else kInvalidArgument naming the member
// ("workflow_job.labels[2]"). Labels are bounded by kMaxJobLabels / kMaxLabelBytes. Never
// throws.
Result<WorkflowJob> parse_workflow_job(std::string_view body);

// The pool for a job's labels through `label_pools` (label -> pool; labels compare
// case-insensitively, as GitHub's do): nullopt when no label is mapped (the job is for other
// runners); kInvalidArgument naming "labels" when mapped labels name different pools.
Result<std::optional<std::string>> pool_for_labels(
    const std::map<std::string, std::string>& label_pools, const std::vector<std::string>& labels);

}  // namespace armhive
