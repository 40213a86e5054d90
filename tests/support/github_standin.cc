#include "tests/support/github_standin.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/process_runner.h"

namespace armhive {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

GithubStandin::GithubStandin(const std::string& dir)
    : port_file_(dir + "/standin.port"), record_(dir + "/standin.jsonl") {
  fs::remove(port_file_);
  fs::remove(record_);
  const char* source = std::getenv("ARMHIVE_SOURCE_DIR");
  const std::string script = std::string(source ? source : ARMHIVE_SOURCE_DIR) +
                             "/tests/daemon/github/github_api_standin.py";
  pid_ = ::fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    ::execlp("python3", "python3", script.c_str(), port_file_.c_str(), record_.c_str(), nullptr);
    ::_exit(127);
  }
}

GithubStandin::~GithubStandin() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
}

int GithubStandin::port() {
  for (int i = 0; i < 100 && !fs::exists(port_file_); ++i) std::this_thread::sleep_for(100ms);
  return std::stoi(slurp(port_file_));
}

std::vector<json> GithubStandin::requests() {
  std::vector<json> out;
  std::istringstream lines(slurp(record_));
  std::string line;
  while (std::getline(lines, line)) out.push_back(json::parse(line));
  return out;
}

void GithubStandin::control(const json& body) {
  SubprocessRunner run;
  auto r = run.run({.argv = {"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                             "--data-binary", body.dump(),
                             "http://127.0.0.1:" + std::to_string(port()) + "/_control"},
                    .timeout = 30s});
  REQUIRE(r.is_ok());
  REQUIRE(r->out == "200");
}

void write_secret_file(const std::string& path, const std::string& text) {
  fs::remove(path);
  std::ofstream(path) << text << "\n";
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
}

int post_github_webhook(int port, const std::string& dir, const std::string& delivery,
                        const std::string& body, const std::string& signature) {
  const std::string file = dir + "/webhook.json";
  std::ofstream(file, std::ios::binary) << body;
  SubprocessRunner run;
  auto r = run.run({.argv = {"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                             "-H", "Content-Type: application/json", "-H",
                             "X-GitHub-Event: workflow_job", "-H", "X-GitHub-Delivery: " + delivery,
                             "-H", "X-Hub-Signature-256: " + signature, "--data-binary", "@" + file,
                             "http://127.0.0.1:" + std::to_string(port) + "/v1/github/webhook"},
                    .timeout = 30s});
  REQUIRE(r.is_ok());
  return std::atoi(r->out.c_str());
}

std::string workflow_job_json(const std::string& action, int64_t id, const std::string& runner) {
  json j = {{"action", action},
            {"workflow_job",
             {{"id", id},
              {"run_id", 555},
              {"labels", {"self-hosted", "armhive-arm64"}},
              {"runner_name", runner.empty() ? json(nullptr) : json(runner)}}},
            {"organization", {{"login", "octo-org"}}},
            {"repository", {{"full_name", "octo-org/example"}}}};
  return j.dump();
}

}  // namespace armhive
