#include "daemon/http/server.h"

#include <httplib.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "api/json.h"
#include "base/validation.h"
#include "base/xml_escape.h"
#include "daemon/bench/benchmark_service.h"
#include "daemon/engine/lease_service.h"
#include "daemon/http/convert.h"
#include "daemon/store/token_store.h"
#ifdef ARMHIVE_HTTP_HAVE_CORE_MAP
#include "daemon/http/core_map_svg.h"
#endif

namespace armhive {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr size_t kMaxListLimit = 1000;
constexpr size_t kDefaultListLimit = 100;
constexpr size_t kMaxConsoleBytes = 1 << 20;
constexpr size_t kDefaultConsoleBytes = 64 * 1024;
constexpr size_t kMaxIdempotencyKey = 128;

enum class Access { kPublic, kRead, kWrite };

Status unauthenticated(std::string message) {
  return {ErrorCode::kUnauthenticated, std::move(message)};
}
Status permission_denied(std::string message) {
  return {ErrorCode::kPermissionDenied, std::move(message)};
}
Status exhausted(std::string message) {
  return {ErrorCode::kResourceExhausted, std::move(message)};
}

void write_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(dump_json(j), "application/json");
}

void write_problem(httplib::Response& res, const Status& s) {
  Problem p = problem_from_status(s);
  res.status = p.status;
  if (s.code() == ErrorCode::kUnauthenticated) {
    res.set_header("WWW-Authenticate", "Bearer realm=\"armhive\"");
  }
  res.set_content(dump_json(to_json(p)), "application/problem+json");
}

bool is_admin(const TokenInfo& t) { return t.role == TokenRole::kAdmin; }

// "30s", "2m", "45" -> milliseconds.
Result<std::chrono::milliseconds> parse_timeout_param(const std::string& text) {
  ARMHIVE_ASSIGN_OR_RETURN(int64_t s, parse_duration("timeout", text));
  return std::chrono::milliseconds(s * 1000);
}

Result<size_t> parse_size_param(const httplib::Request& req, const char* key, size_t fallback,
                                size_t max) {
  if (!req.has_param(key)) return fallback;
  std::string v = req.get_param_value(key);
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) {
    return invalid_argument(key, "must be a positive integer");
  }
  size_t n = std::stoul(v);
  if (n == 0) return invalid_argument(key, "must be a positive integer");
  if (n > max) return invalid_argument(key, "must be at most " + std::to_string(max));
  return n;
}

