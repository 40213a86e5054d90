#pragma once

#include <string>

#include "api/types.h"
#include "daemon/http/context.h"
#include "daemon/http/router.h"

namespace armhive {

// Whether the client asked for a streamed exec (its Accept names application/x-ndjson).
bool wants_exec_stream(const HttpRequest& req);

// Answers `POST /v1/leases/{id}/exec` as a stream (api/exec_stream.h has the lines): the head
// goes out once the guest process runs, output lines as they are read, then the outcome. A
// failure before the process runs is an ordinary problem+json reply. Without timeout_s the
// command runs until it exits or the lease ends. The client going away (or the server
// stopping) kills the guest process. Keeps the exchange; blocks the calling worker thread for
// the command's lifetime (as the buffered form does).
Status stream_exec(ServerContext& ctx, Call& c, const std::string& lease_id,
                   const ExecRequestDto& request);

}  // namespace armhive
