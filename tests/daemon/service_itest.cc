// armhived as a systemd service: the unit's ExecStart line, run with systemd's notification
// socket (its protocol, without systemd), says what it is doing, READY=1 once the API answers,
// pings the watchdog while it runs and says STOPPING=1 on SIGTERM; a start that fails never
// says READY.
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/process_runner.h"
#include "base/version.h"
#include "daemon/github/webhook_signature.h"
#include "daemon/store/database.h"
#include "daemon/store/pg_database.h"
#include "daemon/store/state_schema.h"
#include "tests/support/github_standin.h"
#include "tests/support/postgres_server.h"

extern char** environ;

namespace armhive {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("armhive-service-" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// systemd's end of $NOTIFY_SOCKET.
struct NotifySocket {
  std::string path;
  int fd = -1;
  explicit NotifySocket(std::string p) : path(std::move(p)) {
    fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    REQUIRE(path.size() < sizeof addr.sun_path);
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~NotifySocket() { ::close(fd); }
  // Drops the datagrams queued now. A test that waits long without reading must: the kernel
  // queues only a few (net.unix.max_dgram_qlen, 10 by default), then the service's next
  // notification (the watchdog's, STOPPING=1) blocks it.
  void drain() const {
    char buf[4096];
    while (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) >= 0) {
    }
  }
  // The next datagram, or "" when none came within 120 s (a cold start under sanitizers).
  std::string next() const {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 120000) != 1) return "";
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
  }
};

// The ExecStart= line of the unit we ship, split on blanks (it has no quoting).
std::vector<std::string> unit_exec_start() {
  std::ifstream unit(std::string(ARMHIVE_SOURCE_DIR) + "/examples/armhived.service");
  std::string line;
  while (std::getline(unit, line)) {
    if (line.rfind("ExecStart=", 0) != 0) continue;
    std::istringstream words(line.substr(10));
    std::vector<std::string> argv;
    for (std::string w; words >> w;) argv.push_back(w);
    return argv;
  }
  return {};
}

// Starts argv with the notification socket (and a 2 s watchdog) in its environment.
pid_t spawn_service(const std::vector<std::string>& argv, const std::string& notify,
                    const std::string& log) {
  std::vector<std::string> env_strings = {"NOTIFY_SOCKET=" + notify, "WATCHDOG_USEC=2000000"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "NOTIFY_SOCKET=", 14) != 0 && std::strncmp(*e, "WATCHDOG_", 9) != 0) {
      env_strings.emplace_back(*e);
    }
  }
  std::vector<char*> env, args;
  for (std::string& s : env_strings) env.push_back(s.data());
  env.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (std::string& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

int wait_exit(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A TCP port on loopback that nothing listens on now.
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// The URL a "READY=1\nSTATUS=serving on URL" datagram names.
std::string serving_url(const std::string& ready) {
  return ready.substr(ready.find("serving on ") + 11);
}

// The bootstrap admin token armhived wrote into `dir` (bootstrap_token_file), without its newline.
std::string admin_token(const fs::path& dir) {
  std::string token = read_file(dir / "admin.token");
  while (!token.empty() && token.back() == '\n') token.pop_back();
  return token;
}

// Kills (SIGKILL) and reaps the service a test started, unless the test let it stop itself.
struct Reap {
  pid_t pid;
  ~Reap() {
    if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
  }
};

// The service's datagrams up to READY=1, which is returned ("" when it never came); the ones
// before it go to `before`.
std::string wait_ready(const NotifySocket& systemd, std::vector<std::string>* before = nullptr) {
  for (std::string m = systemd.next(); !m.empty(); m = systemd.next()) {
    if (m.rfind("READY=1\n", 0) == 0) return m;
    if (before != nullptr) before->push_back(m);
  }
  return "";
}

TEST_CASE("the unit's armhived tells systemd when it serves, pings its watchdog and stops",
          "[daemon][service]") {
  TempDir dir;
  std::vector<std::string> argv = unit_exec_start();
  REQUIRE(argv.size() == 3);
  CHECK(argv[0] == "/usr/bin/armhived");  // where the package installs it
  REQUIRE(argv[1] == "--config");
  argv[0] = ARMHIVE_DAEMON_PATH;
  argv[2] = (dir.path / "armhived.toml").string();
  std::ofstream(argv[2]) << "[server]\nport = 0\n"
                         << "bootstrap_token_file = \"" << (dir.path / "admin.token").string()
                         << "\"\n"
                         << "[host]\nstate_dir = \"" << (dir.path / "state").string() << "\"\n"
                         << "libvirt_uri = \"test:///default\"\n"
                         << "[[pools]]\nname = \"p\"\nimage = \"tiny\"\n";
  NotifySocket systemd((dir.path / "notify").string());
  pid_t pid = spawn_service(argv, systemd.path, (dir.path / "armhived.log").string());
  REQUIRE(pid > 0);
  Reap reap{pid};

  std::vector<std::string> before;
  const std::string ready = wait_ready(systemd, &before);
  INFO(read_file(dir.path / "armhived.log"));
  REQUIRE_FALSE(ready.empty());
  // It said what it was doing on the way, recovery included.
  CHECK(std::find(before.begin(), before.end(), "STATUS=recovering leases and VMs") !=
        before.end());
  const std::string prefix = "READY=1\nSTATUS=serving on ";
  REQUIRE(ready.rfind(prefix, 0) == 0);
  // READY means serving: the API answers at once.
  httplib::Client api(ready.substr(prefix.size()));
  auto health = api.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);

  CHECK(systemd.next() == "WATCHDOG=1");  // within the 2 s interval it was given

  // While it serves: a backup can be taken; a restore, or a second armhived on the same
  // state, is refused naming the one that runs.
  SubprocessRunner runner;
  auto armhived = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {ARMHIVE_DAEMON_PATH, "--config", argv[2]});
    auto r = runner.run({.argv = args, .timeout = std::chrono::seconds(120)});
    REQUIRE(r.is_ok());
    return *r;
  };
  const std::string backup = (dir.path / "armhive-backup.db").string();
  auto backed = armhived({"backup", backup});
  CHECK(backed.exit_code == 0);
  CHECK_THAT(backed.out, Catch::Contains("to " + backup));
  auto refused = armhived({"restore", backup});
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Catch::Contains("another armhived serves from"));
  CHECK_THAT(refused.err, Catch::Contains("pid " + std::to_string(pid)));
  auto second = armhived({});
  CHECK(second.exit_code == 1);
  CHECK_THAT(second.out + second.err, Catch::Contains("another armhived serves from"));

  REQUIRE(::kill(pid, SIGTERM) == 0);
  std::string m = systemd.next();
  while (m == "WATCHDOG=1") m = systemd.next();
  CHECK(m.rfind("STOPPING=1\n", 0) == 0);
  reap.pid = -1;
  CHECK(wait_exit(pid) == 0);

  // Stopped: the backup goes back in place, and the state it holds serves again.
  auto restored = armhived({"restore", backup});
  CHECK(restored.exit_code == 0);
  CHECK(fs::exists(dir.path / "state" / "armhive.db.before-restore"));
  auto tokens = armhived({"token", "list"});
  CHECK(tokens.exit_code == 0);
  CHECK_THAT(tokens.out, Catch::Contains("admin"));

  // A database a newer armhived has migrated: refused at start, naming both versions, and
  // left as it was.
  {
    auto db = Database::open((dir.path / "state" / "armhive.db").string());
    REQUIRE(db.is_ok());
    REQUIRE((*db)->execute("INSERT INTO schema_migrations VALUES ('leases', 999, 0)").is_ok());
    REQUIRE(
        (*db)->execute("UPDATE armhive_meta SET value = '9.0.0' WHERE key = 'written_by'").is_ok());
  }
  auto newer = armhived({});
  CHECK(newer.exit_code == 1);
  CHECK_THAT(newer.out + newer.err, Catch::Contains("written by armhived 9.0.0"));
  CHECK_THAT(newer.out + newer.err, Catch::Contains("this is armhived " + std::string(kVersion)));
}