Result<bool> parse_bool_param(const httplib::Request& req, const char* key, bool fallback) {
  if (!req.has_param(key)) return fallback;
  std::string v = req.get_param_value(key);
  if (v == "true" || v == "1" || v.empty()) return true;
  if (v == "false" || v == "0") return false;
  return invalid_argument(key, "must be true or false");
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() &&
               std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Every value of a repeated query parameter, split at the first '=' only (httplib's own
// parser keeps the text after the last '=', which loses "label=k=v").
std::vector<std::string> raw_params(const httplib::Request& req, std::string_view key) {
  std::vector<std::string> out;
  size_t q = req.target.find('?');
  if (q == std::string::npos) return out;
  std::string_view query = std::string_view(req.target).substr(q + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view piece = query.substr(0, amp);
    size_t eq = piece.find('=');
    if (eq != std::string_view::npos && percent_decode(piece.substr(0, eq)) == key) {
      out.push_back(percent_decode(piece.substr(eq + 1)));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return out;
}

}  // namespace

struct HttpServer::Impl {
  Impl(HttpOptions o, LeaseService& l, BenchmarkService* b, TokenStore& t, AuditLog& a, Metrics& m)
      : options(std::move(o)), leases(l), benchmarks(b), tokens(t), audit(a), metrics(m) {}

  HttpOptions options;
  LeaseService& leases;
  BenchmarkService* benchmarks;

  // A lease as the API shows it, through HttpOptions::lease_view when set.
  Result<LeaseDto> lease_dto(const Lease& l) const {
    LeaseDto d = to_dto(l);
    if (options.lease_view) ARMHIVE_RETURN_IF_ERROR(options.lease_view(l, d));
    return d;
  }
  TokenStore& tokens;
  AuditLog& audit;
  Metrics& metrics;

  std::unique_ptr<httplib::Server> server;
  std::thread listener;
  std::atomic<bool> stopping{false};
  std::mutex quota_mu;  // serialises quota check + create for tokens with max_leases
  int bound_port = 0;
  bool tls = false;

  using Handler =
      std::function<Status(const TokenInfo&, const httplib::Request&, httplib::Response&)>;

  void log(const std::string& line) const {
    if (options.log) options.log(line);
  }

  void describe_metrics() {
    metrics.describe_counter("armhive_api_requests_total",
                             "API requests by method, route and HTTP status");
    metrics.describe_histogram("armhive_api_request_duration_seconds",
                               "API request handling time by method and route (streams and "
                               "long-polls included)");
    metrics.describe_gauge("armhive_leases", "Non-terminal leases by state");
    metrics.describe_gauge("armhive_pool_warm_vms", "Booted idle VMs ready to hand out, by pool");
    metrics.describe_gauge("armhive_pool_starting_vms", "VMs booting, by pool");
    metrics.describe_gauge("armhive_pool_leased_vms", "VMs handed to leases, by pool");
    metrics.describe_gauge("armhive_pool_pending_leases", "Leases waiting for a VM, by pool");
    metrics.describe_gauge("armhive_host_cores", "Host CPUs by host and role");
    metrics.describe_gauge("armhive_host_cores_allocated", "Host CPUs pinned to a VM, by host");
    metrics.describe_gauge("armhive_host_fragmentation",
                           "0 = free cores form whole clusters; 1 = fully scattered");
    metrics.describe_gauge("armhive_build_info", "armhived version");
  }

  // Authenticates, authorizes, runs the handler, converts its Status to a problem and records
  // request metrics.
  void route(const std::string& method, const std::string& pattern, const std::string& name,
             Access access, Handler handler) {
    auto wrapped = [this, method, name, access, handler](const httplib::Request& req,
                                                         httplib::Response& res) {
      auto start = SteadyClock::now();
      Status s = dispatch(access, handler, req, res);
      if (!s.is_ok()) write_problem(res, s);
      double secs = std::chrono::duration<double>(SteadyClock::now() - start).count();
      metrics.inc("armhive_api_requests_total",
                  {{"method", method}, {"route", name}, {"code", std::to_string(res.status)}});
      metrics.observe("armhive_api_request_duration_seconds", {{"method", method}, {"route", name}},
                      secs);
    };
    if (method == "GET") {
      server->Get(pattern, wrapped);
    } else if (method == "POST") {
      // Read the body ourselves: httplib 0.11 enforces its payload limit only for bodies with
      // a Content-Length, not for chunked ones.
      server->Post(pattern, [this, method, name, wrapped](const httplib::Request& req,
                                                          httplib::Response& res,
                                                          const httplib::ContentReader& reader) {
        std::string body;
        bool too_large = false;
        bool ok = reader([&](const char* data, size_t len) {
          if (body.size() + len > options.max_body_bytes) {
            too_large = true;
            return false;
          }
          body.append(data, len);
          return true;
        });
        if (!ok || too_large) {
          if (too_large || res.status == 413) {
            write_problem(res, Status(ErrorCode::kPayloadTooLarge,
                                      "the request body exceeds " +
                                          std::to_string(options.max_body_bytes) + " bytes"));
          } else {
            write_problem(res, invalid_argument("body", "the request body could not be read"));
          }
          res.set_header("Connection", "close");
          metrics.inc("armhive_api_requests_total",
                      {{"method", method}, {"route", name}, {"code", std::to_string(res.status)}});
          return;
        }
        httplib::Request with_body = req;  // `matches` still refers to req.path, which lives on
        with_body.body = std::move(body);
        wrapped(with_body, res);
      });
    } else if (method == "DELETE") {
      server->Delete(pattern, wrapped);
    }
  }

  Status dispatch(Access access, const Handler& handler, const httplib::Request& req,
                  httplib::Response& res) {
    TokenInfo anonymous;
    anonymous.name = "anonymous";
    anonymous.role = TokenRole::kRead;
    if (access == Access::kPublic) return handler(anonymous, req, res);
    std::string auth = req.get_header_value("Authorization");
    if (auth.empty()) {
      return unauthenticated(
          "missing bearer token: send \"Authorization: Bearer ah_...\" "
          "(create one with `armhived token create NAME --role ci`)");
    }
    constexpr std::string_view kBearer = "Bearer ";
    if (auth.size() <= kBearer.size() || auth.compare(0, kBearer.size(), kBearer) != 0) {
      return unauthenticated("the Authorization header must be \"Bearer <token>\"");
    }
    auto who = tokens.authenticate(std::string_view(auth).substr(kBearer.size()));
    if (!who.is_ok()) {
      if (who.status().code() == ErrorCode::kUnauthenticated) return who.status();
      return who.status().annotate("checking the token");
    }
    if (access == Access::kWrite && who->role == TokenRole::kRead) {
      return permission_denied("token \"" + who->name +
                               "\" has role read: it may only use GET requests");
    }
    return handler(*who, req, res);
  }

  // The lease if `who` may see it; another owner's lease is "not found" (its existence is
  // not revealed).
  Result<Lease> visible_lease(const TokenInfo& who, const std::string& id) {
    auto lease = leases.get_lease(id);
    if (!lease.is_ok()) return lease.status();
    if (!is_admin(who) && lease->owner != who.name) return not_found("no lease \"" + id + "\"");
    return lease;
  }

  Result<BenchmarkRun> visible_run(const TokenInfo& who, const std::string& id) {
    auto run = benchmarks->get(id);
    if (!run.is_ok()) return run.status();
    if (!is_admin(who) && run->owner != who.name) {
      return not_found("no benchmark run \"" + id + "\"");
    }
    return run;
  }

  Status need_benchmarks() const {
    if (benchmarks == nullptr) {
      return unavailable("benchmarks are not enabled on this server");
    }
    return Status::ok();
  }

  void audit_action(const TokenInfo& who, std::string_view action, const std::string& lease_id,
                    const std::string& detail) {
    Status s = audit.record(who.name, action, lease_id, detail);
    if (!s.is_ok()) log("audit: cannot record " + std::string(action) + ": " + s.to_string());
  }

  // --- leases ---

  Status create_lease(const TokenInfo& who, const httplib::Request& req, httplib::Response& res) {
    ARMHIVE_ASSIGN_OR_RETURN(json body, parse_json(req.body));
    ARMHIVE_ASSIGN_OR_RETURN(LeaseCreateRequest in, lease_create_from_json(body));
    std::string key = req.get_header_value("Idempotency-Key");
    if (key.size() > kMaxIdempotencyKey) {
      return invalid_argument("Idempotency-Key", "must be at most 128 characters");
    }
    for (char c : key) {
      if (c < 0x21 || c > 0x7e) {
        return invalid_argument("Idempotency-Key", "must be printable ASCII without spaces");
      }
    }
    LeaseRequest r;
    r.pool = in.pool;
    r.ssh_keys = in.ssh_keys;
    r.labels = in.labels;
    r.purpose = in.purpose == "dev" ? Purpose::kDev : Purpose::kCi;
    r.idempotency_key = key;
    r.owner = who.name;
    if (in.ttl_seconds) r.ttl = Seconds(*in.ttl_seconds);

    if (who.max_ttl.count() > 0) {
      if (r.ttl && *r.ttl > who.max_ttl) {
        return exhausted("token \"" + who.name + "\" may lease for at most " +
                         format_duration(who.max_ttl.count()) + "; asked for " +
                         format_duration(r.ttl->count()) + " (ask for a shorter ttl)");
      }
      if (!r.ttl) {
        // The pool's default may exceed the token's limit: cap it rather than refuse.
        for (const auto& p : leases.pools()) {
          if (p.config.name == r.pool && p.config.default_ttl > who.max_ttl) r.ttl = who.max_ttl;
        }
      }
    }
    // Count-then-create must not interleave for one token, or concurrent creates could all
    // pass the count. Creating returns at once (the engine provisions asynchronously), so one
    // lock for quota-limited tokens costs little.
    std::unique_lock<std::mutex> quota_lock;
    if (who.max_leases > 0) quota_lock = std::unique_lock(quota_mu);
    if (who.max_leases > 0) {
      LeaseFilter f;
      f.owner = who.name;
      f.include_ended = false;
      f.limit = 100000;
      ARMHIVE_ASSIGN_OR_RETURN(auto active, leases.list_leases(f));
      bool replay = false;
      for (const auto& l : active) replay = replay || (!key.empty() && l.idempotency_key == key);
      if (!replay && static_cast<int>(active.size()) >= who.max_leases) {
        return exhausted("token \"" + who.name + "\" already holds " +
                         std::to_string(active.size()) + " of its " +
                         std::to_string(who.max_leases) +
                         " concurrent leases (release one with `armhive lease rm ID`)");
      }
    }
    if (!in.ports.empty()) {
      if (!options.check_ports) {
        return invalid_argument("ports", "this server forwards no ports (no [access] configured)");
      }
      ARMHIVE_RETURN_IF_ERROR(options.check_ports(r.pool, in.ports));
    }
    ARMHIVE_ASSIGN_OR_RETURN(Lease lease, leases.create_lease(r));
    if (!in.ports.empty()) options.lease_ports(lease.id, in.ports);
    audit_action(who, "lease.create", lease.id,
                 "pool=" + lease.pool + " ttl=" + std::to_string(lease.ttl.count()) +
                     (key.empty() ? "" : " idempotency_key=" + key));
    auto dto = lease_dto(lease);
    if (!dto.is_ok()) {
      // No way in (e.g. the access port range is exhausted): the lease must not linger.
      (void)leases.release_lease(lease.id);
      return dto.status();
    }
    res.set_header("Location", "/v1/leases/" + lease.id);
    write_json(res, 201, to_json(*dto));
    return Status::ok();
  }

  Status list_leases(const TokenInfo& who, const httplib::Request& req, httplib::Response& res) {
    LeaseFilter f;
    if (req.has_param("pool")) {
      f.pool = req.get_param_value("pool");
      ARMHIVE_RETURN_IF_ERROR(check_name("pool", *f.pool));
    }
    if (req.has_param("state")) {
      auto st = lease_state_from_string(req.get_param_value("state"));
      if (!st) {
        return invalid_argument("state",
                                "must be one of pending, provisioning, ready, "
                                "releasing, released, expired, failed");
      }
      f.state = st;
    }
    for (const std::string& kv : raw_params(req, "label")) {
      size_t eq = kv.find('=');
      if (eq == std::string::npos) return invalid_argument("label", "must be key=value");
      f.labels[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    ARMHIVE_RETURN_IF_ERROR(check_labels("label", f.labels));
    if (req.has_param("owner")) {
      std::string owner = req.get_param_value("owner");
      if (!is_admin(who) && owner != who.name) {
        return permission_denied("only admin tokens may list other owners' leases");
      }
      f.owner = owner;
    }
    if (!is_admin(who)) f.owner = who.name;
    ARMHIVE_ASSIGN_OR_RETURN(bool active, parse_bool_param(req, "active", false));
    f.include_ended = !active;
    ARMHIVE_ASSIGN_OR_RETURN(size_t limit,
                             parse_size_param(req, "limit", kDefaultListLimit, kMaxListLimit));
    f.limit = limit + 1;
    if (req.has_param("cursor")) f.after_id = req.get_param_value("cursor");
    ARMHIVE_ASSIGN_OR_RETURN(auto list, leases.list_leases(f));
    LeasePage page;
    for (size_t i = 0; i < list.size() && i < limit; ++i) {
      auto dto = lease_dto(list[i]);
      if (!dto.is_ok()) {
        dto = to_dto(list[i]);
        dto->ssh.reset();  // not reachable now; GET on the lease says why
      }
      page.items.push_back(*dto);
    }
    if (list.size() > limit && !page.items.empty()) page.next_cursor = page.items.back().id;
    write_json(res, 200, to_json(page));
    return Status::ok();
  }

  Status get_lease(const TokenInfo& who, const httplib::Request& req, httplib::Response& res) {
    std::string id = req.matches[1];
    ARMHIVE_ASSIGN_OR_RETURN(Lease lease, visible_lease(who, id));
    if (req.has_param("wait")) {
      if (req.get_param_value("wait") != "ready") {
        return invalid_argument("wait", "only wait=ready is supported");
      }
      std::chrono::milliseconds timeout = std::chrono::seconds(30);
      if (req.has_param("timeout")) {
        ARMHIVE_ASSIGN_OR_RETURN(timeout, parse_timeout_param(req.get_param_value("timeout")));
      }
      timeout = std::min<std::chrono::milliseconds>(timeout, options.max_wait);
      // Wait in slices so that stop() is not held up by a long-poll.
      auto deadline = SteadyClock::now() + timeout;
      while (!stopping && lease.state != LeaseState::kReady && !is_terminal(lease.state)) {
        auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
        if (left.count() <= 0) break;
        auto slice_start = SteadyClock::now();
        LeaseState before = lease.state;
        ARMHIVE_ASSIGN_OR_RETURN(
            lease, leases.wait_lease(id, std::min(left, std::chrono::milliseconds(1000))));
        // A service that returns at once without a change must not turn this into a spin.
        if (lease.state == before &&
            SteadyClock::now() - slice_start < std::chrono::milliseconds(5)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      }
    }
    ARMHIVE_ASSIGN_OR_RETURN(LeaseDto dto, lease_dto(lease));
    write_json(res, 200, to_json(dto));
    return Status::ok();
  }

  Status renew_lease(const TokenInfo& who, const httplib::Request& req, httplib::Response& res) {
    std::string id = req.matches[1];
    ARMHIVE_ASSIGN_OR_RETURN(json body, parse_json(req.body));
    ARMHIVE_ASSIGN_OR_RETURN(LeaseRenewRequest in, lease_renew_from_json(body));
    ARMHIVE_ASSIGN_OR_RETURN(Lease lease, visible_lease(who, id));
    (void)lease;
    if (who.max_ttl.count() > 0 && in.ttl_seconds > who.max_ttl.count()) {
      return exhausted("token \"" + who.name + "\" may lease for at most " +
                       format_duration(who.max_ttl.count()) + "; asked for " +
                       format_duration(in.ttl_seconds) + " (ask for a shorter ttl)");
    }
    ARMHIVE_ASSIGN_OR_RETURN(Lease renewed, leases.renew_lease(id, Seconds(in.ttl_seconds)));
    audit_action(who, "lease.renew", id, "ttl=" + std::to_string(in.ttl_seconds));
    ARMHIVE_ASSIGN_OR_RETURN(LeaseDto dto, lease_dto(renewed));
    write_json(res, 200, to_json(dto));
    return Status::ok();
  }

  Status release_lease(const TokenInfo& who, const httplib::Request& req, httplib::Response& res) {
    std::string id = req.matches[1];
    ARMHIVE_ASSIGN_OR_RETURN(Lease lease, visible_lease(who, id));
    (void)lease;
    ARMHIVE_ASSIGN_OR_RETURN(Lease released, leases.release_lease(id));
    audit_action(who, "lease.release", id, "");
    ARMHIVE_ASSIGN_OR_RETURN(LeaseDto dto, lease_dto(released));
    write_json(res, 200, to_json(dto));
    return Status::ok();
  }

  Status exec(const TokenInfo& who, const httplib::Request& req, httplib::Response& res) {
    std::string id = req.matches[1];
    ARMHIVE_ASSIGN_OR_RETURN(json body, parse_json(req.body));
    ARMHIVE_ASSIGN_OR_RETURN(ExecRequestDto in, exec_request_from_json(body));
    ARMHIVE_ASSIGN_OR_RETURN(Lease lease, visible_lease(who, id));
    (void)lease;
    GuestExecRequest g;
    g.argv = in.argv;
    g.stdin_data = in.stdin_data;
    g.timeout = std::chrono::seconds(in.timeout_s);
    audit_action(who, "lease.exec", id, in.argv[0]);
    ARMHIVE_ASSIGN_OR_RETURN(GuestExecResult r, leases.exec(id, g));
    ExecResultDto out;
    out.exit_code = r.exit_code;
    out.signal = r.signal;
    out.timed_out = r.timed_out;
    out.out = std::move(r.out);
    out.err = std::move(r.err);
    out.out_truncated = r.out_truncated;
    write_json(res, 200, to_json(out));
    return Status::ok();
  }

  Status console(const TokenInfo& who, const httplib::Request& req, httplib::Response& res) {
    std::string id = req.matches[1];
    ARMHIVE_ASSIGN_OR_RETURN(
        size_t max_bytes,
        parse_size_param(req, "max_bytes", kDefaultConsoleBytes, kMaxConsoleBytes));
    ARMHIVE_ASSIGN_OR_RETURN(Lease lease, visible_lease(who, id));
    (void)lease;
    ARMHIVE_ASSIGN_OR_RETURN(std::string log_text, leases.console(id, max_bytes));
    res.status = 200;
    res.set_content(log_text, "text/plain; charset=utf-8");
    return Status::ok();
  }

  // --- pools, hosts, events ---

  Status list_pools(const TokenInfo&, const httplib::Request&, httplib::Response& res) {
    json items = json::array();
    for (const auto& p : leases.pools()) items.push_back(to_json(to_dto(p)));
    write_json(res, 200, {{"items", std::move(items)}});
    return Status::ok();
  }

  // Hosts as `who` may see them: other owners' lease and VM names are blanked.
  Result<std::vector<HostView>> visible_hosts(const TokenInfo& who) {
    auto hosts = leases.hosts();
    if (is_admin(who)) return hosts;
    LeaseFilter f;
    f.owner = who.name;
    f.include_ended = false;
    f.limit = 100000;
    ARMHIVE_ASSIGN_OR_RETURN(auto mine, leases.list_leases(f));
    std::set<std::string> ids;
    for (const auto& l : mine) ids.insert(l.id);
    for (auto& h : hosts) {
      for (auto& c : h.cores) {
        if (!c.lease_id.empty() && ids.count(c.lease_id) == 0) {
          c.lease_id = "other";
          c.vm_name.clear();
        } else if (c.lease_id.empty() && !c.vm_name.empty()) {
          c.vm_name = "warm";  // a warm VM: not a lease, name is internal
        }
      }
    }
    return hosts;
  }

  static std::string render_svg(const HostView& h) {
#ifdef ARMHIVE_HTTP_HAVE_CORE_MAP
    return render_core_map_svg(h.topology, h.cores);
#else
    (void)h;
    return {};
#endif
  }

  Status list_hosts(const TokenInfo& who, const httplib::Request& req, httplib::Response& res) {
    std::string format = req.has_param("format") ? req.get_param_value("format") : "";
    if (!format.empty() && format != "json" && format != "svg") {
      return invalid_argument("format", "must be json or svg");
    }
    bool svg = format == "svg" || (format.empty() && req.get_header_value("Accept").find(
                                                         "image/svg+xml") != std::string::npos);
    ARMHIVE_ASSIGN_OR_RETURN(auto hosts, visible_hosts(who));
    if (svg) {
#ifndef ARMHIVE_HTTP_HAVE_CORE_MAP
      return unavailable("this build has no core map renderer");
#endif
      if (hosts.empty()) return not_found("no hosts are configured");
      size_t index = 0;
      if (req.has_param("host")) {
        std::string name = req.get_param_value("host");
        index = hosts.size();
        for (size_t i = 0; i < hosts.size(); ++i) {
          if (hosts[i].topology.hostname == name) index = i;
        }
        if (index == hosts.size()) return not_found("no host \"" + name + "\"");
      }
      res.status = 200;
      res.set_content(render_svg(hosts[index]), "image/svg+xml");
      return Status::ok();
    }
    json items = json::array();
    for (const auto& h : hosts) items.push_back(to_json(to_dto(h)));
    write_json(res, 200, {{"items", std::move(items)}});
    return Status::ok();
  }

  Status hosts_page(const TokenInfo& who, const httplib::Request&, httplib::Response& res) {
    ARMHIVE_ASSIGN_OR_RETURN(auto hosts, visible_hosts(who));
    std::string html =
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>armhive hosts</title>"
        "<style>body{font-family:sans-serif;margin:2em}section{margin-bottom:2em}</style>"
        "</head><body><h1>armhive hosts</h1>\n";
    if (hosts.empty()) html += "<p>No hosts are configured.</p>\n";
    for (const auto& h : hosts) {
      HostDto d = to_dto(h);
      html += "<section><h2>" + xml_escape(d.hostname) + "</h2><p>" + xml_escape(d.arch) + ", " +
              xml_escape(d.cpu_model) + ", " + xml_escape(d.accel) + ", " +
              std::to_string(h.topology.cpus.size()) + " CPUs, fragmentation " +
              std::to_string(d.fragmentation) + (d.connected ? "" : ", <b>disconnected</b>") +
              "</p>\n" + render_svg(h) + "\n</section>\n";
    }
    html += "</body></html>\n";
    res.status = 200;
    res.set_content(html, "text/html; charset=utf-8");
    return Status::ok();
  }

  struct EventStream {
    uint64_t cursor = 0;
    std::string owner;  // empty: admin, every event
    bool follow = true;
    SteadyClock::time_point last_write = SteadyClock::now();
  };

  Status events(const TokenInfo& who, const httplib::Request& req, httplib::Response& res) {
    auto stream = std::make_shared<EventStream>();
    if (req.has_param("since")) {
      std::string v = req.get_param_value("since");
      if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) {
        return invalid_argument("since", "must be an event sequence number (0 for all)");
      }
      stream->cursor = std::stoull(v);
    }
    ARMHIVE_ASSIGN_OR_RETURN(stream->follow, parse_bool_param(req, "follow", true));
    if (!is_admin(who)) stream->owner = who.name;
    res.status = 200;
    res.set_header("Cache-Control", "no-store");
    res.set_chunked_content_provider(
        "application/x-ndjson", [this, stream](size_t, httplib::DataSink& sink) {
          if (stopping) {
            sink.done();
            return true;
          }
          auto slice = stream->follow ? std::min<std::chrono::milliseconds>(options.event_keepalive,
                                                                            std::chrono::seconds(1))
                                      : std::chrono::milliseconds(0);
          auto slice_start = SteadyClock::now();
          auto batch = leases.events_since(stream->cursor, slice);
          if (stream->follow && batch.empty() &&
              SteadyClock::now() - slice_start < std::chrono::milliseconds(5)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));  // no spinning
          }
          std::string out;
          for (const auto& e : batch) {
            stream->cursor = std::max(stream->cursor, e.seq);
            if (!stream->owner.empty() && e.owner != stream->owner) continue;
            out += dump_json(to_json(to_dto(e)));
            out += '\n';
          }
          auto now = SteadyClock::now();
          if (!out.empty()) {
            if (!sink.write(out.data(), out.size())) return false;
            stream->last_write = now;
          } else if (stream->follow && now - stream->last_write >= options.event_keepalive) {
            if (!sink.write("\n", 1)) return false;
            stream->last_write = now;
          }
          if (!stream->follow && batch.empty()) sink.done();
          return true;
        });
    return Status::ok();
  }

  // --- benchmarks ---

  Status start_benchmark(const TokenInfo& who, const httplib::Request& req,
                         httplib::Response& res) {
    ARMHIVE_RETURN_IF_ERROR(need_benchmarks());
    std::string id = req.matches[1];
    json body = json::object();
    if (!req.body.empty()) {
      ARMHIVE_ASSIGN_OR_RETURN(body, parse_json(req.body));
    }
    ARMHIVE_ASSIGN_OR_RETURN(BenchmarkRequest r, benchmark_request_from_json(body));
    ARMHIVE_ASSIGN_OR_RETURN(Lease lease, visible_lease(who, id));
    r.lease_id = lease.id;
    r.owner = who.name;
    ARMHIVE_ASSIGN_OR_RETURN(BenchmarkRun run, benchmarks->start(r));
    audit_action(who, "benchmark.start", lease.id, run.id);
    res.set_header("Location", "/v1/benchmarks/" + run.id);
    write_json(res, 202, to_json(run));
    return Status::ok();
  }

  Status list_benchmarks(const TokenInfo& who, const httplib::Request& req,
                         httplib::Response& res) {
    ARMHIVE_RETURN_IF_ERROR(need_benchmarks());
    BenchmarkFilter f;
    if (!is_admin(who)) f.owner = who.name;
    if (req.has_param("lease_id")) f.lease_id = req.get_param_value("lease_id");
    if (req.has_param("pool")) f.pool = req.get_param_value("pool");
    if (req.has_param("host")) f.host = req.get_param_value("host");
    if (req.has_param("state")) {
      auto st = benchmark_state_from_string(req.get_param_value("state"));
      if (!st) return invalid_argument("state", "must be queued, running, succeeded or failed");
      f.state = st;
    }
    ARMHIVE_ASSIGN_OR_RETURN(f.limit,
                             parse_size_param(req, "limit", kDefaultListLimit, kMaxListLimit));
    json items = json::array();
    for (const auto& run : benchmarks->list(f)) items.push_back(to_json(run));
    write_json(res, 200, {{"items", std::move(items)}});
    return Status::ok();
  }

  Status get_benchmark(const TokenInfo& who, const httplib::Request& req, httplib::Response& res) {
    ARMHIVE_RETURN_IF_ERROR(need_benchmarks());
    ARMHIVE_ASSIGN_OR_RETURN(BenchmarkRun run, visible_run(who, req.matches[1]));
    write_json(res, 200, to_json(run));
    return Status::ok();
  }

  Status benchmark_report(const TokenInfo& who, const httplib::Request& req, httplib::Response& res,
                          bool csv) {
    ARMHIVE_RETURN_IF_ERROR(need_benchmarks());
    ARMHIVE_ASSIGN_OR_RETURN(BenchmarkRun run, visible_run(who, req.matches[1]));
    std::vector<std::string> ids{run.id};
    ARMHIVE_ASSIGN_OR_RETURN(std::string body,
                             csv ? benchmarks->report_csv(ids) : benchmarks->report_html(ids));
    res.status = 200;
    res.set_content(body, csv ? "text/csv; charset=utf-8" : "text/html; charset=utf-8");
    return Status::ok();
  }

  Status compare_benchmarks(const TokenInfo& who, const httplib::Request& req,
                            httplib::Response& res) {
    ARMHIVE_RETURN_IF_ERROR(need_benchmarks());
    std::vector<std::string> ids;
    std::string list = req.get_param_value("ids");
    size_t pos = 0;
    while (pos <= list.size() && !list.empty()) {
      size_t comma = list.find(',', pos);
      std::string id = list.substr(pos, comma == std::string::npos ? comma : comma - pos);
      if (!id.empty()) ids.push_back(id);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    if (ids.size() < 2) return invalid_argument("ids", "name at least two runs: ids=A,B");
    if (ids.size() > 16) return invalid_argument("ids", "at most 16 runs");
    for (const auto& id : ids) {
      ARMHIVE_ASSIGN_OR_RETURN(BenchmarkRun run, visible_run(who, id));
      (void)run;
    }
    std::string format = req.has_param("format") ? req.get_param_value("format") : "html";
    if (format == "json") {
      ARMHIVE_ASSIGN_OR_RETURN(json j, benchmarks->compare(ids));
      write_json(res, 200, j);
    } else if (format == "html") {
      ARMHIVE_ASSIGN_OR_RETURN(std::string html, benchmarks->report_html(ids));
      res.status = 200;
      res.set_content(html, "text/html; charset=utf-8");
    } else {
      return invalid_argument("format", "must be html or json");
    }
    return Status::ok();
  }

  // --- health, metrics ---

  Status health(const TokenInfo&, const httplib::Request&, httplib::Response& res) {
    HealthDto h;
    h.version = options.version;
    write_json(res, 200, to_json(h));
    return Status::ok();
  }

  Status metrics_text(const TokenInfo&, const httplib::Request&, httplib::Response& res) {
    LeaseFilter f;
    f.include_ended = false;
    f.limit = 1000000;
    auto active = leases.list_leases(f);
    if (active.is_ok()) {
      std::map<std::string, int> by_state;
      for (auto s : {LeaseState::kPending, LeaseState::kProvisioning, LeaseState::kReady,
                     LeaseState::kReleasing}) {
        by_state[std::string(to_string(s))] = 0;
      }
      for (const auto& l : *active) {
        if (!is_terminal(l.state)) ++by_state[std::string(to_string(l.state))];
      }
      metrics.clear("armhive_leases");
      for (const auto& [state, n] : by_state) metrics.set("armhive_leases", {{"state", state}}, n);
    }
    for (const char* g :
         {"armhive_pool_warm_vms", "armhive_pool_starting_vms", "armhive_pool_leased_vms",
          "armhive_pool_pending_leases", "armhive_host_cores", "armhive_host_cores_allocated",
          "armhive_host_fragmentation"}) {
      metrics.clear(g);
    }
    for (const auto& p : leases.pools()) {
      Metrics::Labels l{{"pool", p.config.name}};
      metrics.set("armhive_pool_warm_vms", l, p.warm);
      metrics.set("armhive_pool_starting_vms", l, p.starting);
      metrics.set("armhive_pool_leased_vms", l, p.leased);
      metrics.set("armhive_pool_pending_leases", l, p.pending_leases);
    }
    for (const auto& h : leases.hosts()) {
      std::map<std::string, int> roles;
      std::set<int> allocated;
      for (const auto& c : h.cores) {
        ++roles[c.role];
        if (!c.vm_name.empty() || !c.lease_id.empty()) allocated.insert(c.cpu);
      }
      std::string host = h.topology.hostname;
      for (const auto& [role, n] : roles) {
        metrics.set("armhive_host_cores", {{"host", host}, {"role", role}}, n);
      }
      metrics.set("armhive_host_cores_allocated", {{"host", host}},
                  static_cast<double>(allocated.size()));
      metrics.set("armhive_host_fragmentation", {{"host", host}}, h.fragmentation);
    }
    metrics.set("armhive_build_info", {{"version", options.version}}, 1);
    res.status = 200;
    res.set_content(metrics.exposition(), "text/plain; version=0.0.4; charset=utf-8");
    return Status::ok();
  }

  void install_routes() {
    using R = const httplib::Request&;
    using W = httplib::Response&;
    using T = const TokenInfo&;
    auto bind = [this](Status (Impl::*fn)(T, R, W)) {
      return [this, fn](T who, R req, W res) { return (this->*fn)(who, req, res); };
    };
    route("GET", "/healthz", "/healthz", Access::kPublic, bind(&Impl::health));
    route("GET", "/metrics", "/metrics", Access::kPublic, bind(&Impl::metrics_text));
    route("POST", "/v1/leases", "/v1/leases", Access::kWrite, bind(&Impl::create_lease));
    route("GET", "/v1/leases", "/v1/leases", Access::kRead, bind(&Impl::list_leases));
    route("GET", R"(/v1/leases/([^/]+))", "/v1/leases/{id}", Access::kRead, bind(&Impl::get_lease));
    route("DELETE", R"(/v1/leases/([^/]+))", "/v1/leases/{id}", Access::kWrite,
          bind(&Impl::release_lease));
    route("POST", R"(/v1/leases/([^/]+)/renew)", "/v1/leases/{id}/renew", Access::kWrite,
          bind(&Impl::renew_lease));
    route("POST", R"(/v1/leases/([^/]+)/exec)", "/v1/leases/{id}/exec", Access::kWrite,
          bind(&Impl::exec));
    route("GET", R"(/v1/leases/([^/]+)/console)", "/v1/leases/{id}/console", Access::kRead,
          bind(&Impl::console));
    route("POST", R"(/v1/leases/([^/]+)/benchmarks)", "/v1/leases/{id}/benchmarks", Access::kWrite,
          bind(&Impl::start_benchmark));
    route("GET", "/v1/pools", "/v1/pools", Access::kRead, bind(&Impl::list_pools));
    route("GET", "/v1/hosts", "/v1/hosts", Access::kRead, bind(&Impl::list_hosts));
    route("GET", "/ui/hosts", "/ui/hosts", Access::kRead, bind(&Impl::hosts_page));
    route("GET", "/v1/events", "/v1/events", Access::kRead, bind(&Impl::events));
    route("GET", "/v1/benchmarks", "/v1/benchmarks", Access::kRead, bind(&Impl::list_benchmarks));
    // Before /v1/benchmarks/{id}: routes match in registration order.
    route("GET", "/v1/benchmarks/compare", "/v1/benchmarks/compare", Access::kRead,
          bind(&Impl::compare_benchmarks));
    route("GET", R"(/v1/benchmarks/([^/]+)/report\.html)", "/v1/benchmarks/{id}/report.html",
          Access::kRead,
          [this](T who, R req, W res) { return benchmark_report(who, req, res, false); });
    route("GET", R"(/v1/benchmarks/([^/]+)/report\.csv)", "/v1/benchmarks/{id}/report.csv",
          Access::kRead,
          [this](T who, R req, W res) { return benchmark_report(who, req, res, true); });
    route("GET", R"(/v1/benchmarks/([^/]+))", "/v1/benchmarks/{id}", Access::kRead,
          bind(&Impl::get_benchmark));
  }
};

HttpServer::HttpServer(HttpOptions options, LeaseService& leases, BenchmarkService* benchmarks,
                       TokenStore& tokens, AuditLog& audit, Metrics& metrics)
    : impl_(
          std::make_unique<Impl>(std::move(options), leases, benchmarks, tokens, audit, metrics)) {}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start() {
  Impl& d = *impl_;
  if (d.server) return conflict("the server is already started");
  const HttpOptions& o = d.options;
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return invalid_argument("tls", "set both the certificate and the key file, or neither");
  }
  if (o.threads < 2) return invalid_argument("threads", "must be at least 2");
  if (!o.tls_cert_file.empty()) {
    auto ssl =
        std::make_unique<httplib::SSLServer>(o.tls_cert_file.c_str(), o.tls_key_file.c_str());
    if (!ssl->is_valid()) {
      return unavailable("cannot load the TLS certificate or key",
                         o.tls_cert_file + ", " + o.tls_key_file);
    }
    d.server = std::move(ssl);
    d.tls = true;
  } else {
    d.server = std::make_unique<httplib::Server>();
  }
  httplib::Server& s = *d.server;
  size_t threads = static_cast<size_t>(o.threads);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_payload_max_length(o.max_body_bytes);
  s.set_read_timeout(o.read_timeout);
  s.set_write_timeout(o.write_timeout);
  s.set_keep_alive_timeout(5);
  // httplib's default also sets SO_REUSEPORT, which lets a second daemon bind the same port
  // silently; SO_REUSEADDR alone allows quick restarts without that.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof yes);
  });
  s.set_exception_handler(
      [&d](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        d.log("error: " + req.method + " " + req.path + ": " + what);
        write_problem(res, internal_error("internal error while handling the request"));
      });
  s.set_error_handler(httplib::Server::HandlerWithResponse([&d](const httplib::Request& req,
                                                                httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    Status st;
    if (res.status == 413) {
      st =
          Status(ErrorCode::kPayloadTooLarge,
                 "the request body exceeds " + std::to_string(d.options.max_body_bytes) + " bytes");
    } else if (res.status == 404) {
      st = not_found("no endpoint " + req.method + " " + req.path + " (see /v1 in openapi.yaml)");
    } else if (res.status == 400) {
      st = invalid_argument("request", "malformed HTTP request");
    } else {
      st = Status(code_from_http(res.status), "HTTP " + std::to_string(res.status));
    }
    int status = res.status;
    write_problem(res, st);
    res.status = status;
    d.metrics.inc("armhive_api_requests_total",
                  {{"method", req.method}, {"route", "other"}, {"code", std::to_string(status)}});
    return httplib::Server::HandlerResponse::Handled;
  }));
  if (o.log) {
    s.set_logger([&d](const httplib::Request& req, const httplib::Response& res) {
      d.log(req.remote_addr + " " + req.method + " " + req.path + " " + std::to_string(res.status));
    });
  }
  d.describe_metrics();
  d.install_routes();

  if (o.port == 0) {
    d.bound_port = s.bind_to_any_port(o.bind_address);
    if (d.bound_port <= 0) {
      d.server.reset();
      return unavailable("cannot bind an ephemeral port", o.bind_address);
    }
  } else {
    if (!s.bind_to_port(o.bind_address, o.port)) {
      d.server.reset();
      return unavailable("cannot bind (address in use, or not a local address?)",
                         o.bind_address + ":" + std::to_string(o.port));
    }
    d.bound_port = o.port;
  }
  d.listener = std::thread([&s] { s.listen_after_bind(); });
  // stop() right after start() must find the server running, or it would not stop it.
  for (int i = 0; i < 5000 && !s.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::ok();
}

void HttpServer::stop() {
  Impl& d = *impl_;
  if (!d.server) return;
  d.stopping = true;
  d.server->stop();
  if (d.listener.joinable()) d.listener.join();
  d.server.reset();
  d.bound_port = 0;
  d.stopping = false;
}

int HttpServer::port() const { return impl_->bound_port; }

std::string HttpServer::url() const {
  return std::string(impl_->tls ? "https" : "http") + "://" +
         (impl_->options.bind_address == "0.0.0.0" ? std::string("127.0.0.1")
                                                   : impl_->options.bind_address) +
         ":" + std::to_string(impl_->bound_port);
}

}  // namespace armhive
