// The README's "Using it" commands, run as written by bash: a newcomer's first steps must work.
// What stands in for the real machine, and why:
//   - `armhived --config examples/armhived.toml &` (needs libvirtd and guests) is not run: an
//     in-process HttpServer over the fake lease service (with the pool "ci") takes its place,
//     at ARMHIVE_SERVER.
//   - `armhived --config examples/armhived.toml token create ...` runs the real armhived on a
//     copy of examples/armhived.toml whose state directory is a temporary one (the example's is
//     /var/lib/armhive); the token it prints is checked, the API calls use the fixture's token.
//   - `armhive ssh` gets --dry-run (the fake's VM has no sshd); the README's example lease id
//     is replaced by the lease the README's `lease create` made; curl's URL by the fixture's.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/process_runner.h"
#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

constexpr const char* kReadmeLeaseId = "l-3f2a9c0d1e2b";
constexpr const char* kReadmeServer = "http://127.0.0.1:8470";

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

// The indented (code) lines of the README's "## Using it" section, one command per entry
// (backslash continuations joined).
std::vector<std::string> readme_commands() {
  const std::string readme = read_file(fs::path(ARMHIVE_SOURCE_DIR) / "README.md");
  const size_t begin = readme.find("\n## Using it\n");
  REQUIRE(begin != std::string::npos);
  const size_t end = readme.find("\n## ", begin + 1);
  std::istringstream section(readme.substr(begin, end - begin));
  std::vector<std::string> out;
  std::string pending;
  for (std::string line; std::getline(section, line);) {
    if (line.rfind("    ", 0) != 0) continue;
    line = line.substr(line.find_first_not_of(' '));
    if (!line.empty() && line.back() == '\\') {
      pending += line.substr(0, line.size() - 1);
      continue;
    }
    out.push_back(pending + line);
    pending.clear();
  }
  return out;
}

TEST_CASE("cli: the README's commands work as written", "[cli][readme]") {
  ApiFixture f;
  f.leases.add_warm_pool("ci");
  const fs::path tmp = fs::temp_directory_path() / ("armhive-readme-" + std::to_string(getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp / ".ssh");
  fs::create_directories(tmp / "state");
  std::ofstream(tmp / ".ssh" / "id_ed25519.pub") << kTestKey << "\n";
  // examples/armhived.toml with a temporary state directory.
  std::string config = read_file(fs::path(ARMHIVE_SOURCE_DIR) / "examples" / "armhived.toml");
  replace_all(config, "\"/var/lib/armhive/admin.token\"",
              "\"" + (tmp / "admin.token").string() + "\"");
  replace_all(config, "state_dir = \"/var/lib/armhive\"",
              "state_dir = \"" + (tmp / "state").string() + "\"");
  std::ofstream(tmp / "armhived.toml") << config;

  const std::string path = fs::path(ARMHIVE_CLI_PATH).parent_path().string() + ":" +
                           fs::path(ARMHIVE_DAEMON_PATH).parent_path().string() + ":" +
                           (getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
  auto bash = [&](const std::string& script) {
    ProcessRequest req;
    req.argv = {"bash", "-euo", "pipefail", "-c", script};
    req.cwd = ARMHIVE_SOURCE_DIR;
    req.timeout = std::chrono::seconds(60);
    req.env = {{"PATH", path},
               {"HOME", tmp.string()},
               {"XDG_CONFIG_HOME", (tmp / ".config").string()},
               {"ARMHIVE_CONFIG", ""},
               {"ARMHIVE_SERVER", f.url()},
               {"ARMHIVE_TOKEN", f.ci_b}};
    SubprocessRunner runner;
    auto r = runner.run(req);
    REQUIRE(r.is_ok());
    return *r;
  };

  const std::vector<std::string> commands = readme_commands();
  REQUIRE(commands.size() >= 8);
  std::string lease_id;
  int ran = 0;
  for (std::string cmd : commands) {
    INFO(cmd);
    if (cmd.back() == '&') {
      CHECK(cmd.rfind("armhived --config examples/armhived.toml", 0) == 0);
      continue;  // the in-process server stands in for the daemon
    }
    if (cmd.find("token create") != std::string::npos) {
      replace_all(cmd, "examples/armhived.toml", (tmp / "armhived.toml").string());
      auto r = bash(cmd + "\necho \"$ARMHIVE_TOKEN\"");
      INFO(r.err);
      CHECK(r.exit_code == 0);
      CHECK(r.out.rfind("ah_", 0) == 0);
      CHECK(fs::exists(tmp / "state" / "armhive.db"));  // in the temporary state, not /var/lib
      ++ran;
      continue;
    }
    if (cmd.rfind("armhive ssh ", 0) == 0) cmd += " --dry-run";
    if (!lease_id.empty()) replace_all(cmd, kReadmeLeaseId, lease_id);
    replace_all(cmd, kReadmeServer, f.url());
    auto r = bash(cmd);
    INFO(r.out);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    ++ran;
    if (cmd.rfind("armhive lease create ", 0) == 0) {
      lease_id = r.out.substr(0, r.out.find('\n'));
      CHECK(lease_id.rfind("l-", 0) == 0);
      CHECK(r.err.find("is ready") != std::string::npos);
    } else if (cmd.rfind("armhive exec ", 0) == 0) {
      CHECK(r.out == "hello from the guest\n");
    } else if (cmd.rfind("armhive ssh ", 0) == 0) {
      CHECK(r.out.find("ssh ") == 0);
    } else if (cmd.rfind("curl ", 0) == 0) {
      auto j = nlohmann::json::parse(r.out, nullptr, false);
      REQUIRE(j.is_object());
      CHECK(j.value("pool", "") == "ci");
      CHECK(j.value("ttl_seconds", 0) == 7200);
    }
  }
  CHECK(ran == static_cast<int>(commands.size()) - 1);
  CHECK_FALSE(lease_id.empty());
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace armhive
