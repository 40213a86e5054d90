#include "api/client.h"

#include <httplib.h>

#include <algorithm>
#include <random>

#include "api/exec_stream.h"
#include "api/json.h"
#include "api/server_url.h"
#include "base/url_encode.h"

namespace armhive {
namespace {

using nlohmann::json;

Status status_from_http_error(httplib::Error e, const std::string& server) {
  std::string what = httplib::to_string(e);
  if (e == httplib::Error::ConnectionTimeout) {
    return {ErrorCode::kTimeout, "timed out connecting to " + server};
  }
  if (e == httplib::Error::Read) {
    return {ErrorCode::kUnavailable,
            "no complete answer from " + server + " (connection closed or read timed out)"};
  }
  if (e == httplib::Error::SSLServerVerification) {
    return unavailable("TLS certificate of " + server +
                       " not trusted (give the CA with --ca-file, or --insecure)");
  }
  if (e == httplib::Error::Connection) what = "connection failed";
  return unavailable("cannot reach " + server + ": " + what +
                     " (is armhived running? check --server / ARMHIVE_SERVER)");
}

Status status_from_response(int http, const std::string& body) {
  ErrorCode code = code_from_http(http);
  if (code == ErrorCode::kOk) code = ErrorCode::kInternal;
  auto j = parse_json(body);
  if (j.is_ok()) {
    auto p = problem_from_json(*j);
    if (p.is_ok() && !p->detail.empty()) {
      return {code, p->detail, {}, p->field};
    }
  }
  std::string snippet = body.substr(0, 200);
  return {code, "HTTP " + std::to_string(http) + (snippet.empty() ? "" : ": " + snippet)};
}

template <typename T, typename F>
Result<T> decode(const Result<std::string>& body, F parse) {
  if (!body.is_ok()) return body.status();
  auto j = parse_json(*body, "response");
  if (!j.is_ok()) return internal_error("the server sent invalid JSON: " + j.status().message());
  auto v = parse(*j);
  if (!v.is_ok()) {
    return internal_error("unexpected response from the server: " + v.status().to_string());
  }
  return std::move(v).value();
}

std::string path_id(const std::string& id) { return url_encode(id); }

// True when httplib gave up before any of the request left: trying another server is safe
// for every call.
bool nothing_sent(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
    case httplib::Error::BindIPAddress:
    case httplib::Error::ConnectionTimeout:
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts:
    case httplib::Error::SSLServerVerification:
      return true;
    default:
      return false;
  }
}

// A few words on a failure, for the message that names every server tried.
std::string failure_words(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "connection failed";
    case httplib::Error::ConnectionTimeout:
      return "timed out connecting";
    case httplib::Error::Read:
      return "no complete answer (connection closed or read timed out)";
    case httplib::Error::SSLServerVerification:
      return "TLS certificate not trusted (give the CA with --ca-file, or --insecure)";
    default:
      return httplib::to_string(e);
  }
}

void configure(httplib::Client& cli, const ClientOptions& o, std::chrono::seconds read_timeout) {
  // With several servers a dead one must not hold a call for the whole timeout before the next
  // is tried: a connection to a live armhived is made in well under 5 s.
  cli.set_connection_timeout(o.servers.size() > 1 ? std::min(o.timeout, std::chrono::seconds(5))
                                                  : o.timeout);
  cli.set_read_timeout(read_timeout);
  cli.set_write_timeout(o.timeout);
  if (!o.ca_file.empty()) cli.set_ca_cert_path(o.ca_file.c_str());
  if (o.insecure) cli.enable_server_certificate_verification(false);
}

// A random Idempotency-Key for a lease creation that may be sent to more than one server.
std::string fresh_idempotency_key() {
  std::random_device rd;
  std::string key = "armhive-";
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 8; ++i) {
    uint32_t v = rd();
    for (int j = 0; j < 4; ++j) {
      key += kHex[v & 0xf];
      key += kHex[(v >> 4) & 0xf];
      v >>= 8;
    }
  }
  return key;
}

}  // namespace

