#pragma once

#include "api/types.h"
#include "daemon/engine/lease_service.h"

namespace armhive {

// Core types -> API wire types. Pure.
LeaseDto to_dto(const Lease& lease);
PoolDto to_dto(const PoolStatus& pool);
HostDto to_dto(const HostView& host);
EventDto to_dto(const Event& event);

// The ssh command line a person can paste (the CLI's `armhive ssh` builds the same argv).
// With `known_hosts_file`, the command verifies the host key against that file.
std::string ssh_command(const std::string& user, const std::string& host, int port,
                        const std::string& known_hosts_file = {});

}  // namespace armhive