TEST_CASE(
    "SIGHUP re-reads the file: pools change at once, a bad file is refused, what needs a "
    "restart is named",
    "[daemon][service][reload]") {
  TempDir dir;
  // The unit reloads with SIGHUP.
  std::ifstream unit(std::string(ARMHIVE_SOURCE_DIR) + "/examples/armhived.service");
  std::string unit_text((std::istreambuf_iterator<char>(unit)), std::istreambuf_iterator<char>());
  CHECK_THAT(unit_text, Catch::Contains("\nExecReload=/bin/kill -HUP $MAINPID\n"));

  const std::string config = (dir.path / "armhived.toml").string();
  const std::string head = "[server]\nport = 0\nbootstrap_token_file = \"" +
                           (dir.path / "admin.token").string() + "\"\n[host]\nstate_dir = \"" +
                           (dir.path / "state").string() +
                           "\"\nlibvirt_uri = \"test:///default\"\n";
  auto write = [&](const std::string& pools) { std::ofstream(config) << head << pools; };
  write("[[pools]]\nname = \"ci\"\nimage = \"tiny\"\nmax_ttl = \"8h\"\n");
  NotifySocket systemd((dir.path / "notify").string());
  pid_t pid = spawn_service({ARMHIVE_DAEMON_PATH, "--config", config}, systemd.path,
                            (dir.path / "armhived.log").string());
  REQUIRE(pid > 0);
  Reap reap{pid};
  const std::string ready = wait_ready(systemd);
  INFO(read_file(dir.path / "armhived.log"));
  REQUIRE_FALSE(ready.empty());
  const std::string url = serving_url(ready);
  httplib::Client api(url);
  api.set_bearer_token_auth(admin_token(dir.path));
  auto pools = [&] {
    auto r = api.Get("/v1/pools");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    return nlohmann::json::parse(r->body)["items"];
  };
  auto reloaded = [&] {
    REQUIRE(::kill(pid, SIGHUP) == 0);
    std::string m = systemd.next();
    while (m == "WATCHDOG=1") m = systemd.next();
    CHECK(m.rfind("RELOADING=1\n", 0) == 0);
    m = systemd.next();
    while (m == "WATCHDOG=1") m = systemd.next();
    REQUIRE(m.rfind("READY=1\n", 0) == 0);
    return m;
  };

  // A pool added, another's TTL and size changed, and a shape change that needs a restart.
  write(
      "[[pools]]\nname = \"ci\"\nimage = \"tiny\"\nmax_ttl = \"2h\"\nmax = 3\nvcpus = 2\n"
      "[[pools]]\nname = \"dev\"\nimage = \"tiny\"\n");
  std::string status = reloaded();
  CHECK_THAT(status, Catch::Contains("1 change(s) need a restart"));
  nlohmann::json listed = pools();
  REQUIRE(listed.size() == 2);
  CHECK(listed[0]["name"] == "ci");
  CHECK(listed[0]["max_ttl_seconds"] == 7200);
  CHECK(listed[0]["max"] == 3);
  CHECK(listed[0]["vcpus"] == 1);  // the running shape
  CHECK(listed[1]["name"] == "dev");
  CHECK(listed[1]["removed"] == false);
  auto health = api.Get("/healthz");
  REQUIRE(health);
  nlohmann::json h = nlohmann::json::parse(health->body);
  REQUIRE(h["restart_required"].size() == 1);
  CHECK_THAT(h["restart_required"][0].get<std::string>(),
             Catch::StartsWith("pool ci: vcpus 1 -> 2 needs a restart"));

  // A file that does not check: refused whole, the configuration in force kept.
  write("[[pools]]\nname = \"ci\"\nimage = \"tiny\"\nmax = 0\n");
  status = reloaded();
  CHECK_THAT(status, Catch::Contains("reload refused: " + config + ":"));
  CHECK_THAT(status, Catch::Contains("pools[0].max"));
  CHECK(pools().size() == 2);

  // dev removed (it has no lease, so it goes at once), the shape back as it runs: nothing left
  // to restart for.
  write("[[pools]]\nname = \"ci\"\nimage = \"tiny\"\nmax_ttl = \"2h\"\nmax = 3\n");
  status = reloaded();
  CHECK(status == "READY=1\nSTATUS=serving on " + url);
  listed = pools();
  REQUIRE(listed.size() == 1);
  CHECK(listed[0]["name"] == "ci");
  health = api.Get("/healthz");
  REQUIRE(health);
  CHECK_FALSE(nlohmann::json::parse(health->body).contains("restart_required"));
  const std::string log = read_file(dir.path / "armhived.log");
  CHECK_THAT(log, Catch::Contains("reload refused (the configuration in force is kept)"));
  CHECK_THAT(log, Catch::Contains("reload: pool dev: removed"));

  REQUIRE(::kill(pid, SIGTERM) == 0);
  reap.pid = -1;
  CHECK(wait_exit(pid) == 0);
}