// What one request to one server came to, for Client::failover.
struct Client::Attempt {
  enum class Next {
    kDone,      // the call is over: `failure` is its error, or ok
    kNext,      // not reached, a 503, or a safe repeat: try the next server
    kRedirect,  // a 307/308: follow `location`
  };
  Next next = Next::kDone;
  bool answered = false;  // an HTTP answer arrived (its server becomes the sticky one)
  bool was_503 = false;
  Status failure;
  std::string why;  // kNext: a few words for the message naming every server tried
  std::string location;

  static Attempt move_on(Status failure, std::string why) {
    Attempt a;
    a.next = Next::kNext;
    a.failure = std::move(failure);
    a.why = std::move(why);
    return a;
  }
  static Attempt done(Status failure) {
    Attempt a;
    a.failure = std::move(failure);
    return a;
  }
  // httplib failed: move on when nothing was sent or the call is safe to repeat.
  static Attempt transport(httplib::Error e, const std::string& origin, bool repeatable) {
    Status st = status_from_http_error(e, origin);
    if (nothing_sent(e) || repeatable) return move_on(std::move(st), failure_words(e));
    return done(std::move(st));
  }
  // An HTTP answer: a 503 moves on unless it is the last server's; a 307/308 with a Location
  // is followed; anything else is the call's answer (kDone, failure ok: the caller decodes it).
  static Attempt answer(int status, const std::string& location, const std::string& body,
                        bool last) {
    Attempt a;
    a.answered = true;
    a.was_503 = status == 503;
    if (status == 503 && !last) {
      a.next = Next::kNext;
      a.failure = status_from_response(status, body);
      a.why = "503 " + a.failure.message();
    } else if ((status == 307 || status == 308) && !location.empty()) {
      a.next = Next::kRedirect;
      a.location = location;
    }
    return a;
  }
};

Result<std::unique_ptr<Client>> Client::create(ClientOptions options) {
  std::vector<std::string> servers = options.servers;
  if (servers.empty()) servers.push_back(options.server);
  for (size_t i = 0; i < servers.size(); ++i) {
    auto url = normalize_server(servers[i]);
    if (!url.is_ok()) {
      if (servers.size() == 1) return url.status();
      return invalid_argument("server", "entry " + std::to_string(i + 1) + " of " +
                                            std::to_string(servers.size()) + ", " +
                                            url.status().message());
    }
    servers[i] = std::move(url).value();
  }
  options.servers = std::move(servers);
  options.server = options.servers.front();
  return std::unique_ptr<Client>(new Client(std::move(options)));
}

Client::~Client() = default;

const std::string& Client::current_server() const {
  return options_.servers[preferred_.load() % options_.servers.size()];
}

Status Client::failover(const std::string& target, const AttemptFn& attempt) {
  const std::vector<std::string>& servers = options_.servers;
  const size_t n = servers.size();
  const size_t start = preferred_.load() % n;
  std::vector<std::string> passed;  // "SERVER: why" for each server passed over
  std::optional<Status> last_503;
  Status last_failure;
  for (size_t i = 0; i < n; ++i) {
    const size_t index = (start + i) % n;
    const bool last = i + 1 == n;
    std::string origin = servers[index];
    size_t answered_by = index;
    Attempt a = attempt(origin, target, last);
    if (a.next == Attempt::Next::kRedirect) {
      auto to = redirect_target(origin, a.location);
      if (!to.is_ok()) {
        a = Attempt::move_on(to.status(), "a redirect not followed");
      } else {
        origin = to->origin;
        auto listed = std::find(servers.begin(), servers.end(), origin);
        if (listed != servers.end()) answered_by = static_cast<size_t>(listed - servers.begin());
        a = attempt(origin, to->target, last);
        if (a.next == Attempt::Next::kRedirect) {
          a = Attempt::move_on(unavailable(origin + " redirected again, to " + a.location +
                                           " (a client follows one redirect)"),
                               "redirected again");
        }
      }
    }
    if (a.next == Attempt::Next::kDone) {
      if (a.answered && !a.was_503) preferred_.store(answered_by);
      return a.failure;
    }
    passed.push_back(origin + ": " + a.why);
    if (a.was_503) last_503 = a.failure;
    last_failure = a.failure;
  }
  if (n == 1) return last_failure;
  if (last_503) return *last_503;
  std::string list;
  for (const auto& p : passed) list += (list.empty() ? "" : "; ") + p;
  return unavailable("no armhived answered: " + list +
                     " (is armhived running? check --server / ARMHIVE_SERVER)");
}

