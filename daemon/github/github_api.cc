#include "daemon/github/github_api.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "base/bounded_number.h"
#include "base/json_depth.h"
#include "base/thread_annotations.h"
#include "base/utc_time.h"
#include "base/validation.h"
#include "daemon/github/app_token.h"
#include "daemon/github/rate_limit_backoff.h"

namespace armhive {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using nlohmann::json;

struct Url {
  bool tls = true;
  std::string host;
  std::string port;
  std::string prefix;  // path before /orgs/..., no trailing slash
};

Result<Url> parse_url(const std::string& text) {
  Url u;
  std::string rest;
  if (text.rfind("https://", 0) == 0) {
    rest = text.substr(8);
  } else if (text.rfind("http://", 0) == 0) {
    u.tls = false;
    rest = text.substr(7);
  } else {
    return invalid_argument("github.api_url", "must start with https:// (or http:// for tests)");
  }
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  u.prefix = slash == std::string::npos ? "" : rest.substr(slash);
  while (!u.prefix.empty() && u.prefix.back() == '/') u.prefix.pop_back();
  size_t colon = authority.rfind(':');
  u.host = authority.substr(0, colon);
  u.port = colon == std::string::npos ? (u.tls ? "443" : "80") : authority.substr(colon + 1);
  if (u.host.empty()) return invalid_argument("github.api_url", "names no host");
  for (char c : u.host + u.port + u.prefix) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '?' || c == '#' || c == '@') {
      return invalid_argument("github.api_url", "must be a plain URL (no spaces, query or user)");
    }
  }
  if (!u.tls && u.host != "127.0.0.1" && u.host != "localhost" && u.host != "[::1]") {
    return invalid_argument("github.api_url", "http:// is allowed only for a loopback stand-in");
  }
  return u;
}

// An owner or repository name as GitHub allows it, and safe as one URL path segment.
bool segment_ok(const std::string& s) {
  if (s.empty() || s.size() > 100) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return false;
    }
  }
  return s != "." && s != "..";
}

// OWNER/NAME, each a segment_ok.
bool repository_ok(const std::string& repository) {
  const size_t slash = repository.find('/');
  return slash != std::string::npos && segment_ok(repository.substr(0, slash)) &&
         segment_ok(repository.substr(slash + 1));
}

Status check_scope(const std::string& scope) {
  size_t first = scope.find('/');
  std::string kind = scope.substr(0, first);
  std::string rest = first == std::string::npos ? "" : scope.substr(first + 1);
  if (kind == "orgs" && segment_ok(rest)) return Status::ok();
  if (kind == "repos" && repository_ok(rest)) return Status::ok();
  return invalid_argument("github.scope", "must be orgs/ORG or repos/OWNER/REPO");
}

struct Reply {
  int status = 0;
  std::string body;
  // The rate-limit headers, absent when missing or not a bounded number.
  std::optional<int64_t> remaining;                 // X-RateLimit-Remaining
  std::optional<int64_t> reset_epoch;               // X-RateLimit-Reset (Unix seconds)
  std::optional<std::chrono::seconds> retry_after;  // Retry-After (rate_limit_backoff.h)
};

std::string_view header_text(const http::response<http::string_body>& res, std::string_view name) {
  auto it = res.find(beast::string_view(name.data(), name.size()));
  if (it == res.end()) return {};
  return std::string_view(it->value().data(), it->value().size());
}

std::optional<int64_t> header_number(const http::response<http::string_body>& res,
                                     std::string_view name, int64_t max) {
  auto n = parse_bounded_int(header_text(res, name), 0, max, name);
  if (!n.is_ok()) return std::nullopt;
  return *n;
}

// A list reply's array member (`key`) of objects, or nothing when the shape is not GitHub's.
const json* array_of(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_array()) return nullptr;
  return &j[key];
}

std::string string_member(const json& o, const char* key) {
  return o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
}