TEST_CASE(
    "SIGHUP applies the github and access tables live: a rotated webhook secret and token, the "
    "reconcile period and the access caps take effect and what needs a restart is named",
    "[daemon][service][reload][github]") {
  using namespace std::chrono_literals;
  TempDir dir;
  GithubStandin github(dir.path.string());
  const int github_port = github.port();
  const std::string config = (dir.path / "armhived.toml").string();
  const std::string secret_file = (dir.path / "webhook.secret").string();
  const std::string token_file = (dir.path / "github.token").string();
  write_secret_file(secret_file, "first-secret");
  write_secret_file(token_file, "token-one");
  auto write = [&](const std::string& github_keys, const std::string& access_keys) {
    std::ofstream(config) << "[server]\nport = 0\nbootstrap_token_file = \""
                          << (dir.path / "admin.token").string() << "\"\n[host]\nstate_dir = \""
                          << (dir.path / "state").string()
                          << "\"\nlibvirt_uri = \"test:///default\"\n"
                          << "[github]\napi_url = \"http://127.0.0.1:" << github_port << "\"\n"
                          << "token_file = \"" << token_file << "\"\n"
                          << "webhook_secret_file = \"" << secret_file << "\"\n"
                          << github_keys << "[github.labels]\narmhive-arm64 = \"ci\"\n"
                          << "[access]\nlisten = \"127.0.0.1\"\nport_min = 23000\n"
                          << access_keys << "[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n"
                          << "access_ports = [8080, 8081]\n";
  };
  write("repo = \"octo-org/example\"\nreconcile_period = \"1h\"\n", "port_max = 23099\n");
  NotifySocket systemd((dir.path / "notify").string());
  pid_t pid = spawn_service({ARMHIVE_DAEMON_PATH, "--config", config}, systemd.path,
                            (dir.path / "armhived.log").string());
  REQUIRE(pid > 0);
  Reap reap{pid};
  const std::string ready = wait_ready(systemd);
  INFO(read_file(dir.path / "armhived.log"));
  REQUIRE_FALSE(ready.empty());
  const std::string url = serving_url(ready);
  const int port = std::stoi(url.substr(url.rfind(':') + 1));
  httplib::Client api(url);
  api.set_bearer_token_auth(admin_token(dir.path));
  auto reloaded = [&] {
    REQUIRE(::kill(pid, SIGHUP) == 0);
    std::string m = systemd.next();
    while (m == "WATCHDOG=1") m = systemd.next();
    CHECK(m.rfind("RELOADING=1\n", 0) == 0);
    m = systemd.next();
    while (m == "WATCHDOG=1") m = systemd.next();
    REQUIRE(m.rfind("READY=1\n", 0) == 0);
    return m;
  };
  // A delivery GitHub would send, signed with `secret`: the HTTP status armhived answers. A
  // job completed without a runner of ours: accepted, and nothing to do.
  int64_t job = 9000;
  auto deliver = [&](const std::string& secret) {
    ++job;
    const std::string body = workflow_job_json("completed", job);
    return post_github_webhook(port, dir.path.string(), "delivery-" + std::to_string(job), body,
                               webhook_signature(secret, body));
  };
  // The runner listings (one per reconcile pass) made with `bearer`, and their paths.
  auto passes_with = [&](const std::string& bearer) {
    std::vector<std::string> paths;
    for (const nlohmann::json& r : github.requests()) {
      if (r.value("method", "") == "GET" &&
          r.value("path", "").find("/actions/runners") != std::string::npos &&
          r.value("authorization", "") == "Bearer " + bearer) {
        paths.push_back(r["path"].get<std::string>());
      }
    }
    return paths;
  };
  auto wait_for_pass = [&](const std::string& bearer) {
    for (auto deadline = std::chrono::steady_clock::now() + 90s;
         passes_with(bearer).empty() && std::chrono::steady_clock::now() < deadline;) {
      std::this_thread::sleep_for(200ms);
    }
    return passes_with(bearer);
  };

  // Running: the first pass at start, with the token it started with.
  REQUIRE(wait_for_pass("token-one").size() == 1);
  CHECK(deliver("first-secret") == 202);
  CHECK(deliver("second-secret") == 401);
  // A lease asking for more extra ports than [access] allows (the count is checked first).
  auto ask_ports = [&](const std::string& ports) {
    auto r = api.Post("/v1/leases", "{\"pool\": \"ci\", \"ports\": [" + ports + "]}",
                      "application/json");
    REQUIRE(r);
    return std::make_pair(r->status, r->body);
  };
  auto [code, body] = ask_ports("8080, 8081, 8082, 8083, 8084");
  CHECK(code == 400);
  CHECK_THAT(body, Catch::Contains("at most 4 extra ports per lease"));

  // The webhook secret and the token rotated, the period shortened, the access caps lowered;
  // another repository and another port range, which need a restart.
  write_secret_file(secret_file, "second-secret");
  write_secret_file(token_file, "token-two");
  write("repo = \"octo-org/other\"\nreconcile_period = \"10s\"\n",
        "port_max = 23050\nmax_extra_ports = 1\nmax_sessions = 8\n");
  std::string status = reloaded();
  CHECK_THAT(status, Catch::Contains("2 change(s) need a restart"));
  std::tie(code, body) = ask_ports("8080, 8081");
  CHECK(code == 400);
  CHECK_THAT(body, Catch::Contains("at most 1 extra ports per lease"));
  CHECK(deliver("second-secret") == 202);
  // GitHub's settings may still hold the old secret: it is accepted for the overlap (10 min).
  CHECK(deliver("first-secret") == 202);
  // The next pass comes within the new period (the old one was an hour), with the new token,
  // on the repository armhived started with.
  std::vector<std::string> passes = wait_for_pass("token-two");
  REQUIRE_FALSE(passes.empty());
  CHECK_THAT(passes[0], Catch::Contains("/repos/octo-org/example/actions/runners"));
  auto state = api.Get("/v1/github");
  REQUIRE(state);
  REQUIRE(state->status == 200);
  CHECK(nlohmann::json::parse(state->body).value("last_reconcile_error", "") == "");
  auto health = api.Get("/healthz");
  REQUIRE(health);
  nlohmann::json h = nlohmann::json::parse(health->body);
  REQUIRE(h["restart_required"].size() == 2);
  CHECK_THAT(h["restart_required"][0].get<std::string>(),
             Catch::StartsWith("[github] repo: 'octo-org/example' -> 'octo-org/other' needs a "
                               "restart"));
  CHECK_THAT(h["restart_required"][1].get<std::string>(),
             Catch::StartsWith("[access] port_max: 23099 -> 23050 needs a restart"));

  // A token file that holds no token: the whole reload is refused (the new secret too), and
  // what is in force stays.
  write_secret_file(secret_file, "never-secret");
  std::ofstream(token_file, std::ios::trunc) << "\n";
  status = reloaded();
  CHECK_THAT(status, Catch::Contains("1 refused"));
  CHECK(deliver("never-secret") == 401);
  CHECK(deliver("second-secret") == 202);

  // A leaked secret: rotated with no overlap, the replaced one is refused at once.
  write_secret_file(token_file, "token-two");
  write_secret_file(secret_file, "third-secret");
  write(
      "repo = \"octo-org/example\"\nreconcile_period = \"10s\"\nwebhook_secret_overlap = \"0s\"\n",
      "port_max = 23099\nmax_extra_ports = 1\nmax_sessions = 8\n");
  status = reloaded();
  CHECK(status == "READY=1\nSTATUS=serving on " + url);
  CHECK(deliver("third-secret") == 202);
  CHECK(deliver("second-secret") == 401);
  health = api.Get("/healthz");
  REQUIRE(health);
  CHECK_FALSE(nlohmann::json::parse(health->body).contains("restart_required"));

  const std::string log = read_file(dir.path / "armhived.log");
  CHECK_THAT(log, Catch::Contains("reload: github: reconcile_period 1h -> 10s"));
  CHECK_THAT(log, Catch::Contains("reload: github: the webhook secret changed"));
  CHECK_THAT(log, Catch::Contains("reload: github: the token changed"));
  CHECK_THAT(log, Catch::Contains("reload: access: max_sessions 1024 -> 8"));
  CHECK_THAT(log, Catch::Contains("the reload is refused, the configuration in force is kept"));
  CHECK_THAT(log, Catch::Contains("signed with the previous webhook secret"));
  for (const char* secret : {"first-secret", "second-secret", "third-secret", "token-one",
                             "token-two", "never-secret"}) {
    CHECK(log.find(secret) == std::string::npos);
  }

  REQUIRE(::kill(pid, SIGTERM) == 0);
  reap.pid = -1;
  CHECK(wait_exit(pid) == 0);
}

