#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"

namespace armhive {

// The two GitHub REST calls the provider makes (docs.github.com, "Self-hosted runners"):
//   POST   {api}/{scope}/actions/runners/generate-jitconfig
//          {name, runner_group_id, labels, work_folder} -> 201 {runner: {id, name},
//          encoded_jit_config}
//   DELETE {api}/{scope}/actions/runners/{runner_id}    -> 204
// where scope is "orgs/ORG" or "repos/OWNER/REPO".
struct JitRequest {
  std::string name;
  int64_t runner_group_id = 1;  // 1: the "Default" group
  std::vector<std::string> labels;
  std::string work_folder = "_work";
};

struct JitRunner {
  int64_t runner_id = 0;
  std::string runner_name;
  std::string encoded_jit_config;  // a secret: never logged or persisted
};

// Threading: implementations are thread-safe; calls block the calling thread up to their
// timeout, so never call them on an io_context thread.
class GithubApi {
 public:
  virtual ~GithubApi() = default;
  virtual Result<JitRunner> generate_jitconfig(const JitRequest& request) = 0;
  // A runner already gone (404) is not an error.
  virtual Status delete_runner(int64_t runner_id) = 0;
};

struct GithubApiOptions {
  // https://api.github.com, or https://HOST/api/v3 for GitHub Enterprise Server; http:// only
  // for a loopback stand-in (tests).
  std::string api_url = "https://api.github.com";
  std::string scope;  // "orgs/ORG" or "repos/OWNER/REPO"
  std::string token;  // fine-grained token (Authorization: Bearer); a secret
  std::chrono::milliseconds timeout{std::chrono::seconds(15)};  // connect + request + response
  std::string ca_file;                                          // empty: the system's trust store
};

// GithubApi over HTTP/1.1 with Boost.Beast (TLS through Boost.Asio SSL / OpenSSL, peer and host
// name verified). Each call opens its own connection on a private io_context, so one slow call
// never holds another; the whole exchange has one deadline.
// kInvalidArgument naming "github.api_url" / "github.scope" for bad options.
Result<std::unique_ptr<GithubApi>> make_github_api(GithubApiOptions options);

}  // namespace armhive