Result<Client::Response> Client::call(const std::string& method, const std::string& path,
                                      const std::string& body,
                                      const std::map<std::string, std::string>& headers,
                                      std::chrono::seconds read_timeout, bool repeatable) {
  if (method != "GET" && method != "POST" && method != "DELETE") {
    return internal_error("unsupported method " + method);
  }
  Response out;
  Status st = failover(
      path, [&](const std::string& origin, const std::string& target, bool last) -> Attempt {
        httplib::Client cli(origin);
        configure(cli, options_, read_timeout);
        httplib::Headers h;
        for (const auto& [k, v] : headers) h.emplace(k, v);
        if (!options_.token.empty()) h.emplace("Authorization", "Bearer " + options_.token);
        h.emplace("User-Agent", "armhive-cli");
        httplib::Result res = method == "GET"    ? cli.Get(target, h)
                              : method == "POST" ? cli.Post(target, h, body, "application/json")
                                                 : cli.Delete(target, h);
        if (!res) return Attempt::transport(res.error(), origin, repeatable);
        Attempt a =
            Attempt::answer(res->status, res->get_header_value("Location"), res->body, last);
        if (a.next != Attempt::Next::kDone) return a;
        out.status = res->status;
        out.content_type = res->get_header_value("Content-Type");
        out.body = std::move(res->body);
        if (options_.on_response) {
          options_.on_response({method, target, out.status, out.content_type, out.body});
        }
        a.failure = Status::ok();  // call_ok() decides what a status means
        return a;
      });
  if (!st.is_ok()) return st;
  return out;
}

Result<std::string> Client::call_ok(const std::string& method, const std::string& path,
                                    const std::string& body,
                                    const std::map<std::string, std::string>& headers,
                                    std::optional<std::chrono::seconds> read_timeout,
                                    std::optional<bool> repeatable) {
  ARMHIVE_ASSIGN_OR_RETURN(
      Response r, call(method, path, body, headers, read_timeout.value_or(options_.timeout),
                       repeatable.value_or(method == "GET")));
  if (r.status < 200 || r.status >= 300) return status_from_response(r.status, r.body);
  return std::move(r.body);
}

Result<HealthDto> Client::health() {
  return decode<HealthDto>(call_ok("GET", "/healthz"), [](const json& j) -> Result<HealthDto> {
    if (!j.is_object() || !j.contains("status")) return invalid_argument("status", "missing");
    HealthDto h;
    h.status = j.value("status", "");
    h.version = j.value("version", "");
    if (j.contains("leader")) {
      auto leader = cluster_leader_from_json(j["leader"]);
      if (!leader.is_ok()) return leader.status();
      h.leader = std::move(leader).value();
    }
    if (j.contains("restart_required") && j["restart_required"].is_array()) {
      for (const json& line : j["restart_required"]) {
        if (line.is_string()) h.restart_required.push_back(line.get<std::string>());
      }
    }
    return h;
  });
}

Result<LeaseDto> Client::create_lease(const LeaseCreateRequest& request,
                                      const std::string& idempotency_key) {
  std::map<std::string, std::string> h;
  std::string key = idempotency_key;
  if (key.empty() && options_.servers.size() > 1) key = fresh_idempotency_key();
  if (!key.empty()) h["Idempotency-Key"] = key;
  // Keyed, a creation the first server may have made is answered by the next with that lease.
  return decode<LeaseDto>(
      call_ok("POST", "/v1/leases", dump_json(to_json(request)), h, std::nullopt, !key.empty()),
      lease_from_json);
}

Result<LeasePage> Client::list_leases(const LeaseQuery& q) {
  std::string path = "/v1/leases";
  std::string sep = "?";
  auto add = [&](const std::string& k, const std::string& v) {
    path += sep + k + "=" + url_encode(v);
    sep = "&";
  };
  if (!q.pool.empty()) add("pool", q.pool);
  if (!q.state.empty()) add("state", q.state);
  if (!q.owner.empty()) add("owner", q.owner);
  for (const auto& [k, v] : q.labels) add("label", k + "=" + v);
  if (q.active) add("active", "true");
  if (q.limit > 0) add("limit", std::to_string(q.limit));
  if (!q.cursor.empty()) add("cursor", q.cursor);
  return decode<LeasePage>(call_ok("GET", path), lease_page_from_json);
}