TEST_CASE(
    "SIGHUP applies an organisation's new reconcile_repos: the passes after it look in the "
    "repositories the file lists now",
    "[daemon][service][reload][github]") {
  using namespace std::chrono_literals;
  TempDir dir;
  GithubStandin github(dir.path.string());
  const int github_port = github.port();
  const std::string config = (dir.path / "armhived.toml").string();
  const std::string secret_file = (dir.path / "webhook.secret").string();
  const std::string token_file = (dir.path / "github.token").string();
  write_secret_file(secret_file, "a-secret");
  write_secret_file(token_file, "a-token");
  auto write = [&](const std::string& repos) {
    std::ofstream(config) << "[server]\nport = 0\nbootstrap_token_file = \""
                          << (dir.path / "admin.token").string() << "\"\n[host]\nstate_dir = \""
                          << (dir.path / "state").string()
                          << "\"\nlibvirt_uri = \"test:///default\"\n"
                          << "[github]\napi_url = \"http://127.0.0.1:" << github_port << "\"\n"
                          << "org = \"octo-org\"\nreconcile_period = \"10s\"\n"
                          << "reconcile_repos = [" << repos << "]\n"
                          << "token_file = \"" << token_file << "\"\n"
                          << "webhook_secret_file = \"" << secret_file << "\"\n"
                          << "[github.labels]\narmhive-arm64 = \"ci\"\n"
                          << "[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n";
  };
  write("\"octo-org/app\"");
  NotifySocket systemd((dir.path / "notify").string());
  pid_t pid = spawn_service({ARMHIVE_DAEMON_PATH, "--config", config}, systemd.path,
                            (dir.path / "armhived.log").string());
  REQUIRE(pid > 0);
  Reap reap{pid};
  const std::string ready = wait_ready(systemd);
  INFO(read_file(dir.path / "armhived.log"));
  REQUIRE_FALSE(ready.empty());
  httplib::Client api(serving_url(ready));
  api.set_bearer_token_auth(admin_token(dir.path));

  // What the passes asked GitHub, from request `from` on: per pass (it begins with the runner
  // listing) the repositories whose queued runs it listed.
  auto passes_from = [&](size_t from) {
    std::vector<std::vector<std::string>> passes;
    const std::vector<nlohmann::json> requests = github.requests();
    for (size_t i = from; i < requests.size(); ++i) {
      const std::string path = requests[i].value("path", "");
      if (path.rfind("/orgs/octo-org/actions/runners?", 0) == 0) {
        passes.emplace_back();
      } else if (!passes.empty() && path.find("/actions/runs?status=queued") != std::string::npos) {
        passes.back().push_back(path.substr(0, path.find("/actions/")));
      }
    }
    return passes;
  };
  // Waits until the `count`th pass from `from` on has listed `repos` repositories, or the one
  // after it began (or 90 s passed).
  auto wait_for_passes = [&](size_t from, size_t count, size_t repos) {
    for (auto deadline = std::chrono::steady_clock::now() + 90s;
         std::chrono::steady_clock::now() < deadline;) {
      auto p = passes_from(from);
      if (p.size() > count || (p.size() == count && p.back().size() >= repos)) return p;
      systemd.drain();  // the watchdog's pings
      std::this_thread::sleep_for(200ms);
    }
    return passes_from(from);
  };
  std::vector<std::vector<std::string>> before = wait_for_passes(0, 1, 1);
  REQUIRE_FALSE(before.empty());
  CHECK(before[0] == std::vector<std::string>{"/repos/octo-org/app"});

  write("\"octo-org/lib\", \"octo-org/tools\"");
  REQUIRE(::kill(pid, SIGHUP) == 0);
  for (std::string m = systemd.next(); m.rfind("READY=1\n", 0) != 0; m = systemd.next()) {
    REQUIRE_FALSE(m.empty());
  }
  // A pass that had begun before the reload ends with the list it began with: the one after
  // it is the first that surely began after the reload.
  const size_t from = github.requests().size();
  std::vector<std::vector<std::string>> after = wait_for_passes(from, 2, 2);
  REQUIRE(after.size() >= 2);
  CHECK(after[1] == std::vector<std::string>{"/repos/octo-org/lib", "/repos/octo-org/tools"});
  auto health = api.Get("/healthz");
  REQUIRE(health);
  CHECK_FALSE(nlohmann::json::parse(health->body).contains("restart_required"));
  const std::string log = read_file(dir.path / "armhived.log");
  CHECK_THAT(log, Catch::Contains("reload: github: reconcile_repos ['octo-org/app'] -> "
                                  "['octo-org/lib', 'octo-org/tools']"));

  REQUIRE(::kill(pid, SIGTERM) == 0);
  reap.pid = -1;
  CHECK(wait_exit(pid) == 0);
}

