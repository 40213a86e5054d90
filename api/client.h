#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/types.h"
#include "base/result.h"

namespace armhive {

inline constexpr std::string_view kDefaultServer = "http://127.0.0.1:8470";

// One request and the server's answer, as the client saw it (for ClientOptions::on_response).
struct ClientExchange {
  const std::string& method;
  const std::string& path;  // with the query
  int status;
  const std::string& content_type;
  const std::string& body;
};

// Where a Client sends its calls. One armhived: set `server` (every single-server caller does).
// Several armhived sharing one PostgreSQL database (the leader and its standbys,
// daemon/leader_election.h): set `servers`, which then wins over `server`. Client::create
// validates every entry and sets both: `servers` to the whole list, `server` to its first entry.
struct ClientOptions {
  std::string server{kDefaultServer};  // http://host:port or https://host:port
  std::vector<std::string> servers;    // the same form each; tried in order (see Client)
  std::string token;                   // "ah_..." bearer token
  std::chrono::seconds timeout{30};    // connect/read/write timeout of ordinary calls
  std::string ca_file;                 // https: trust this CA bundle instead of the system's
  bool insecure = false;               // https: skip certificate verification
  // Called with the answer a call returns, on the calling thread, before it is decoded (tracing;
  // the e2e suite records what the daemon sent for its contract check) — not with the 503s and
  // redirects that moved the call on to another server. Must not throw; empty: nothing.
  std::function<void(const ClientExchange&)> on_response;
};

struct LeaseQuery {
  std::string pool;
  std::string state;
  std::string owner;                          // admin tokens only
  std::map<std::string, std::string> labels;  // all must match
  bool active = false;                        // only leases that have not ended
  size_t limit = 0;                           // 0: server default
  std::string cursor;
};

// Failures are Status values whose code comes from the HTTP status (code_from_http), whose
// message is the problem's detail and whose field is the problem's field. A server that
// cannot be reached is kUnavailable; a call that outlives its timeout is kTimeout.
//
// Several servers (failover). A call tries the servers in order, starting with the one that
// last answered (sticky, shared by every thread of this Client) and wrapping around, and moves
// on to the next when a server
//   - cannot be reached: connection refused, unreachable, timed out connecting, TLS handshake
//     or certificate failed (nothing was sent, so trying elsewhere is always safe);
//   - answers 503 (a standby with no leader known, a leader still recovering, a server without
//     the feature): nothing was done there. After the last server the 503's problem is
//     returned as with one server;
//   - took the request and gave no complete answer (dropped connection, read timeout), but
//     only for calls that are safe to repeat: GETs that are not long-polls, and POST
//     /v1/leases, which always carries an Idempotency-Key when several servers are configured
//     (create_lease makes one when the caller gave none) so that the next server answers with
//     the lease the first one may have made (the daemon replays a key from the shared database).
//     Any other POST or DELETE may have changed state: its error is returned, never repeated.
// Long-polls and streams (wait_lease, exec_stream, stream_events, put_file, get_file and the
// tunnel) move on only before their answer's first byte: a connection failure or a 503; once
// an answer began it is theirs.
// A 307/308 (a standby's answer: "the leader is there") is followed once, to its Location,
// with the same method, body and headers, when the Location is http(s)://host[:port]/path and
// does not turn https into http. The bearer token is sent to it: the standby is a server this
// client was told to trust with the token, and it names the leader from the leader row of the
// database the instances share, which only an armhived holding that database's credentials
// writes — anyone who can forge that row already controls every lease. A downgrade to http
// would put the token on the wire in clear text, hence refused. A redirect answered by a
// server of the list makes that server the sticky one.
// When no server answered, the error is kUnavailable naming every server tried and why (with
// one server: the same errors as before, kTimeout for a connect timeout).
//
// Blocking; one Client may be used from several threads (each call opens its own connection).
class Client {
 public:
  // kInvalidArgument (field "server") for an entry that is not http(s)://host[:port]; with
  // several, the message names the bad entry and its position.
  static Result<std::unique_ptr<Client>> create(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const ClientOptions& options() const { return options_; }
  // The server calls start with now: the one that last answered (the first at the start).
  const std::string& current_server() const;

  Result<HealthDto> health();
  // With several servers and no idempotency_key, a fresh random key is sent (see above).
  Result<LeaseDto> create_lease(const LeaseCreateRequest& request,
                                const std::string& idempotency_key = {});
  Result<LeasePage> list_leases(const LeaseQuery& query);
  Result<LeaseDto> get_lease(const std::string& id);
  // GET /v1/usage: what the leases created in the window used, per group (a token that is not
  // admin sees its own leases only); usage_csv asks for the same as text/csv.
  Result<UsageReportDto> usage(const UsageQueryDto& query);
  Result<std::string> usage_csv(const UsageQueryDto& query);
  // Long-poll: returns when the lease is ready or terminal, or after `timeout` (then with
  // its current state; the caller checks).
  Result<LeaseDto> wait_lease(const std::string& id, std::chrono::seconds timeout);
  Result<LeaseDto> renew_lease(const std::string& id, int64_t ttl_seconds);
  Result<SshCertificateDto> ssh_certificate(const std::string& id, const std::string& public_key);
  Result<LeaseDto> release_lease(const std::string& id);
  Result<ExecResultDto> exec(const std::string& id, const ExecRequestDto& request);
  // The streamed exec (api/exec_stream.h): `on_output(stream, data)` ("stdout"/"stderr")
  // gets the output as it arrives; the result (out/err empty) comes from the final line, and
  // `cancelled` says the server killed the command because the lease ended. timeout_s 0: no
  // timeout of its own (bounded by the lease). A stream that ends without a final line is
  // kUnavailable.
  struct ExecOutcome {
    ExecResultDto result;
    bool cancelled = false;
  };
  Result<ExecOutcome> exec_stream(
      const std::string& id, const ExecRequestDto& request,
      const std::function<void(std::string_view stream, std::string_view data)>& on_output);
  Result<std::string> console(const std::string& id, size_t max_bytes = 0);

  // PUT /v1/leases/{id}/files: `size` bytes pulled from `read(offset, max)` (which returns
  // what it read, at most max; an error stops the upload) sent as they are read, never held
  // whole. `tar`: a tar stream unpacked into the directory `path`. `sha256` (hex, may be empty)
  // is checked by the server against what it received.
  Result<FileTransferDto> put_file(
      const std::string& id, const std::string& path, bool tar, uint64_t size,
      const std::string& sha256,
      const std::function<Result<std::string>(uint64_t offset, size_t max)>& read);
  // GET /v1/leases/{id}/files: `on_begin(kind, size, guest_sha256)` once, then `on_data` for
  // each piece as it arrives (returning an error stops the download). A stream broken off
  // midway (the server's checks failed) is kUnavailable.
  Status get_file(const std::string& id, const std::string& path,
                  const std::function<Status(const std::string& kind, uint64_t size,
                                             const std::string& sha256)>& on_begin,
                  const std::function<Status(std::string_view data)>& on_data);
  Result<std::vector<PoolDto>> pools();
  // Who leads the instances sharing the database and when each was last heard of (any
  // instance answers, a standby too).
  Result<ClusterDto> cluster();
  Result<std::vector<HostDto>> hosts();
  // POST /v1/hosts/{name}/{action}, action "drain", "undrain" or "maintenance" (admin tokens):
  // the host as it is after.
  Result<HostDto> set_host_admin(const std::string& name, const std::string& action);
  // POST /v1/hosts (admin tokens): armhived connects to the host (within its libvirt_timeout;
  // the read timeout allows for it) and drives it from now on; the host as it is then.
  Result<HostDto> add_host(const HostCreateDto& host);
  // DELETE /v1/hosts/{name} (admin tokens): kConflict while it holds VMs or leases.
  Status remove_host(const std::string& name);
  Result<std::string> hosts_svg();
  // GET /v1/github (admin tokens): the GitHub provider's state; kNotFound when the daemon has
  // no [github] table.
  Result<GithubStateDto> github_state();

  // Streams events with seq > since. `on_event` returns false to stop. With follow=false the
  // server ends the stream once it has sent what it has.
  Status stream_events(uint64_t since, bool follow,
                       const std::function<bool(const EventDto&)>& on_event);

  // `body_json`: the POST /v1/leases/{id}/benchmarks document (daemon/bench/README.md).
  Result<BenchmarkRunDto> start_benchmark(const std::string& lease_id,
                                          const std::string& body_json);
  Result<BenchmarkRunDto> get_benchmark(const std::string& id);
  Result<std::vector<BenchmarkRunDto>> list_benchmarks(const std::string& lease_id = {});
  Result<std::string> benchmark_report(const std::string& id, const std::string& format);
  // format "html" or "json" (the comparison JSON, as text).
  Result<std::string> compare_benchmarks(const std::vector<std::string>& ids,
                                         const std::string& format);

 private:
  explicit Client(ClientOptions options) : options_(std::move(options)) {}
  struct Response {
    int status = 0;
    std::string content_type;
    std::string body;
  };
  struct Attempt;
  using AttemptFn =
      std::function<Attempt(const std::string& origin, const std::string& target, bool last)>;
  // Runs `attempt(origin, target, last)` on the servers in the order and under the rules
  // above (`last`: no server after this one, so its 503 is the call's answer). Returns the
  // final attempt's failure (ok when it succeeded) or why no server answered.
  Status failover(const std::string& target, const AttemptFn& attempt);
  // `repeatable`: safe to send again after the request left (GET, keyed lease creation).
  Result<Response> call(const std::string& method, const std::string& path, const std::string& body,
                        const std::map<std::string, std::string>& headers,
                        std::chrono::seconds read_timeout, bool repeatable);
  Result<std::string> call_ok(const std::string& method, const std::string& path,
                              const std::string& body = {},
                              const std::map<std::string, std::string>& headers = {},
                              std::optional<std::chrono::seconds> read_timeout = std::nullopt,
                              std::optional<bool> repeatable = std::nullopt);

  ClientOptions options_;
  // Index into options_.servers of the server that last answered. Atomic: calls on several
  // threads read and move it without a lock (a race only picks which server is tried first).
  std::atomic<size_t> preferred_{0};
};

}  // namespace armhive