// A reply body as JSON, discarded (not an object) when it nests deeper than kMaxJsonDepth:
// it comes from the network like every JSON armhived parses.
json parse_reply(std::string_view body) {
  if (!check_json_depth(body, "body").is_ok()) return json::value_t::discarded;
  return json::parse(body, nullptr, /*allow_exceptions=*/false);
}

class BeastGithubApi final : public GithubApi {
 public:
  BeastGithubApi(GithubApiOptions options, Url url)
      : options_(std::move(options)),
        url_(std::move(url)),
        clock_(options_.clock != nullptr ? *options_.clock : system_clock_),
        credentials_(std::make_shared<const GithubCredentials>(GithubCredentials{
            options_.token, options_.app_id, options_.app_private_key, options_.installation_id})),
        app_tokens_([this] { return fetch_installation_token(); }, clock_) {
    // The credentials live in credentials_ (a reload replaces them), not in options_.
    options_.token.clear();
    options_.app_private_key.clear();
  }

  Result<JitRunner> generate_jitconfig(const JitRequest& request) override {
    json body = {{"name", request.name},
                 {"runner_group_id", request.runner_group_id},
                 {"labels", request.labels},
                 {"work_folder", request.work_folder}};
    ARMHIVE_ASSIGN_OR_RETURN(
        Reply r, call(http::verb::post, "/actions/runners/generate-jitconfig", body.dump()));
    if (r.status != 201 && r.status != 200) return api_error("generate-jitconfig", r);
    json j = parse_reply(r.body);
    JitRunner out;
    if (!j.is_object() || !j.contains("runner") || !j["runner"].is_object() ||
        !j["runner"].contains("id") || !j["runner"]["id"].is_number_integer() ||
        !j.contains("encoded_jit_config") || !j["encoded_jit_config"].is_string()) {
      return Status(ErrorCode::kUnavailable,
                    "GitHub's generate-jitconfig reply lacks runner.id or encoded_jit_config");
    }
    out.runner_id = j["runner"]["id"].get<int64_t>();
    if (j["runner"].contains("name") && j["runner"]["name"].is_string()) {
      out.runner_name = j["runner"]["name"].get<std::string>();
    }
    out.encoded_jit_config = j["encoded_jit_config"].get<std::string>();
    if (out.encoded_jit_config.empty() || out.encoded_jit_config.size() > 16 * 1024) {
      return Status(ErrorCode::kUnavailable, "GitHub's encoded_jit_config is empty or too long");
    }
    return out;
  }

  Status delete_runner(int64_t runner_id) override {
    ARMHIVE_ASSIGN_OR_RETURN(
        Reply r, call(http::verb::delete_, "/actions/runners/" + std::to_string(runner_id), ""));
    if (r.status == 204 || r.status == 200 || r.status == 404) return Status::ok();
    return api_error("delete runner " + std::to_string(runner_id), r);
  }

  Result<std::vector<GithubRunnerInfo>> list_runners() override {
    std::vector<GithubRunnerInfo> out;
    for (int page = 1; page <= kMaxRunnerPages; ++page) {
      ARMHIVE_ASSIGN_OR_RETURN(
          Reply r,
          call(http::verb::get, "/actions/runners?per_page=100&page=" + std::to_string(page), ""));
      if (r.status != 200) return api_error("list runners", r);
      json j = parse_reply(r.body);
      const json* runners = array_of(j, "runners");
      if (runners == nullptr || !j.contains("total_count") ||
          !j["total_count"].is_number_integer()) {
        return Status(ErrorCode::kUnavailable,
                      "GitHub's runner list lacks total_count or runners (page " +
                          std::to_string(page) + ")");
      }
      for (const json& o : *runners) {
        if (!o.is_object() || !o.contains("id") || !o["id"].is_number_integer()) {
          return Status(ErrorCode::kUnavailable, "GitHub listed a runner without an id");
        }
        GithubRunnerInfo info;
        info.id = o["id"].get<int64_t>();
        info.name = string_member(o, "name").substr(0, 256);
        info.status = string_member(o, "status").substr(0, 32);
        info.busy = o.contains("busy") && o["busy"].is_boolean() && o["busy"].get<bool>();
        if (const json* labels = array_of(o, "labels")) {
          for (const json& l : *labels) {
            if (l.is_object() && info.labels.size() < 100) {
              info.labels.push_back(string_member(l, "name").substr(0, 256));
            }
          }
        }
        out.push_back(std::move(info));
      }
      const auto total = j["total_count"].get<int64_t>();
      if (runners->empty() || static_cast<int64_t>(out.size()) >= total) break;
    }
    return out;
  }