TEST_CASE("an armhived that cannot start never says READY, and says why", "[daemon][service]") {
  TempDir dir;
  const std::string config = (dir.path / "armhived.toml").string();
  // Its only libvirtd is not there (a port nothing listens on).
  std::ofstream(config) << "[host]\nstate_dir = \"" << (dir.path / "state").string() << "\"\n"
                        << "libvirt_uri = \"qemu+tcp://127.0.0.1:9/system\"\n"
                        << "[[pools]]\nname = \"p\"\nimage = \"tiny\"\n";
  NotifySocket systemd((dir.path / "notify").string());
  pid_t pid = spawn_service({ARMHIVE_DAEMON_PATH, "--config", config}, systemd.path,
                            (dir.path / "armhived.log").string());
  REQUIRE(pid > 0);
  CHECK(wait_exit(pid) == 1);
  std::vector<std::string> said;
  for (;;) {
    char buf[4096];
    ssize_t n = ::recv(systemd.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0) break;
    said.emplace_back(buf, static_cast<size_t>(n));
  }
  INFO(read_file(dir.path / "armhived.log"));
  REQUIRE_FALSE(said.empty());
  for (const std::string& m : said) CHECK(m.find("READY=1") == std::string::npos);
  CHECK_THAT(said.back(), Catch::StartsWith("STATUS=failed: libvirt hosts: "));
  CHECK_THAT(said.back(), Catch::Contains("no libvirt host can be driven"));
}

