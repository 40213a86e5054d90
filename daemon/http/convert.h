#pragma once

#include "api/types.h"
#include "daemon/core/cluster_view.h"
#include "daemon/core/host_spec.h"
#include "daemon/engine/lease_service.h"

namespace armhive {

// DTO conversion both ways between the API wire types (api/types.h) and the core types.
// Pure.

// Requests in: wire -> core.
LeaseRequest from_dto(const LeaseCreateRequest& in, const std::string& owner,
                      const std::string& idempotency_key);
GuestExecRequest from_dto(const ExecRequestDto& in);

// Replies out: core -> wire.
LeaseDto to_dto(const Lease& lease);
ExecResultDto to_dto(GuestExecResult result);
PoolDto to_dto(const PoolStatus& pool);
HealthResultDto to_dto(const HealthResult& result);
HostDto to_dto(const HostView& host);
// A host to add, as the configuration's [[hosts]] would give it (errors name the body's keys).
HostSpec from_dto(const HostCreateDto& host);
EventDto to_dto(const Event& event);
// Counters past INT64_MAX are shown as INT64_MAX; seconds are rounded to the millisecond.
LeaseUsageDto to_dto(const LeaseUsage& usage);
UsageRowDto to_dto(const UsageRow& row);
ClusterLeaderDto to_dto(const ClusterLeader& leader);
// store: "postgresql" or "sqlite"; ages in seconds to the millisecond.
ClusterDto to_dto(const ClusterView& view);

// The JSON text of GET /v1/cluster's answer and of a problem, for the one server outside this
// module that answers them too (daemon/standby_server.h).
std::string cluster_json_text(const ClusterView& view);
std::string problem_json_text(const Status& status);

// The ssh command line a person can paste (the CLI's `armhive ssh` builds the same argv): it
// verifies the host key strictly under the lease's HostKeyAlias against the file
// lease_known_hosts_file(lease_id), which holds the lease's ssh.known_hosts (the client writes
// it; the API doc says so). Never trust-on-first-use: the address is reused by later VMs.
std::string ssh_command(const std::string& user, const std::string& host, int port,
                        const std::string& lease_id);
// "LEASE.known_hosts": the file ssh_command names, in the current directory.
std::string lease_known_hosts_file(const std::string& lease_id);
// The ssh block of a lease: only when it is ready with an address and its VM's host keys
// (known_hosts lines for host_key_alias(id)); nullopt otherwise (HttpOptions::lease_view may
// then move host and port to a forward).
std::optional<SshDto> ssh_dto(const Lease& lease);

}  // namespace armhive