namespace {

std::string usage_path(const UsageQueryDto& q) {
  std::string path = "/v1/usage";
  std::string sep = "?";
  auto add = [&](const std::string& k, const std::string& v) {
    if (v.empty()) return;
    path += sep + k + "=" + url_encode(v);
    sep = "&";
  };
  add("since", q.since);
  add("until", q.until);
  add("group_by", q.group_by);
  add("label", q.label);
  return path;
}

}  // namespace

Result<UsageReportDto> Client::usage(const UsageQueryDto& query) {
  return decode<UsageReportDto>(call_ok("GET", usage_path(query)), usage_report_from_json);
}

Result<std::string> Client::usage_csv(const UsageQueryDto& query) {
  return call_ok("GET", usage_path(query), {}, {{"Accept", "text/csv"}});
}

Result<LeaseDto> Client::get_lease(const std::string& id) {
  return decode<LeaseDto>(call_ok("GET", "/v1/leases/" + path_id(id)), lease_from_json);
}

Result<LeaseDto> Client::wait_lease(const std::string& id, std::chrono::seconds timeout) {
  std::string path =
      "/v1/leases/" + path_id(id) + "?wait=ready&timeout=" + std::to_string(timeout.count()) + "s";
  // A long-poll: not repeated once sent (the next server would wait the whole timeout again).
  return decode<LeaseDto>(call_ok("GET", path, {}, {}, timeout + options_.timeout, false),
                          lease_from_json);
}

Result<LeaseDto> Client::renew_lease(const std::string& id, int64_t ttl_seconds) {
  LeaseRenewRequest r;
  r.ttl_seconds = ttl_seconds;
  return decode<LeaseDto>(
      call_ok("POST", "/v1/leases/" + path_id(id) + "/renew", dump_json(to_json(r))),
      lease_from_json);
}

Result<SshCertificateDto> Client::ssh_certificate(const std::string& id,
                                                  const std::string& public_key) {
  SshCertificateRequest r;
  r.public_key = public_key;
  return decode<SshCertificateDto>(
      call_ok("POST", "/v1/leases/" + path_id(id) + "/ssh-certificate", dump_json(to_json(r))),
      ssh_certificate_from_json);
}

Result<LeaseDto> Client::release_lease(const std::string& id) {
  return decode<LeaseDto>(call_ok("DELETE", "/v1/leases/" + path_id(id)), lease_from_json);
}

Result<ExecResultDto> Client::exec(const std::string& id, const ExecRequestDto& request) {
  auto read_timeout = std::chrono::seconds(request.timeout_s) + options_.timeout;
  return decode<ExecResultDto>(call_ok("POST", "/v1/leases/" + path_id(id) + "/exec",
                                       dump_json(to_json(request)), {}, read_timeout),
                               exec_result_from_json);
}