// The member of GET /v1/cluster's answer named `holder`; null when it is not listed.
nlohmann::json member_of(const nlohmann::json& cluster, const std::string& holder) {
  for (const nlohmann::json& m : cluster["members"]) {
    if (m["holder"] == holder) return m;
  }
  return nullptr;
}

TEST_CASE("two armhived on one PostgreSQL: one leads, the other waits and takes over when it dies",
          "[daemon][service][postgres]") {
  auto pg = TestPostgresDatabase::make();
  INFO(pg.status().to_string());
  REQUIRE(pg.is_ok());
  TempDir dir;
  // Two instances, each with its own state directory and API, one database.
  auto config_for = [&](const std::string& name, int port = 0) {
    fs::create_directories(dir.path / name);
    const std::string path = (dir.path / name / "armhived.toml").string();
    std::ofstream(path) << "[server]\nport = " << port
                        << "\n"
                        // One admin token for the lab: the file goes with the configuration.
                        << "bootstrap_token_file = \"" << (dir.path / "admin.token").string()
                        << "\"\n"
                        << "[host]\nname = \"" << name << "\"\nstate_dir = \""
                        << (dir.path / name / "state").string() << "\"\n"
                        << "libvirt_uri = \"test:///default\"\n"
                        << "[store]\nurl = \"postgresql:///?host=" << (*pg)->dir()
                        << "&dbname=" << (*pg)->name() << "&user=armhive\"\nleader_lease = \"2s\"\n"
                        << "[[pools]]\nname = \"p\"\nimage = \"tiny\"\n";
    return std::vector<std::string>{ARMHIVE_DAEMON_PATH, "--config", path};
  };
  NotifySocket systemd_a((dir.path / "notify-a").string());
  NotifySocket systemd_b((dir.path / "notify-b").string());
  pid_t a = spawn_service(config_for("hc1"), systemd_a.path, (dir.path / "a.log").string());
  REQUIRE(a > 0);
  Reap reap_a{a};
  const std::string ready_a = wait_ready(systemd_a);
  INFO("hc1: " << read_file(dir.path / "a.log"));
  REQUIRE(ready_a.rfind("READY=1\nSTATUS=serving on ", 0) == 0);
  const std::string token = admin_token(dir.path);
  REQUIRE_FALSE(token.empty());

  // The second waits: systemd hears it is up as a standby, and why.
  const int port_b = free_port();
  pid_t b = spawn_service(config_for("tx1", port_b), systemd_b.path, (dir.path / "b.log").string());
  REQUIRE(b > 0);
  Reap reap_b{b};
  std::vector<std::string> before;
  const std::string standby = wait_ready(systemd_b, &before);
  INFO("tx1: " << read_file(dir.path / "b.log"));
  CHECK(standby == "READY=1\nSTATUS=standby: waiting to lead");
  bool named_leader = false;
  for (const std::string& m : before) {
    named_leader =
        named_leader || m.find("armhived@hc1/" + std::to_string(a) + " leads") != std::string::npos;
  }
  CHECK(named_leader);
  // Its API address answers as a standby: not healthy (a load balancer sends nothing there),
  // naming the leader, and every other request redirected there (307 keeps method and body).
  {
    httplib::Client standby_api("127.0.0.1", port_b);
    // The leader publishes its API's URL once it listens, with its next renewal; the standby
    // reads it with its own next one.
    nlohmann::json body;
    int status = 0;
    for (int i = 0; i < 200; ++i) {
      auto health = standby_api.Get("/healthz");
      REQUIRE(health);
      status = health->status;
      body = nlohmann::json::parse(health->body);
      if (body.contains("leader") && body["leader"]["url"] == serving_url(ready_a)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    CHECK(status == 503);
    CHECK(body["type"] == "https://armhive.dev/problems/unavailable");
    CHECK_THAT(body["detail"].get<std::string>(), Catch::Contains("standby"));
    CHECK(body["leader"]["url"] == serving_url(ready_a));
    CHECK(body["leader"]["holder"] == "armhived@hc1/" + std::to_string(a));
    auto pools = standby_api.Post("/v1/leases?wait=0", "{}", "application/json");
    REQUIRE(pools);
    CHECK(pools->status == 307);
    CHECK(pools->get_header_value("Location") == serving_url(ready_a) + "/v1/leases?wait=0");

    // Either instance says who leads, since when, and who is there: the leader from the
    // database, the standby itself (not redirected) on its own connection to it.
    standby_api.set_bearer_token_auth(token);
    httplib::Client leader_api(serving_url(ready_a));
    leader_api.set_bearer_token_auth(token);
    auto from_a = leader_api.Get("/v1/cluster");
    auto from_b = standby_api.Get("/v1/cluster");
    REQUIRE(from_a);
    REQUIRE(from_b);
    INFO(from_a->body << "\n" << from_b->body);
    CHECK(from_a->status == 200);
    CHECK(from_b->status == 200);
    const nlohmann::json view_a = nlohmann::json::parse(from_a->body);
    const nlohmann::json view_b = nlohmann::json::parse(from_b->body);
    CHECK(view_a["store"] == "postgresql");
    CHECK(view_a["leader"]["holder"] == "armhived@hc1/" + std::to_string(a));
    CHECK(view_a["leader"]["epoch"] == 1);
    CHECK(view_a["leader"] == view_b["leader"]);
    CHECK(member_of(view_b, "armhived@hc1/" + std::to_string(a))["role"] == "leader");
    CHECK(member_of(view_b, "armhived@tx1/" + std::to_string(b))["role"] == "standby");
    // Both /healthz say since when the leader leads, as the view does.
    auto leader_health = leader_api.Get("/healthz");
    REQUIRE(leader_health);
    CHECK(nlohmann::json::parse(leader_health->body)["leader"] == view_a["leader"]);
    CHECK(body["leader"]["since"] == view_a["leader"]["since"]);
  }

  // The leader dies without a word: the standby takes over once its lease has ended, and
  // serves the same state (the token the first one made authenticates there).
  REQUIRE(::kill(a, SIGKILL) == 0);
  reap_a.pid = -1;
  wait_exit(a);
  const std::string ready_b = wait_ready(systemd_b);
  INFO("tx1 after the takeover: " << read_file(dir.path / "b.log"));
  REQUIRE(ready_b.rfind("READY=1\nSTATUS=serving on ", 0) == 0);
  httplib::Client api(serving_url(ready_b));
  api.set_bearer_token_auth(token);
  auto pools = api.Get("/v1/pools");
  REQUIRE(pools);
  CHECK(pools->status == 200);
  CHECK_THAT(read_file(dir.path / "b.log"), Catch::Contains("leading (epoch 2)"));
  // The survivor leads now; the dead one is still listed, its last contact where it stopped
  // and its age growing.
  {
    auto before_wait = api.Get("/v1/cluster");
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    auto after_wait = api.Get("/v1/cluster");
    REQUIRE(before_wait);
    REQUIRE(after_wait);
    INFO(before_wait->body << "\n" << after_wait->body);
    REQUIRE(before_wait->status == 200);
    REQUIRE(after_wait->status == 200);
    const nlohmann::json first = nlohmann::json::parse(before_wait->body);
    const nlohmann::json second = nlohmann::json::parse(after_wait->body);
    CHECK(second["leader"]["holder"] == "armhived@tx1/" + std::to_string(b));
    CHECK(second["leader"]["epoch"] == 2);
    CHECK(member_of(second, "armhived@tx1/" + std::to_string(b))["role"] == "leader");
    const std::string dead = "armhived@hc1/" + std::to_string(a);
    CHECK(member_of(second, dead)["role"] == "standby");
    CHECK(member_of(second, dead)["last_contact"] == member_of(first, dead)["last_contact"]);
    CHECK(member_of(second, dead)["last_contact_age_s"].get<double>() >
          member_of(first, dead)["last_contact_age_s"].get<double>());
  }

  // The first one, started again, is now the standby; SIGTERM stops it while it waits.
  NotifySocket systemd_c((dir.path / "notify-c").string());
  pid_t c = spawn_service(config_for("hc1"), systemd_c.path, (dir.path / "c.log").string());
  REQUIRE(c > 0);
  Reap reap_c{c};
  CHECK(wait_ready(systemd_c) == "READY=1\nSTATUS=standby: waiting to lead");
  REQUIRE(::kill(c, SIGTERM) == 0);
  reap_c.pid = -1;
  CHECK(wait_exit(c) == 0);

  // The leader stops cleanly and releases its lease.
  REQUIRE(::kill(b, SIGTERM) == 0);
  reap_b.pid = -1;
  CHECK(wait_exit(b) == 0);
  auto db = PgDatabase::connect((*pg)->url());
  REQUIRE(db.is_ok());
  auto row = (*db)->query("SELECT expires_at FROM leader WHERE id = 1");
  REQUIRE(row.is_ok());
  REQUIRE(row->size() == 1);
  CHECK(sql_int((*row)[0][0]) == 0);
}

TEST_CASE(
    "armhived migrate copies a stopped armhived's SQLite state into PostgreSQL, where an "
    "armhived serves it",
    "[daemon][service][postgres][migrate]") {
  auto pg = TestPostgresDatabase::make();
  INFO(pg.status().to_string());
  REQUIRE(pg.is_ok());
  TempDir dir;
  const std::string url =
      "postgresql:///?host=" + (*pg)->dir() + "&dbname=" + (*pg)->name() + "&user=armhive";
  const std::string head = "[server]\nport = 0\nbootstrap_token_file = \"" +
                           (dir.path / "admin.token").string() + "\"\n[host]\nstate_dir = \"" +
                           (dir.path / "state").string() +
                           "\"\nlibvirt_uri = \"test:///default\"\n";
  const std::string pools = "[[pools]]\nname = \"p\"\nimage = \"tiny\"\n";
  const std::string sqlite_config = (dir.path / "armhived.toml").string();
  const std::string pg_config = (dir.path / "armhived-pg.toml").string();
  std::ofstream(sqlite_config) << head << pools;
  std::ofstream(pg_config) << head << "[store]\nurl = \"" << url << "\"\n" << pools;
  SubprocessRunner runner;
  auto armhived = [&](const std::string& config, std::vector<std::string> args) {
    args.insert(args.begin(), {ARMHIVE_DAEMON_PATH, "--config", config});
    auto r = runner.run({.argv = args, .timeout = std::chrono::seconds(300)});
    REQUIRE(r.is_ok());
    return *r;
  };

  // An armhived on SQLite with a token of a CI system and a lease.
  NotifySocket systemd((dir.path / "notify").string());
  pid_t pid = spawn_service({ARMHIVE_DAEMON_PATH, "--config", sqlite_config}, systemd.path,
                            (dir.path / "armhived.log").string());
  REQUIRE(pid > 0);
  Reap reap{pid};
  const std::string ready = wait_ready(systemd);
  INFO(read_file(dir.path / "armhived.log"));
  REQUIRE_FALSE(ready.empty());
  auto created = armhived(sqlite_config, {"token", "create", "ci-bot", "--role", "ci"});
  REQUIRE(created.exit_code == 0);
  std::string ci_secret = created.out;
  while (!ci_secret.empty() && ci_secret.back() == '\n') ci_secret.pop_back();
  std::string lease_id;
  {
    httplib::Client api(serving_url(ready));
    api.set_bearer_token_auth(ci_secret);
    auto r = api.Post("/v1/leases?wait=0", "{\"pool\": \"p\"}", "application/json");
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status / 100 == 2);
    lease_id = nlohmann::json::parse(r->body).value("id", "");
    REQUIRE_FALSE(lease_id.empty());
  }

  // While it runs: refused, saying why; bad URLs are bad usage.
  auto running = armhived(sqlite_config, {"migrate", "--to", url});
  CHECK(running.exit_code == 1);
  CHECK_THAT(running.err, Catch::Contains("another armhived serves from"));
  CHECK_THAT(running.err, Catch::Contains("stop armhived first"));
  auto not_pg = armhived(sqlite_config, {"migrate", "--to", "mysql://db.example/armhive"});
  CHECK(not_pg.exit_code == 2);
  CHECK_THAT(not_pg.err, Catch::Contains("must be a postgresql:// connection URI"));
  auto password =
      armhived(sqlite_config, {"migrate", "--to", "postgresql://armhive:s3cret@db/armhive"});
  CHECK(password.exit_code == 2);
  CHECK_THAT(password.err, Catch::Contains("holds a password"));
  CHECK(armhived(sqlite_config, {"migrate"}).exit_code == 2);

  REQUIRE(::kill(pid, SIGTERM) == 0);
  reap.pid = -1;
  CHECK(wait_exit(pid) == 0);

  // Every table a freshly started armhived made is one the migration copies or deliberately
  // leaves (a store missing from state_components() would lose its rows here).
  {
    std::set<std::string> known;
    for (const StateComponent& c : state_components()) {
      for (const StateTable& t : c.tables) known.emplace(t.name);
    }
    for (std::string_view t : bookkeeping_tables()) known.emplace(t);
    auto db = Database::open((dir.path / "state" / "armhive.db").string());
    REQUIRE(db.is_ok());
    auto tables = (*db)->query(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, 7) != 'sqlite_'");
    REQUIRE(tables.is_ok());
    CHECK(tables->size() > 10);
    for (const SqlRow& r : *tables) {
      INFO("table " << sql_text(r[0]));
      CHECK(known.count(sql_text(r[0])) == 1);
    }
  }

  // Stopped: copied and verified, and the operator is told the next step.
  auto migrated = armhived(sqlite_config, {"migrate", "--to", url});
  INFO(migrated.out << migrated.err);
  REQUIRE(migrated.exit_code == 0);
  CHECK_THAT(migrated.out, Catch::Matches(R"((.|\n)*\n  leases +1 = 1\n(.|\n)*)"));
  CHECK_THAT(migrated.out, Catch::Matches(R"((.|\n)*\n  tokens +2 = 2\n(.|\n)*)"));
  CHECK_THAT(migrated.out, Catch::Contains("  lease_history: "));
  CHECK_THAT(migrated.out, Catch::Contains("verified"));
  CHECK_THAT(migrated.out, Catch::Contains("url = \"" + url + "\""));
  CHECK(migrated.out.find("leader") == std::string::npos);
  // Once is enough: the target now holds rows.
  auto twice = armhived(sqlite_config, {"migrate", "--to", url});
  CHECK(twice.exit_code == 1);
  CHECK_THAT(twice.err,
             Catch::Contains("the target database is not empty: table leases has 1 row"));

  // The armhived of the new configuration serves the same state: the lease, the CI token.
  NotifySocket systemd_pg((dir.path / "notify-pg").string());
  pid_t on_pg = spawn_service({ARMHIVE_DAEMON_PATH, "--config", pg_config}, systemd_pg.path,
                              (dir.path / "armhived-pg.log").string());
  REQUIRE(on_pg > 0);
  Reap reap_pg{on_pg};
  const std::string ready_pg = wait_ready(systemd_pg);
  INFO(read_file(dir.path / "armhived-pg.log"));
  REQUIRE(ready_pg.rfind("READY=1\nSTATUS=serving on ", 0) == 0);
  httplib::Client api(serving_url(ready_pg));
  api.set_bearer_token_auth(ci_secret);
  auto lease = api.Get("/v1/leases/" + lease_id);
  REQUIRE(lease);
  CHECK(lease->status == 200);
  CHECK(nlohmann::json::parse(lease->body).value("pool", "") == "p");
  auto again = armhived(pg_config, {"migrate", "--to", url});
  CHECK(again.exit_code == 2);
  CHECK_THAT(again.err, Catch::Contains("this configuration already uses PostgreSQL"));
  REQUIRE(::kill(on_pg, SIGTERM) == 0);
  reap_pg.pid = -1;
  CHECK(wait_exit(on_pg) == 0);
}

}  // namespace
}  // namespace armhive