  Result<std::vector<QueuedJob>> list_queued_jobs(const std::string& repository) override {
    std::vector<QueuedJob> out;
    // It becomes the URL's path: validated, never escaped into something else.
    if (!repository_ok(repository)) {
      return invalid_argument("github.repository",
                              "'" + repository.substr(0, 200) + "' is not OWNER/NAME");
    }
    const std::string base = "/repos/" + repository;
    // A job waits for a runner in a queued run, or in one already in progress (a matrix's or a
    // later stage's jobs while others run): both lists, each run once.
    std::set<int64_t> run_ids;
    for (const char* status : {"queued", "in_progress"}) {
      ARMHIVE_ASSIGN_OR_RETURN(Reply runs_reply,
                               call_at(http::verb::get,
                                       base + "/actions/runs?status=" + status +
                                           "&per_page=" + std::to_string(kMaxQueuedRuns),
                                       ""));
      if (runs_reply.status != 200) {
        return api_error(std::string("list ") + status + " runs", runs_reply);
      }
      json runs_json = parse_reply(runs_reply.body);
      const json* runs = array_of(runs_json, "workflow_runs");
      if (runs == nullptr) {
        return Status(ErrorCode::kUnavailable, "GitHub's run list lacks workflow_runs");
      }
      for (const json& run : *runs) {
        if (run.is_object() && run.contains("id") && run["id"].is_number_integer()) {
          run_ids.insert(run["id"].get<int64_t>());
        }
      }
    }
    for (const int64_t run_id : run_ids) {
      size_t seen = 0;
      for (int page = 1; page <= kMaxJobPagesPerRun; ++page) {
        ARMHIVE_ASSIGN_OR_RETURN(Reply r,
                                 call_at(http::verb::get,
                                         base + "/actions/runs/" + std::to_string(run_id) +
                                             "/jobs?per_page=100&page=" + std::to_string(page),
                                         ""));
        if (r.status != 200) return api_error("list jobs of run " + std::to_string(run_id), r);
        json j = parse_reply(r.body);
        const json* jobs = array_of(j, "jobs");
        if (jobs == nullptr) {
          return Status(ErrorCode::kUnavailable, "GitHub's job list lacks jobs");
        }
        for (const json& o : *jobs) {
          if (!o.is_object() || !o.contains("id") || !o["id"].is_number_integer() ||
              string_member(o, "status") != "queued") {
            continue;
          }
          QueuedJob job;
          job.job_id = o["id"].get<int64_t>();
          job.run_id = run_id;
          if (const json* labels = array_of(o, "labels")) {
            for (const json& l : *labels) {
              if (l.is_string() && job.labels.size() < 100) {
                job.labels.push_back(l.get<std::string>().substr(0, 256));
              }
            }
          }
          out.push_back(std::move(job));
        }
        seen += jobs->size();
        const int64_t total = j.contains("total_count") && j["total_count"].is_number_integer()
                                  ? j["total_count"].get<int64_t>()
                                  : 0;
        if (jobs->empty() || static_cast<int64_t>(seen) >= total) break;
      }
    }
    return out;
  }

  GithubRateLimit rate_limit() const override {
    MutexLock lock(rate_mu_);
    return rate_;
  }