Result<Client::ExecOutcome> Client::exec_stream(
    const std::string& id, const ExecRequestDto& request,
    const std::function<void(std::string_view, std::string_view)>& on_output) {
  nlohmann::json body = to_json(request);
  if (request.timeout_s <= 0) body.erase("timeout_s");
  const std::string request_body = dump_json(body);
  std::optional<ExecOutcome> outcome;
  Status st = failover(
      "/v1/leases/" + path_id(id) + "/exec",
      [&](const std::string& origin, const std::string& target, bool last) -> Attempt {
        httplib::Client cli(origin);
        // The server sends a keep-alive newline while the command is silent.
        configure(cli, options_, std::max(options_.timeout, std::chrono::seconds(30)));
        httplib::Request req;
        req.method = "POST";
        req.path = target;
        req.body = request_body;
        req.set_header("Content-Type", "application/json");
        req.set_header("Accept", "application/x-ndjson");
        req.set_header("User-Agent", "armhive-cli");
        if (!options_.token.empty()) req.set_header("Authorization", "Bearer " + options_.token);
        int http_status = 0;
        std::string error_body, pending, location;
        Status line_status;
        req.response_handler = [&](const httplib::Response& r) {
          http_status = r.status;
          location = r.get_header_value("Location");
          return true;
        };
        req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
          if (http_status != 200) {
            error_body.append(data, len);
            return error_body.size() < kMaxBodyBytes;
          }
          pending.append(data, len);
          size_t nl;
          while ((nl = pending.find('\n')) != std::string::npos) {
            auto line = parse_exec_stream_line(std::string_view(pending).substr(0, nl));
            pending.erase(0, nl + 1);
            if (!line.is_ok()) {
              line_status = line.status();
              return false;
            }
            switch (line->kind) {
              case ExecStreamLine::Kind::kKeepAlive:
                break;
              case ExecStreamLine::Kind::kOutput:
                on_output(line->stream, line->data);
                break;
              case ExecStreamLine::Kind::kResult:
                outcome = ExecOutcome{line->result, line->cancelled};
                break;
              case ExecStreamLine::Kind::kError:
                line_status = Status(code_from_http(line->error.status), line->error.detail, {},
                                     line->error.field);
                return false;
            }
          }
          return true;
        };
        auto res = cli.send(req);
        if (!line_status.is_ok()) return Attempt::done(line_status);
        if (outcome) {
          Attempt a = Attempt::done(Status::ok());
          a.answered = true;
          return a;
        }
        // Not repeatable: the command may already run in the guest.
        if (http_status == 0) return Attempt::transport(res.error(), origin, false);
        if (http_status != 200) {
          const std::string& problem = error_body.empty() && res ? res->body : error_body;
          Attempt a = Attempt::answer(http_status, location, problem, last);
          if (a.next != Attempt::Next::kDone) return a;
          a.failure = status_from_response(http_status, problem);
          return a;
        }
        return Attempt::done(Status(ErrorCode::kUnavailable,
                                    "the exec stream ended without the command's outcome (server "
                                    "stopped or connection lost)",
                                    id));
      });
  if (!st.is_ok()) return st;
  return *outcome;
}

Result<std::string> Client::console(const std::string& id, size_t max_bytes) {
  std::string path = "/v1/leases/" + path_id(id) + "/console";
  if (max_bytes > 0) path += "?max_bytes=" + std::to_string(max_bytes);
  return call_ok("GET", path);
}

Result<FileTransferDto> Client::put_file(
    const std::string& id, const std::string& path, bool tar, uint64_t size,
    const std::string& sha256,
    const std::function<Result<std::string>(uint64_t offset, size_t max)>& read) {
  std::string first_target = "/v1/leases/" + path_id(id) + "/files?path=" + url_encode(path);
  if (!sha256.empty()) first_target += "&sha256=" + sha256;
  std::string answer;
  Status st = failover(
      first_target,
      [&](const std::string& origin, const std::string& target, bool last) -> Attempt {
        httplib::Client cli(origin);
        // The answer comes after the guest checked and moved (or unpacked) the file.
        configure(cli, options_, std::max(options_.timeout, std::chrono::seconds(600)));
        httplib::Headers h;
        if (!options_.token.empty()) h.emplace("Authorization", "Bearer " + options_.token);
        h.emplace("User-Agent", "armhive-cli");
        Status read_status;
        // Another server (a 503, a redirect) is sent the file from its start: read() takes offsets.
        auto res = cli.Put(
            target, h, static_cast<size_t>(size),
            [&](size_t offset, size_t length, httplib::DataSink& sink) {
              auto piece = read(offset, std::min<size_t>(length, 256 * 1024));
              if (!piece.is_ok()) {
                read_status = piece.status();
                return false;
              }
              if (piece->empty()) {
                read_status = unavailable("the local file ended early (did it change?)");
                return false;
              }
              return sink.write(piece->data(), piece->size());
            },
            tar ? "application/x-tar" : "application/octet-stream");
        if (!read_status.is_ok()) return Attempt::done(read_status);
        if (!res) return Attempt::transport(res.error(), origin, false);
        Attempt a =
            Attempt::answer(res->status, res->get_header_value("Location"), res->body, last);
        if (a.next != Attempt::Next::kDone) return a;
        if (options_.on_response) {
          options_.on_response(
              {"PUT", target, res->status, res->get_header_value("Content-Type"), res->body});
        }
        if (res->status < 200 || res->status >= 300) {
          a.failure = status_from_response(res->status, res->body);
          return a;
        }
        answer = std::move(res->body);
        return a;
      });
  if (!st.is_ok()) return st;
  return decode<FileTransferDto>(Result<std::string>(std::move(answer)), file_transfer_from_json);
}

