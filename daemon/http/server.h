#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/types.h"
#include "base/metrics.h"
#include "base/result.h"
#include "base/version.h"
#include "daemon/core/cluster_view.h"
#include "daemon/core/health_series.h"
#include "daemon/core/host_spec.h"
#include "daemon/engine/lease_service.h"

namespace armhive {

class Clock;
class LeaseService;
class BenchmarkService;
class TokenStore;
class AuditLog;
struct Lease;

inline constexpr int kDefaultPort = 8470;

// Where GET /v1/leases/{id}/tunnel?port=P of a ready lease goes (HttpOptions::tunnel).
struct TunnelRoute {
  std::string address;  // the guest's address on its bridge (an IP literal)
  int port = 0;
  // Ties an open tunnel to the lease's access: `cut` (returns at once) is called when it ends
  // (release, expiry). Returns what detach() takes, or nullopt when it has ended already (the
  // tunnel is then cut at once). Called on an I/O thread: must not block.
  std::function<std::optional<uint64_t>(std::function<void()> cut)> attach;
  std::function<void(uint64_t)> detach;
};

// How many long operations (daemon/http/long_operations.h: execs, SSH certificates counted as
// execs, file transfers, API tunnels, followed event streams) one token may have at once
// ([server] max_*_per_token; beyond: 429 naming the key, with Retry-After). Execs and transfers
// hold a worker each, so besides these one token's execs plus transfers never hold more than
// half of `threads`: one token can never take every worker.
struct LongOperationLimits {
  size_t execs = 8;
  size_t file_transfers = 4;
  size_t tunnels = 16;
  size_t event_streams = 8;
};

struct HttpOptions {
  std::string bind_address = "127.0.0.1";  // loopback unless configured otherwise
  int port = kDefaultPort;                 // 0: an ephemeral port (see HttpServer::port())
  // Both set: HTTPS (Boost.Asio SSL over OpenSSL). One without the other is a configuration
  // error.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Worker threads for handlers that call the services (SQLite, the guest agent). Waiting
  // requests (long-polls, event streams) hold none.
  int threads = 32;
  // Threads running the connections' I/O (async: each serves any number of connections).
  int io_threads = 2;
  size_t max_body_bytes = kMaxBodyBytes;  // larger request bodies: 413
  // Deadlines: the whole request header (first request on a connection), the whole body,
  // each write, and the wait for the next request on a kept-alive connection.
  std::chrono::seconds header_timeout{10};
  std::chrono::seconds read_timeout{30};
  std::chrono::seconds write_timeout{30};
  std::chrono::seconds keep_alive_timeout{5};
  // An upload's whole body (PUT /files, Route::streamed_body) must arrive within
  // read_timeout + Content-Length / upload_min_bytes_per_second, however it trickles (each
  // piece also within read_timeout); later: 408. [server] upload_min_bytes_per_second.
  uint64_t upload_min_bytes_per_second = 128 * 1024;
  LongOperationLimits long_operations;
  // Connection caps. Beyond either, up to `over_cap_connections` more are accepted for one
  // request each that only /healthz and /metrics answer (others: 503 + Retry-After); beyond
  // that a connection is closed at once.
  size_t max_connections = 4096;
  size_t max_connections_per_client = 1024;  // per remote address
  size_t over_cap_connections = 64;
  std::chrono::seconds max_wait{300};               // cap on ?wait=ready&timeout=
  std::chrono::milliseconds event_keepalive{5000};  // newline on an idle event stream
  std::string version = std::string(kVersion);
  // The wall clock for dev lease lifetimes (renew's hard maximum) and the default window of
  // GET /v1/usage ("now"); null: the system clock. Not
  // owned; outlives the server.
  const Clock* clock = nullptr;
  // Receives one line per request and per server error; may be empty. Called from worker
  // threads concurrently.
  std::function<void(std::string_view line)> log;
  // Adjusts a lease's JSON before it is sent (daemon/access: ssh.host/ssh.port of the lease's
  // forward). An error (no free access port) is the response. Called from worker threads.
  std::function<Status(const Lease& lease, LeaseDto& dto)> lease_view;
  // The extra guest ports a lease asks for ("ports"): checked against the pool before the lease
  // is created (kInvalidArgument naming "ports[i]"), then recorded for it. Unset: "ports" is
  // refused (the server forwards nothing).
  std::function<Status(const std::string& pool, const std::vector<int>& ports)> check_ports;
  std::function<void(const std::string& lease_id, const std::vector<int>& ports)> lease_ports;
  // A lease's startup command ("startup", daemon/startup): recorded right after the lease is
  // created (an error releases the lease again and is the response), and shown in its JSON by
  // startup_view. Unset: "startup" is refused.
  std::function<Status(const std::string& lease_id, const StartupRequestDto& startup)>
      lease_startup;
  std::function<void(const Lease& lease, LeaseDto& dto)> startup_view;
  // POST /v1/github/webhook (daemon/github): public, authenticated by its X-Hub-Signature-256.
  // Gets the X-GitHub-Event and X-GitHub-Delivery headers, the signature, the raw body and the
  // remote address; ok is 202. Unset: the route does not exist.
  std::function<Status(const std::string& event, const std::string& delivery,
                       const std::string& signature, const std::string& body,
                       const std::string& remote)>
      github_webhook;
  // GET /v1/github (admin tokens) and the armhive_github_rate_limit_remaining gauge of
  // /metrics: the provider's state. Unset: GET /v1/github is 404 ("GitHub is not configured").
  // Called from worker threads; must not block (it copies counters).
  std::function<GithubStateDto()> github_state;
  // Health benchmarks' series (daemon/bench/health_scheduler.h): the newest `limit` results of
  // (host, pool), oldest first. Unset: GET /v1/hosts/{name}/health[.svg] and
  // /ui/hosts/{name}/health are 503. Called from worker threads.
  std::function<Result<std::vector<HealthResult>>(const std::string& host, const std::string& pool,
                                                  size_t limit)>
      health_series;
  // Issues an SSH user certificate for a ready lease the caller may see (daemon/access: the CA;
  // writes the lease's trust into its guest first). `token` names the caller for the key id.
  // Unset: POST /v1/leases/{id}/ssh-certificate is 503. Called from worker threads.
  std::function<Result<SshCertificateDto>(const Lease& lease, const std::string& token,
                                          const std::string& public_key)>
      ssh_certificate;
  // The route of a tunnel to `port` of a ready lease the caller may see (daemon/access: the
  // guest's address; port 22 or one the lease asked for, else kInvalidArgument naming "port").
  // Unset: GET /v1/leases/{id}/tunnel is 503. Called from worker threads.
  std::function<Result<TunnelRoute>(const Lease& lease, int port)> tunnel;
  // Drives one more libvirt host from now on (POST /v1/hosts, admin tokens: daemon/fleet
  // connects and sets it up, the engine adds it, the database keeps it). Errors: the spec's
  // field (400), a name taken (409), the host unreachable or libvirt's refusal (503 naming
  // both). Unset: 503. Called from worker threads; blocks up to [host] libvirt_timeout.
  std::function<Status(const HostSpec& spec)> add_host;
  // The configuration file's host URIs: the files their parameters name (pkipath=, keyfile=)
  // are the only ones POST /v1/hosts may name (check_libvirt_uri, SpecOrigin::kApi).
  std::vector<std::string> configured_host_uris;
  // Stops driving a host added through the API (DELETE /v1/hosts/{name}): 404 unknown, 409
  // while it holds VMs or leases ("drain it first") or when the configuration file names it.
  // Unset: 503. Called from worker threads.
  std::function<Status(const std::string& name)> remove_host;
  // The hosts armhived was given but has never reached, so knows no CPUs of (daemon/fleet:
  // configured, down since armhived started): listed after the driven hosts by GET /v1/hosts
  // and /ui/hosts as unreachable, with no cores and libvirt's error. Unset: none. Called from
  // worker threads; must not block.
  std::function<std::vector<HostView>()> waiting_hosts;
  // This instance as GET /healthz ("leader") and GET /v1/cluster name it. Its API serves only
  // while it leads: with PostgreSQL since it won `leader_epoch` at `leader_since_ms` (the
  // database's clock); with SQLite it is the only instance (epoch 0, since start()).
  std::string instance = "armhived";  // armhived@HOST/PID
  int64_t leader_epoch = 0;
  int64_t leader_since_ms = 0;  // 0: when start() is called
  // GET /v1/cluster with PostgreSQL: the leader and members as the database has them
  // (PgLeaderLease::read_view). Unset: SQLite, this instance alone. Called from worker threads.
  std::function<Result<ClusterView>()> cluster;
  // The configuration changes armhived has read but applies only at its next start (GET
  // /healthz lists them). Unset: none. Called on an I/O thread; must not block.
  std::function<std::vector<std::string>()> restart_required;
};

// The REST API (api/openapi.yaml) over a LeaseService, with bearer-token authentication,
// per-token authorization and quotas, problem+json errors, the audit log and /metrics.
//
// Ownership: the server references (does not own) the services, stores and metrics; they
// must outlive it. `benchmarks` may be null: the benchmark endpoints then answer 503.
// Design (daemon/http/README.md): event-driven on Boost.Asio + Beast. Connections are async
// state machines on `io_threads`; handlers that call the services run on `threads` workers;
// long-polls and event streams wait on one event watcher, holding no thread.
// Threading: start() and stop() from one controlling thread; the services are called from
// the workers (and the event watcher) concurrently.
class HttpServer {
 public:
  HttpServer(HttpOptions options, LeaseService& leases, BenchmarkService* benchmarks,
             TokenStore& tokens, AuditLog& audit, Metrics& metrics);
  ~HttpServer();  // stops
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving in the background. kUnavailable when the address cannot be
  // bound or the TLS files cannot be loaded; kInvalidArgument for inconsistent options.
  Status start();
  // Stops accepting, answers waiting long-polls with the lease as it is, ends event streams,
  // closes idle connections, waits briefly for answers in flight, then joins every thread.
  // Idempotent.
  void stop();

  int port() const;         // the bound port (useful with port 0); 0 before start()
  std::string url() const;  // "http://127.0.0.1:PORT" (https with TLS)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace armhive
