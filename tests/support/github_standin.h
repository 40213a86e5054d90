#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace armhive {

// What the e2e tests of the GitHub path share: GitHub's REST API played by
// tests/daemon/github/github_api_standin.py on loopback, and webhook deliveries as GitHub sends
// them. Test code: failures are Catch2 assertions.

// The stand-in's process, started in `dir` (its port file and request record live there) and
// killed by its pid when the object goes.
class GithubStandin {
 public:
  explicit GithubStandin(const std::string& dir);
  ~GithubStandin();
  GithubStandin(const GithubStandin&) = delete;
  GithubStandin& operator=(const GithubStandin&) = delete;

  int port();  // waits for the port file
  // Every request it answered so far, one JSON object each (github_api_standin.py's record).
  std::vector<nlohmann::json> requests();
  // POST /_control with `body` (github_api_standin.py: queue_job, missing_repo, add_runners...).
  void control(const nlohmann::json& body);

 private:
  pid_t pid_ = -1;
  std::string port_file_;
  std::string record_;
};

// A file holding `text` and a newline, mode 0600 (how armhived wants its secret files).
void write_secret_file(const std::string& path, const std::string& text);

// POSTs `body` to armhived's /v1/github/webhook on 127.0.0.1:`port` as a workflow_job delivery
// (`signature` as X-Hub-Signature-256, empty for none); the HTTP status.
int post_github_webhook(int port, const std::string& dir, const std::string& delivery,
                        const std::string& body, const std::string& signature);

// A workflow_job delivery of organisation octo-org for a job labelled self-hosted and
// armhive-arm64; `runner` names the runner that took it (in_progress, completed).
std::string workflow_job_json(const std::string& action, int64_t id,
                              const std::string& runner = "");

}  // namespace armhive