Status Client::get_file(const std::string& id, const std::string& path,
                        const std::function<Status(const std::string& kind, uint64_t size,
                                                   const std::string& sha256)>& on_begin,
                        const std::function<Status(std::string_view data)>& on_data) {
  return failover(
      "/v1/leases/" + path_id(id) + "/files?path=" + url_encode(path),
      [&](const std::string& origin, const std::string& target, bool last) -> Attempt {
        httplib::Client cli(origin);
        // Directories are packed (and files checksummed) in the guest before the first byte.
        configure(cli, options_, std::max(options_.timeout, std::chrono::seconds(600)));
        httplib::Headers h;
        if (!options_.token.empty()) h.emplace("Authorization", "Bearer " + options_.token);
        h.emplace("User-Agent", "armhive-cli");
        int http_status = 0;
        std::string error_body, content_type, location;
        Status callback_status;
        auto res = cli.Get(
            target, h,
            [&](const httplib::Response& r) {
              http_status = r.status;
              content_type = r.get_header_value("Content-Type");
              location = r.get_header_value("Location");
              if (r.status != 200) return true;
              uint64_t size = 0;
              try {
                size = std::stoull(r.get_header_value("X-Armhive-Size"));
              } catch (const std::exception&) {
                callback_status = unavailable("the server sent no X-Armhive-Size");
                return false;
              }
              callback_status = on_begin(r.get_header_value("X-Armhive-Kind"), size,
                                         r.get_header_value("X-Armhive-Sha256"));
              return callback_status.is_ok();
            },
            [&](const char* data, size_t len) {
              if (http_status != 200) {
                error_body.append(data, len);
                return error_body.size() < kMaxBodyBytes;
              }
              callback_status = on_data(std::string_view(data, len));
              return callback_status.is_ok();
            });
        if (!callback_status.is_ok()) return Attempt::done(callback_status);
        if (http_status == 200 && !res) {
          return Attempt::done(
              unavailable("the download broke off before its end (the server's checks failed, "
                          "or the connection was lost)"));
        }
        if (http_status == 0) return Attempt::transport(res.error(), origin, false);
        if (http_status != 200) {
          Attempt a = Attempt::answer(http_status, location, error_body, last);
          if (a.next != Attempt::Next::kDone) return a;
          if (options_.on_response) {
            options_.on_response({"GET", target, http_status, content_type, error_body});
          }
          a.failure = status_from_response(http_status, error_body);
          return a;
        }
        Attempt a = Attempt::done(Status::ok());
        a.answered = true;
        return a;
      });
}

Result<std::vector<PoolDto>> Client::pools() {
  return decode<std::vector<PoolDto>>(call_ok("GET", "/v1/pools"), pools_from_json);
}

Result<std::vector<HostDto>> Client::hosts() {
  return decode<std::vector<HostDto>>(call_ok("GET", "/v1/hosts"), hosts_from_json);
}

Result<ClusterDto> Client::cluster() {
  return decode<ClusterDto>(call_ok("GET", "/v1/cluster"), cluster_from_json);
}

Result<GithubStateDto> Client::github_state() {
  return decode<GithubStateDto>(call_ok("GET", "/v1/github"), github_state_from_json);
}

Result<HostDto> Client::set_host_admin(const std::string& name, const std::string& action) {
  return decode<HostDto>(
      call_ok("POST", "/v1/hosts/" + path_id(name) + "/" + path_id(action), "{}"), host_from_json);
}

Result<HostDto> Client::add_host(const HostCreateDto& host) {
  // Connecting to the host and setting it up may take the daemon's libvirt_timeout (60 s).
  return decode<HostDto>(call_ok("POST", "/v1/hosts", dump_json(to_json(host)), {},
                                 std::max(options_.timeout, std::chrono::seconds(120))),
                         host_from_json);
}