 private:
  // Records what a reply said of the rate limit; a rate-limited reply becomes the backoff and
  // kGithubRateLimited.
  Status note_rate_limit(const Reply& r) {
    const TimePoint now = clock_.now();
    MutexLock lock(rate_mu_);
    if (r.remaining) rate_.remaining = *r.remaining;
    if (r.reset_epoch) rate_.reset = TimePoint(std::chrono::seconds(*r.reset_epoch));
    // docs.github.com "Rate limits for the REST API": 403 or 429, with remaining 0 (primary)
    // or a message saying "secondary rate limit" (Retry-After perhaps).
    const bool limited =
        r.status == 429 ||
        (r.status == 403 && (r.retry_after.has_value() || r.remaining == int64_t{0} ||
                             r.body.find("rate limit") != std::string::npos));
    if (!limited) {
      // GitHub served the call (a 5xx says nothing of the limit): the next secondary limit is
      // a first one again.
      if (r.status < 500) secondary_limits_in_a_row_ = 0;
      return Status::ok();
    }
    // GitHub: wait Retry-After; else, with remaining 0, until X-RateLimit-Reset; else at least
    // a minute, exponentially longer while secondary limits keep coming (rate_limit_backoff.h;
    // one that said Retry-After counts too). Bounded by an hour, so a bad header cannot silence
    // us for days.
    const bool primary = r.remaining == int64_t{0};
    TimePoint until;
    if (r.retry_after) {
      until = now + *r.retry_after;
      if (!primary) ++secondary_limits_in_a_row_;
    } else if (primary && r.reset_epoch && rate_.reset > now) {
      until = rate_.reset;
    } else {  // nothing said how long (or a reset already past): the growing fallback
      until = now + secondary_limit_wait(++secondary_limits_in_a_row_);
    }
    until = std::min(until, now + std::chrono::hours(1));
    rate_.backoff_until = std::max(rate_.backoff_until, until);
    return Status(kGithubRateLimited, "GitHub rate limited until " +
                                          to_rfc3339(rate_.backoff_until) + " (HTTP " +
                                          std::to_string(r.status) + ")");
  }

  // kGithubRateLimited while a backoff lasts.
  Status check_backoff() const {
    const TimePoint now = clock_.now();
    MutexLock lock(rate_mu_);
    if (now < rate_.backoff_until) {
      return Status(kGithubRateLimited,
                    "GitHub rate limited until " + to_rfc3339(rate_.backoff_until));
    }
    return Status::ok();
  }

  // GitHub's error body is {"message": "..."}: only that is quoted, bounded.
  static Status api_error(const std::string& what, const Reply& r) {
    std::string message;
    json j = parse_reply(r.body);
    if (j.is_object() && j.contains("message") && j["message"].is_string()) {
      message = j["message"].get<std::string>().substr(0, 200);
    }
    ErrorCode code = r.status == 401 || r.status == 403 ? ErrorCode::kPermissionDenied
                     : r.status == 404                  ? ErrorCode::kNotFound
                     : r.status == 422                  ? ErrorCode::kInvalidArgument
                                                        : ErrorCode::kUnavailable;
    return Status(code, "GitHub " + what + ": HTTP " + std::to_string(r.status) +
                            (message.empty() ? "" : " (" + message + ")"));
  }

  // Writes the request and reads the reply on `stream`, then calls done (on the io_context).
  template <typename Stream>
  static void exchange(Stream& stream, http::request<http::string_body>& req,
                       beast::flat_buffer& buffer, http::response_parser<http::string_body>& parser,
                       std::function<void(beast::error_code)> done) {
    http::async_write(stream, req, [&stream, &buffer, &parser, done](beast::error_code ec, size_t) {
      if (ec) return done(ec);
      http::async_read(stream, buffer, parser,
                       [done](beast::error_code read_ec, size_t) { done(read_ec); });
    });
  }

