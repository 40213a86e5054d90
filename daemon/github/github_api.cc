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

#include "base/json_depth.h"
#include "base/validation.h"
#include "daemon/github/app_token.h"

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

Status check_scope(const std::string& scope) {
  auto segment_ok = [](const std::string& s) {
    if (s.empty() || s.size() > 100) return false;
    for (char c : s) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
        return false;
      }
    }
    return s != "." && s != "..";
  };
  size_t first = scope.find('/');
  std::string kind = scope.substr(0, first);
  std::string rest = first == std::string::npos ? "" : scope.substr(first + 1);
  if (kind == "orgs" && segment_ok(rest)) return Status::ok();
  if (kind == "repos") {
    size_t second = rest.find('/');
    if (second != std::string::npos && segment_ok(rest.substr(0, second)) &&
        segment_ok(rest.substr(second + 1))) {
      return Status::ok();
    }
  }
  return invalid_argument("github.scope", "must be orgs/ORG or repos/OWNER/REPO");
}

struct Reply {
  int status = 0;
  std::string body;
};

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
        app_tokens_([this] { return fetch_installation_token(); }, clock_) {}

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

 private:
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

  // The installation token for a GitHub App, bought with a fresh JWT.
  Result<InstallationToken> fetch_installation_token() {
    ARMHIVE_ASSIGN_OR_RETURN(
        std::string jwt, github_app_jwt(options_.app_id, options_.app_private_key, clock_.now()));
    ARMHIVE_ASSIGN_OR_RETURN(Reply r,
                             send(http::verb::post,
                                  url_.prefix + "/app/installations/" +
                                      std::to_string(options_.installation_id) + "/access_tokens",
                                  "", "Bearer " + jwt));
    if (r.status != 201 && r.status != 200) return api_error("installation access token", r);
    return parse_installation_token(r.body);
  }

  // A call under the scope, with the token (or the App's installation token).
  Result<Reply> call(http::verb verb, const std::string& path, std::string body) {
    std::string token = options_.token;
    if (options_.app_id > 0) {
      ARMHIVE_ASSIGN_OR_RETURN(token, app_tokens_.get());
    }
    return send(verb, url_.prefix + "/" + options_.scope + path, std::move(body),
                "Bearer " + token);
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
    return Reply{static_cast<int>(parser.get().result_int()), parser.get().body()};
  }

  GithubApiOptions options_;
  Url url_;
  SystemClock system_clock_;
  const Clock& clock_;
  InstallationTokenCache app_tokens_;
};

}  // namespace

Result<std::unique_ptr<GithubApi>> make_github_api(GithubApiOptions options) {
  ARMHIVE_ASSIGN_OR_RETURN(Url url, parse_url(options.api_url));
  ARMHIVE_RETURN_IF_ERROR(check_scope(options.scope));
  if (options.app_id > 0) {
    if (options.installation_id <= 0) {
      return invalid_argument("github.installation_id", "must be positive");
    }
    // Refuse a key that cannot sign now, not at the first webhook.
    ARMHIVE_RETURN_IF_ERROR(
        github_app_jwt(options.app_id, options.app_private_key, std::chrono::system_clock::now())
            .status());
    return std::unique_ptr<GithubApi>(new BeastGithubApi(std::move(options), std::move(url)));
  }
  if (options.token.empty()) return invalid_argument("github.token_file", "holds no token");
  for (char c : options.token) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return invalid_argument("github.token_file", "the token must be one line of printable text");
    }
  }
  return std::unique_ptr<GithubApi>(new BeastGithubApi(std::move(options), std::move(url)));
}

}  // namespace armhive