Status Client::remove_host(const std::string& name) {
  return call_ok("DELETE", "/v1/hosts/" + path_id(name)).status();
}

Result<std::string> Client::hosts_svg() { return call_ok("GET", "/v1/hosts?format=svg"); }

Status Client::stream_events(uint64_t since, bool follow,
                             const std::function<bool(const EventDto&)>& on_event) {
  std::string path = "/v1/events?since=" + std::to_string(since) + (follow ? "" : "&follow=false");
  return failover(
      path, [&](const std::string& origin, const std::string& target, bool last) -> Attempt {
        httplib::Client cli(origin);
        // The server sends a keep-alive newline every few seconds, so a long silence is a dead
        // link.
        configure(cli, options_, std::max(options_.timeout, std::chrono::seconds(30)));
        httplib::Headers h;
        if (!options_.token.empty()) h.emplace("Authorization", "Bearer " + options_.token);
        int http_status = 0;
        std::string error_body, pending, location;
        Status callback_status;
        bool stopped = false;
        auto res = cli.Get(
            target, h,
            [&](const httplib::Response& r) {
              http_status = r.status;
              location = r.get_header_value("Location");
              return true;
            },
            [&](const char* data, size_t len) {
              if (http_status != 200) {
                error_body.append(data, len);
                return error_body.size() < kMaxBodyBytes;
              }
              pending.append(data, len);
              size_t nl;
              while ((nl = pending.find('\n')) != std::string::npos) {
                std::string line = pending.substr(0, nl);
                pending.erase(0, nl + 1);
                if (line.empty()) continue;  // keep-alive
                auto j = parse_json(line, "event");
                if (!j.is_ok()) {
                  callback_status = internal_error("the server sent an invalid event line");
                  return false;
                }
                auto e = event_from_json(*j);
                if (!e.is_ok()) {
                  callback_status = internal_error("unexpected event: " + e.status().to_string());
                  return false;
                }
                if (!on_event(*e)) {
                  stopped = true;
                  return false;
                }
              }
              return true;
            });
        if (!callback_status.is_ok()) return Attempt::done(callback_status);
        Attempt ok = Attempt::done(Status::ok());
        ok.answered = true;
        if (stopped) return ok;
        if (http_status == 0) return Attempt::transport(res.error(), origin, false);
        if (!res) return Attempt::done(status_from_http_error(res.error(), origin));
        if (http_status != 200) {
          const std::string& problem = error_body.empty() ? res->body : error_body;
          Attempt a = Attempt::answer(http_status, location, problem, last);
          if (a.next != Attempt::Next::kDone) return a;
          a.failure = status_from_response(http_status, problem);
          return a;
        }
        return ok;
      });
}

Result<BenchmarkRunDto> Client::start_benchmark(const std::string& lease_id,
                                                const std::string& body_json) {
  return decode<BenchmarkRunDto>(
      call_ok("POST", "/v1/leases/" + path_id(lease_id) + "/benchmarks", body_json),
      benchmark_run_dto_from_json);
}

Result<BenchmarkRunDto> Client::get_benchmark(const std::string& id) {
  return decode<BenchmarkRunDto>(call_ok("GET", "/v1/benchmarks/" + path_id(id)),
                                 benchmark_run_dto_from_json);
}

Result<std::vector<BenchmarkRunDto>> Client::list_benchmarks(const std::string& lease_id) {
  std::string path = "/v1/benchmarks";
  if (!lease_id.empty()) path += "?lease_id=" + url_encode(lease_id);
  return decode<std::vector<BenchmarkRunDto>>(call_ok("GET", path), benchmark_runs_from_json);
}

Result<std::string> Client::benchmark_report(const std::string& id, const std::string& format) {
  return call_ok("GET", "/v1/benchmarks/" + path_id(id) + "/report." + format);
}

Result<std::string> Client::compare_benchmarks(const std::vector<std::string>& ids,
                                               const std::string& format) {
  std::string list;
  for (const auto& id : ids) list += (list.empty() ? "" : ",") + url_encode(id);
  return call_ok("GET", "/v1/benchmarks/compare?ids=" + list + "&format=" + format);
}

}  // namespace armhive