  Status set_credentials(GithubCredentials credentials) override {
    {
      MutexLock lock(credentials_mu_);
      credentials_ = std::make_shared<const GithubCredentials>(std::move(credentials));
    }
    app_tokens_.forget();
    return Status::ok();
  }

  // The credentials in force: immutable once published, read without the lock.
  std::shared_ptr<const GithubCredentials> credentials() const {
    MutexLock lock(credentials_mu_);
    return credentials_;
  }

  // The installation token for a GitHub App, bought with a fresh JWT.
  Result<InstallationToken> fetch_installation_token() {
    const std::shared_ptr<const GithubCredentials> c = credentials();
    ARMHIVE_ASSIGN_OR_RETURN(std::string jwt,
                             github_app_jwt(c->app_id, c->app_private_key, clock_.now()));
    ARMHIVE_ASSIGN_OR_RETURN(
        Reply r, send(http::verb::post,
                      url_.prefix + "/app/installations/" + std::to_string(c->installation_id) +
                          "/access_tokens",
                      "", "Bearer " + jwt));
    if (r.status != 201 && r.status != 200) return api_error("installation access token", r);
    return parse_installation_token(r.body);
  }

  // A call under the scope, with the token (or the App's installation token).
  Result<Reply> call(http::verb verb, const std::string& path, std::string body) {
    return call_at(verb, "/" + options_.scope + path, std::move(body));
  }

  // A call to `path` under the API's URL (a path of validated names and numbers only).
  Result<Reply> call_at(http::verb verb, const std::string& path, std::string body) {
    ARMHIVE_RETURN_IF_ERROR(check_backoff());
    const std::shared_ptr<const GithubCredentials> c = credentials();
    std::string token = c->token;
    if (c->app_id > 0) {
      ARMHIVE_ASSIGN_OR_RETURN(token, app_tokens_.get());
    }
    ARMHIVE_ASSIGN_OR_RETURN(Reply r,
                             send(verb, url_.prefix + path, std::move(body), "Bearer " + token));
    ARMHIVE_RETURN_IF_ERROR(note_rate_limit(r));
    return r;
  }

