#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/types.h"
#include "base/result.h"

namespace armhive {

// JSON forms of the API types (api/openapi.yaml). Include only in .cc files: nlohmann::json is
// heavy.
//
// Requests are parsed strictly: unknown members, wrong types and invalid values are
// kInvalidArgument naming the field ("ttl", "ssh_keys[1]", "labels.team"). Responses are parsed
// leniently (unknown members ignored, so an older CLI keeps working against a newer daemon),
// but wrong types are still errors. No function here throws.

// Parses text as JSON; a syntax error is kInvalidArgument on `field` with the position, and
// so is nesting deeper than kMaxJsonDepth (base/json_depth.h), refused before parsing.
Result<nlohmann::json> parse_json(std::string_view text, std::string_view field = "body");
// Serialises without throwing: invalid UTF-8 is replaced by U+FFFD.
std::string dump_json(const nlohmann::json& j, int indent = -1);

nlohmann::json to_json(const LeaseCreateRequest& r);
Result<LeaseCreateRequest> lease_create_from_json(const nlohmann::json& j);
nlohmann::json to_json(const LeaseRenewRequest& r);
Result<LeaseRenewRequest> lease_renew_from_json(const nlohmann::json& j);
nlohmann::json to_json(const SshCertificateRequest& r);
Result<SshCertificateRequest> ssh_certificate_request_from_json(const nlohmann::json& j);
nlohmann::json to_json(const FileTransferDto& f);
Result<FileTransferDto> file_transfer_from_json(const nlohmann::json& j);
nlohmann::json to_json(const SshCertificateDto& c);
Result<SshCertificateDto> ssh_certificate_from_json(const nlohmann::json& j);
nlohmann::json to_json(const ExecRequestDto& r);
Result<ExecRequestDto> exec_request_from_json(const nlohmann::json& j);

nlohmann::json to_json(const LeaseDto& l);
Result<LeaseDto> lease_from_json(const nlohmann::json& j);
nlohmann::json to_json(const LeasePage& p);
Result<LeasePage> lease_page_from_json(const nlohmann::json& j);
nlohmann::json to_json(const PoolDto& p);
Result<PoolDto> pool_from_json(const nlohmann::json& j);
nlohmann::json to_json(const HealthResultDto& h);
nlohmann::json to_json(const HostDto& h);
Result<HostDto> host_from_json(const nlohmann::json& j);
// Unknown keys are refused, naming them.
Result<HostCreateDto> host_create_from_json(const nlohmann::json& j);
nlohmann::json to_json(const HostCreateDto& h);
nlohmann::json to_json(const EventDto& e);
Result<EventDto> event_from_json(const nlohmann::json& j);
nlohmann::json to_json(const Problem& p);
Result<Problem> problem_from_json(const nlohmann::json& j);
nlohmann::json to_json(const ExecResultDto& r);
Result<ExecResultDto> exec_result_from_json(const nlohmann::json& j);
Result<BenchmarkRunDto> benchmark_run_dto_from_json(const nlohmann::json& j);
nlohmann::json to_json(const HealthDto& h);
nlohmann::json to_json(const ClusterLeaderDto& l);
Result<ClusterLeaderDto> cluster_leader_from_json(const nlohmann::json& j);
nlohmann::json to_json(const ClusterDto& c);
Result<ClusterDto> cluster_from_json(const nlohmann::json& j);
nlohmann::json to_json(const GithubStateDto& g);
Result<GithubStateDto> github_state_from_json(const nlohmann::json& j);
nlohmann::json to_json(const LeaseUsageDto& u);
// usage_json.cc
nlohmann::json to_json(const UsageReportDto& r);
Result<UsageReportDto> usage_report_from_json(const nlohmann::json& j);

// {"items": [...]} lists (pools, hosts, benchmarks).
Result<std::vector<PoolDto>> pools_from_json(const nlohmann::json& j);
Result<std::vector<HostDto>> hosts_from_json(const nlohmann::json& j);
Result<std::vector<BenchmarkRunDto>> benchmark_runs_from_json(const nlohmann::json& j);

// The Problem for a failed Status (type from code_name(), title, status, detail, field).
Problem problem_from_status(const Status& status);
std::string_view problem_title(ErrorCode code);

}  // namespace armhive
