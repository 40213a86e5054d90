#pragma once

#include <string>

#include "api/client.h"
#include "base/status.h"

namespace armhive {

// The client side of the API tunnel (GET /v1/leases/{id}/tunnel?port=P, a WebSocket carrying
// one TCP connection to a port of the lease's VM in binary frames), on Boost.Beast over plain
// TCP or TLS as the server's URL says (TLS verified against options.ca_file or the system's CAs,
// host name included, unless options.insecure).
//
// The servers are options.servers (else options.server), tried in order from the first: the
// next one only while the tunnel has not begun — the server cannot be reached or refuses the
// upgrade with 503 — and a standby's 307/308 is followed once, under Client's rules
// (api/client.h: http(s) only, never from https to http, the token sent along).
//
// Relays bytes read from in_fd to the tunnel and the tunnel's bytes to out_fd until the server
// ends it (the guest closed its side, the lease ended) or out_fd cannot be written (the reader
// went away). The end of in_fd only stops reading it: the guest's answer still arrives.
// Memory is bounded (64 KiB in flight each way); a slow out_fd slows the guest.
//
// Returns ok when the tunnel ended normally; the server's refusal as a Status built from its
// problem+json (kNotFound, kConflict for a lease that is not ready, kInvalidArgument naming
// "port", ...); kUnavailable when the server cannot be reached or the tunnel broke.
// Blocks the calling thread (plus one helper thread reading in_fd) for the tunnel's life. The
// caller should ignore SIGPIPE if out_fd is a pipe.
Status run_tunnel(const ClientOptions& options, const std::string& lease_id, int port, int in_fd,
                  int out_fd);

}  // namespace armhive