  Result<Reply> send(http::verb verb, const std::string& target, std::string body,
                     const std::string& authorization) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, url_.host);
    req.set(http::field::user_agent, "armhived");
    req.set(http::field::accept, "application/vnd.github+json");
    req.set("X-GitHub-Api-Version", "2022-11-28");
    req.set(http::field::authorization, authorization);
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    req.body() = std::move(body);
    req.prepare_payload();

    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    asio::ssl::context ctx(asio::ssl::context::tls_client);
    std::optional<beast::tcp_stream> plain;
    std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(256 * 1024);
    beast::error_code result;
    std::string step = "resolve";
    bool finished = false;
    auto done = [&](beast::error_code ec) {
      result = ec;
      finished = true;
    };
    const auto deadline = options_.timeout;
    if (url_.tls) {
      boost::system::error_code ec;
      if (options_.ca_file.empty()) {
        ctx.set_default_verify_paths(ec);
      } else {
        ctx.load_verify_file(options_.ca_file, ec);
      }
      if (ec) return Status(ErrorCode::kUnavailable, "TLS trust store: " + ec.message());
      ctx.set_verify_mode(asio::ssl::verify_peer);
      tls.emplace(io, ctx);
      tls->set_verify_callback(asio::ssl::host_name_verification(url_.host));
      if (!SSL_set_tlsext_host_name(tls->native_handle(), url_.host.c_str())) {
        return Status(ErrorCode::kUnavailable, "cannot set TLS SNI for " + url_.host);
      }
    } else {
      plain.emplace(io);
    }
    resolver.async_resolve(
        url_.host, url_.port,
        [&](beast::error_code ec, const asio::ip::tcp::resolver::results_type& endpoints) {
          if (ec) return done(ec);
          step = "connect";
          beast::tcp_stream& lowest = tls ? beast::get_lowest_layer(*tls) : *plain;
          lowest.expires_after(deadline);  // one deadline for connect, handshake, write, read
          lowest.async_connect(endpoints, [&](beast::error_code cec, const auto&) {
            if (cec) return done(cec);
            if (!tls) {
              step = "request";
              return exchange(*plain, req, buffer, parser, done);
            }
            step = "TLS handshake";
            tls->async_handshake(asio::ssl::stream_base::client, [&](beast::error_code hec) {
              if (hec) return done(hec);
              step = "request";
              exchange(*tls, req, buffer, parser, done);
            });
          });
        });
    // The resolver is the one step without the stream's deadline: bound the loop too.
    io.run_for(deadline + std::chrono::seconds(1));
    if (!finished) {
      return Status(ErrorCode::kTimeout,
                    "GitHub API " + url_.host + ": no answer in time (" + step + ")");
    }
    if (result) {
      return Status(result == beast::error::timeout ? ErrorCode::kTimeout : ErrorCode::kUnavailable,
                    "GitHub API " + url_.host + " (" + step + "): " + result.message());
    }
    Reply reply{static_cast<int>(parser.get().result_int()), parser.get().body()};
    reply.remaining = header_number(parser.get(), "X-RateLimit-Remaining", int64_t{1} << 40);
    reply.reset_epoch = header_number(parser.get(), "X-RateLimit-Reset", int64_t{1} << 40);
    // A Retry-After date is relative to the reply's own Date when it has a valid one.
    TimePoint replied = clock_.now();
    if (auto date = parse_imf_fixdate("Date", header_text(parser.get(), "Date")); date.is_ok()) {
      replied = TimePoint(std::chrono::seconds(*date));
    }
    reply.retry_after = parse_retry_after(header_text(parser.get(), "Retry-After"), replied);
    return reply;
  }

  GithubApiOptions options_;
  Url url_;
  SystemClock system_clock_;
  const Clock& clock_;
  mutable Mutex credentials_mu_;  // held only to copy or swap the pointer
  std::shared_ptr<const GithubCredentials> credentials_ GUARDED_BY(credentials_mu_);
  InstallationTokenCache app_tokens_;
  mutable Mutex rate_mu_;
  GithubRateLimit rate_ GUARDED_BY(rate_mu_);
  // Rate-limited replies in a row that were not GitHub's primary limit (rate_limit_backoff.h).
  int secondary_limits_in_a_row_ GUARDED_BY(rate_mu_) = 0;
};

}  // namespace

Status GithubApi::set_credentials(GithubCredentials /*credentials*/) {
  return conflict("this GitHub client cannot change its credentials");
}

Status check_github_credentials(const GithubCredentials& c) {
  if (c.app_id > 0) {
    if (c.installation_id <= 0) {
      return invalid_argument("github.installation_id", "must be positive");
    }
    // Refuse a key that cannot sign now, not at the first webhook.
    return github_app_jwt(c.app_id, c.app_private_key, std::chrono::system_clock::now()).status();
  }
  if (c.token.empty()) return invalid_argument("github.token_file", "holds no token");
  for (char ch : c.token) {
    if (static_cast<unsigned char>(ch) <= ' ' || ch == 0x7f) {
      return invalid_argument("github.token_file", "the token must be one line of printable text");
    }
  }
  return Status::ok();
}

Result<std::unique_ptr<GithubApi>> make_github_api(GithubApiOptions options) {
  ARMHIVE_ASSIGN_OR_RETURN(Url url, parse_url(options.api_url));
  ARMHIVE_RETURN_IF_ERROR(check_scope(options.scope));
  ARMHIVE_RETURN_IF_ERROR(check_github_credentials(GithubCredentials{
      options.token, options.app_id, options.app_private_key, options.installation_id}));
  return std::unique_ptr<GithubApi>(new BeastGithubApi(std::move(options), std::move(url)));
}

}  // namespace armhive
