#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/process_runner.h"
#include "tests/daemon/http/api_fixture.h"
#include "tests/support/closed_port.h"

namespace armhive {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct Cli {
  ApiFixture& f;
  std::string token;
  fs::path home;

  ProcessResult run(std::vector<std::string> args, const std::string& stdin_data = {},
                    std::map<std::string, std::string> env = {}) {
    std::vector<std::string> argv{ARMHIVE_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessRequest req;
    req.argv = argv;
    req.stdin_data = stdin_data;
    req.timeout = std::chrono::seconds(60);
    req.env = {{"HOME", home.string()},
               {"XDG_CONFIG_HOME", (home / ".config").string()},
               {"ARMHIVE_CONFIG", ""},
               {"ARMHIVE_SERVER", f.url()},
               {"ARMHIVE_TOKEN", token}};
    for (auto& [k, v] : env) req.env[k] = v;
    SubprocessRunner runner;
    auto r = runner.run(req);
    REQUIRE(r.is_ok());
    return *r;
  }

  json run_json(std::vector<std::string> args) {
    args.insert(args.begin(), "--json");
    auto r = run(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    json j = json::parse(r.out, nullptr, false);
    INFO(r.out);
    REQUIRE_FALSE(j.is_discarded());
    return j;
  }
};

// A fake $HOME with an SSH key pair, removed at the end of the test.
struct TempHome {
  explicit TempHome(const char* name);
  ~TempHome() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

fs::path make_home(const char* name) {
  fs::path home = fs::temp_directory_path() / (std::string(name) + "-" + std::to_string(getpid()));
  fs::remove_all(home);
  fs::create_directories(home / ".ssh");
  std::ofstream(home / ".ssh" / "id_ed25519.pub") << kTestKey << "\n";
  std::ofstream(home / ".ssh" / "id_ed25519") << "-----BEGIN OPENSSH PRIVATE KEY-----\n";
  return home;
}

TempHome::TempHome(const char* name) : path(make_home(name)) {}

TEST_CASE("cli: lease create, ls, show, renew and rm against a real server", "[cli]") {
  ApiFixture f;
  TempHome home("armhive-cli-1");
  Cli cli{f, f.ci_b, home.path};
  std::string key = (cli.home / ".ssh" / "id_ed25519.pub").string();

  json l = cli.run_json({"lease", "create", "--pool", "tiny", "--ttl", "2h", "--ssh-key", key,
                         "--label", "job=42", "--label", "team=arm", "--purpose", "dev"});
  CHECK(l["state"] == "ready");
  CHECK(l["owner"] == "ci-b");
  CHECK(l["ttl_seconds"] == 7200);
  CHECK(l["labels"]["team"] == "arm");
  CHECK(l["purpose"] == "dev");
  std::string id = l["id"];

  // The private key path works too (its .pub is used); human output prints the id on stdout.
  auto human = cli.run({"lease", "create", "--pool", "tiny", "--ssh-key",
                        (cli.home / ".ssh" / "id_ed25519").string()});
  INFO(human.err);
  REQUIRE(human.exit_code == 0);
  CHECK(human.out.rfind("l-", 0) == 0);
  CHECK(human.err.find("is ready: ssh ") != std::string::npos);

  json list = cli.run_json({"lease", "ls", "--label", "job=42"});
  REQUIRE(list.size() == 1);
  CHECK(list[0]["id"] == id);
  auto table = cli.run({"lease", "ls"});
  CHECK(table.exit_code == 0);
  CHECK(table.out.find("ID") == 0);
  CHECK(table.out.find(id) != std::string::npos);
  CHECK(table.out.find("job=42,team=arm") != std::string::npos);

  auto show = cli.run({"lease", "show", id});
  CHECK(show.exit_code == 0);
  CHECK(show.out.find("State:    ready") != std::string::npos);
  CHECK(show.out.find("SSH:      ssh -o HostKeyAlias=armhive-lease-" + id +
                      " -o StrictHostKeyChecking=yes -o UserKnownHostsFile=" + id +
                      ".known_hosts armhive@") != std::string::npos);
  CHECK(show.out.find("StrictHostKeyChecking=no") == std::string::npos);

  json renewed = cli.run_json({"lease", "renew", id, "--ttl", "3h"});
  CHECK(renewed["ttl_seconds"] == 3 * 3600);

  json removed = cli.run_json({"lease", "rm", id});
  REQUIRE(removed.size() == 1);
  CHECK(removed[0]["state"] == "released");
  // Ended leases are hidden unless --all.
  CHECK(cli.run_json({"lease", "ls", "--label", "job=42"}).empty());
  CHECK(cli.run_json({"lease", "ls", "--all", "--label", "job=42"}).size() == 1);
}

TEST_CASE("cli: API errors exit 2 and name the field or say what to fix", "[cli]") {
  ApiFixture f;
  TempHome home("armhive-cli-2");
  Cli cli{f, f.ci_b, home.path};
  auto bad_label = cli.run({"lease", "create", "--pool", "tiny", "--label", "Bad Key=x"});
  CHECK(bad_label.exit_code == 2);
  CHECK(bad_label.err.find("labels.Bad Key") != std::string::npos);

  auto no_pool = cli.run({"lease", "create", "--pool", "nope"});
  CHECK(no_pool.exit_code == 2);
  CHECK(no_pool.err.find("no pool \"nope\"") != std::string::npos);
  CHECK(no_pool.err.find("armhive pools") != std::string::npos);

  auto too_long = cli.run({"lease", "create", "--pool", "slow", "--ttl", "3h"});
  CHECK(too_long.exit_code == 2);
  CHECK(too_long.err.find("ttl") != std::string::npos);

  Cli anonymous{f, "", cli.home};
  auto unauth = anonymous.run({"lease", "ls"});
  CHECK(unauth.exit_code == 2);
  CHECK(unauth.err.find("ARMHIVE_TOKEN") != std::string::npos);

  Cli reader{f, f.reader, cli.home};
  auto denied = reader.run({"lease", "create", "--pool", "tiny"});
  CHECK(denied.exit_code == 2);
  CHECK(denied.err.find("role read") != std::string::npos);

  Cli quota{f, f.ci_a, cli.home};
  REQUIRE(quota.run({"lease", "create", "--pool", "tiny"}).exit_code == 0);
  REQUIRE(quota.run({"lease", "create", "--pool", "tiny"}).exit_code == 0);
  auto full = quota.run({"lease", "create", "--pool", "tiny"});
  CHECK(full.exit_code == 2);
  CHECK(full.err.find("2 of its 2 concurrent leases") != std::string::npos);

  auto missing = cli.run({"lease", "show", "l-000000000999"});
  CHECK(missing.exit_code == 2);
}

TEST_CASE("cli: usage errors exit 1, an unreachable server exits 3", "[cli]") {
  ApiFixture f;
  TempHome home("armhive-cli-3");
  Cli cli{f, f.ci_b, home.path};
  CHECK(cli.run({}).exit_code == 1);
  CHECK(cli.run({"lease", "create"}).exit_code == 1);  // --pool is required
  auto ttl = cli.run({"lease", "create", "--pool", "tiny", "--ttl", "soon"});
  CHECK(ttl.exit_code == 1);
  CHECK(ttl.err.find("--ttl") != std::string::npos);
  auto key = cli.run({"lease", "create", "--pool", "tiny", "--ssh-key", "/nonexistent.pub"});
  CHECK(key.exit_code == 1);
  CHECK(key.err.find("cannot read /nonexistent.pub") != std::string::npos);
  CHECK(cli.run({"--server", "ftp://x", "pools"}).exit_code == 1);
  CHECK(cli.run({"--help"}).exit_code == 0);

  int port = f.server->port();
  f.server->stop();
  auto down =
      cli.run({"pools"}, {}, {{"ARMHIVE_SERVER", "http://127.0.0.1:" + std::to_string(port)}});
  CHECK(down.exit_code == 3);
  CHECK(down.err.find("is armhived running") != std::string::npos);
}

TEST_CASE("cli: server and token come from flags, environment or the config file", "[cli]") {
  ApiFixture f;
  TempHome temp("armhive-cli-4");
  fs::path home = temp.path;
  Cli cli{f, "", home};
  fs::create_directories(home / ".config" / "armhive");
  std::ofstream(home / ".config" / "armhive" / "config.toml")
      << "server = \"" << f.url() << "\"\ntoken = \"" << f.ci_b << "\"\n";
  // Only the config file (ARMHIVE_SERVER/TOKEN empty).
  auto from_file = cli.run({"pools"}, {}, {{"ARMHIVE_SERVER", ""}});
  INFO(from_file.err);
  CHECK(from_file.exit_code == 0);
  CHECK(from_file.out.find("tiny") != std::string::npos);
  // A flag beats the file.
  auto flag = cli.run({"--token", f.reader, "lease", "create", "--pool", "tiny"});
  CHECK(flag.exit_code == 2);
  // A broken config file is a usage error naming it.
  std::ofstream(home / "bad.toml") << "server = [1,\n";
  auto bad = cli.run({"--config", (home / "bad.toml").string(), "pools"});
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("bad.toml") != std::string::npos);
  std::ofstream(home / "typo.toml") << "sever = \"x\"\n";
  auto typo = cli.run({"--config", (home / "typo.toml").string(), "pools"});
  CHECK(typo.exit_code == 1);
  CHECK(typo.err.find("unknown key \"sever\"") != std::string::npos);
  // A directory where the file should be: a usage error naming it (it had aborted).
  auto dir = cli.run({"pools"}, {}, {{"ARMHIVE_CONFIG", home.string()}});
  CHECK(dir.exit_code == 1);
  CHECK(dir.err.find(home.string() + " is not a file") != std::string::npos);
}

TEST_CASE("cli: several servers from flags or environment or the config file and a bad entry",
          "[cli]") {
  ApiFixture f;
  TempHome temp("armhive-cli-servers");
  fs::path home = temp.path;
  Cli cli{f, f.ci_b, home};
  ClosedPort down;

  // ARMHIVE_SERVER with the first entry down: the second answers, a lease is made there (with
  // the Idempotency-Key the client makes for several servers, which the server accepts).
  const std::string list = down.url() + ", " + f.url();
  auto pools = cli.run({"pools"}, {}, {{"ARMHIVE_SERVER", list}});
  INFO(pools.err);
  CHECK(pools.exit_code == 0);
  CHECK(pools.out.find("tiny") != std::string::npos);
  auto lease = cli.run({"lease", "create", "--pool", "tiny"}, {}, {{"ARMHIVE_SERVER", list}});
  INFO(lease.err);
  CHECK(lease.exit_code == 0);
  CHECK(lease.out.rfind("l-", 0) == 0);
  // --server beats the environment.
  CHECK(cli.run({"--server", down.url() + "," + f.url(), "pools"}, {}, {{"ARMHIVE_SERVER", "x"}})
            .exit_code == 0);

  // The config file: a TOML array, or a comma list in a string.
  fs::create_directories(home / ".config" / "armhive");
  std::ofstream(home / ".config" / "armhive" / "config.toml")
      << "server = [\"" << down.url() << "\", \"" << f.url() << "\"]\n";
  auto from_array = cli.run({"pools"}, {}, {{"ARMHIVE_SERVER", ""}});
  INFO(from_array.err);
  CHECK(from_array.exit_code == 0);
  std::ofstream(home / ".config" / "armhive" / "config.toml")
      << "server = \"" << down.url() << "," << f.url() << "\"\n";
  CHECK(cli.run({"pools"}, {}, {{"ARMHIVE_SERVER", ""}}).exit_code == 0);

  // A bad entry is a usage error naming it and its place.
  auto bad = cli.run({"--server", f.url() + ",ftp://bad.example", "pools"});
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("ftp://bad.example") != std::string::npos);
  CHECK(bad.err.find("entry 2 of 2") != std::string::npos);
  auto empty = cli.run({"--server", f.url() + ",", "pools"});
  CHECK(empty.exit_code == 1);
  CHECK(empty.err.find("entry 2 of 2") != std::string::npos);

  // Every server down: exit 3 naming each.
  ClosedPort also_down;
  auto none = cli.run({"pools"}, {}, {{"ARMHIVE_SERVER", down.url() + "," + also_down.url()}});
  CHECK(none.exit_code == 3);
  CHECK(none.err.find(down.url()) != std::string::npos);
  CHECK(none.err.find(also_down.url()) != std::string::npos);
}

TEST_CASE("cli: --wait follows a pending lease until ready, or times out with exit 4", "[cli]") {
  ApiFixture f;
  TempHome home("armhive-cli-5");
  Cli cli{f, f.ci_b, home.path};
  auto timeout = cli.run({"lease", "create", "--pool", "slow", "--wait", "--wait-timeout", "2s"});
  CHECK(timeout.exit_code == 4);
  // Not a terminal: plain progress lines rather than a spinner.
  CHECK(timeout.err.find(": pending (waiting for capacity; queue position 1: at_pool_max)") !=
        std::string::npos);
  CHECK(timeout.err.find("\r") == std::string::npos);
  CHECK(timeout.err.find("still pending") != std::string::npos);
  // A waiting lease's place in the queue, as `lease show` prints it.
  json pending = cli.run_json({"lease", "create", "--pool", "slow"});
  CHECK(pending["queue"] == json{{"position", 2}, {"reason", "at_pool_max"}});
  auto shown = cli.run({"lease", "show", pending["id"]});
  CHECK(shown.out.find("Queue:    position 2: at_pool_max (the pool is at max, waiting for a "
                       "release)") != std::string::npos);

  std::atomic<bool> done{false};
  std::thread readier([&] {
    // Make every pending lease ready once the CLI has created one.
    while (!done) {
      auto leases = f.leases.list_leases(LeaseFilter{});
      if (leases.is_ok()) {
        for (const auto& l : *leases) {
          if (l.state == LeaseState::kPending) f.leases.make_ready(l.id);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  auto waited = cli.run({"--json", "lease", "create", "--pool", "slow", "--wait"});
  done = true;
  readier.join();
  INFO(waited.err);
  REQUIRE(waited.exit_code == 0);
  CHECK(json::parse(waited.out)["state"] == "ready");
}

TEST_CASE("cli: --wait shows a spinner with the state and elapsed time on a terminal", "[cli]") {
  if (access("/usr/bin/script", X_OK) != 0) {
    WARN("util-linux script(1) is missing: no pseudo-terminal to test with");
    return;
  }
  ApiFixture f;
  TempHome home("armhive-cli-tty");
  Cli cli{f, f.ci_b, home.path};
  // script(1) runs the CLI on a pseudo-terminal and copies what it writes to our stdout.
  std::string command =
      std::string(ARMHIVE_CLI_PATH) + " lease create --pool slow --wait --wait-timeout 2s";
  ProcessRequest req;
  req.argv = {"/usr/bin/script", "-qec", command, "/dev/null"};
  req.env = {{"HOME", cli.home.string()},
             {"ARMHIVE_CONFIG", ""},
             {"ARMHIVE_SERVER", f.url()},
             {"ARMHIVE_TOKEN", f.ci_b}};
  req.timeout = std::chrono::seconds(60);
  SubprocessRunner runner;
  auto r = runner.run(req);
  REQUIRE(r.is_ok());
  INFO(r->out << r->err);
  CHECK(r->exit_code == 4);
  CHECK(r->out.find("\r") != std::string::npos);  // redrawn in place
  CHECK(r->out.find(": pending (waiting for capacity; queue position 1: at_pool_max) ") !=
        std::string::npos);
  CHECK(r->out.find("still pending") != std::string::npos);
}

TEST_CASE("cli: exec propagates the remote exit code and output", "[cli]") {
  ApiFixture f;
  TempHome home("armhive-cli-6");
  Cli cli{f, f.ci_b, home.path};
  std::string id = cli.run({"lease", "create", "--pool", "tiny"}).out;
  id.pop_back();
  auto echo = cli.run({"exec", id, "--", "echo", "hello", "-n"});
  CHECK(echo.exit_code == 0);
  CHECK(echo.out == "hello -n\n");
  CHECK(cli.run({"exec", id, "--", "exit", "7"}).exit_code == 7);
  auto fail = cli.run({"exec", id, "--", "false"});
  CHECK(fail.exit_code == 1);
  CHECK(fail.err == "failed\n");
  auto cat = cli.run({"exec", id, "--stdin", "--", "cat"}, "from stdin");
  CHECK(cat.out == "from stdin");
  auto bin = cli.run({"exec", id, "--", "binary"});
  CHECK(bin.out == std::string("\xff\xfe\x00\x01", 4));
  auto slow = cli.run({"exec", id, "--timeout", "5", "--", "sleep"});
  CHECK(slow.exit_code == 4);
  CHECK(slow.err.find("timed out") != std::string::npos);
  json j = cli.run_json({"exec", id, "--", "echo", "x"});
  CHECK(j["stdout"] == "x\n");

  auto ssh = cli.run({"ssh", id, "-i", "~/.ssh/id_ed25519", "--dry-run", "--", "uname", "-a"});
  CHECK(ssh.exit_code == 0);
  // The VM's host key, from the lease, checked strictly under the lease's alias in a file of
  // its own.
  const fs::path known_hosts = cli.home / ".cache" / "armhive" / "known_hosts" / id;
  CHECK(ssh.out.rfind("ssh -o HostKeyAlias=armhive-lease-" + id +
                          " -o StrictHostKeyChecking=yes -o UserKnownHostsFile=" +
                          known_hosts.string() + " -o LogLevel=ERROR",
                      0) == 0);
  std::ifstream kh_in(known_hosts);
  std::string kh((std::istreambuf_iterator<char>(kh_in)), std::istreambuf_iterator<char>());
  CHECK(kh == "armhive-lease-" + id + " " + kFakeHostKey + "\n");
  CHECK(ssh.out.find("-i " + (cli.home / ".ssh" / "id_ed25519").string()) != std::string::npos);
  CHECK(ssh.out.find(" armhive@192.168.122.") != std::string::npos);
  CHECK(ssh.out.find(" -- uname -a") != std::string::npos);

  auto console = cli.run({"console", id});
  CHECK(console.out.find("Booting Linux") != std::string::npos);
}

TEST_CASE("cli: ssh to a ready VM armhived cannot reach says what to use instead", "[cli]") {
  // armhived leaves out the ssh block of a VM behind a remote host's own network.
  ApiFixture f(true, [](HttpOptions& o) {
    o.lease_view = [](const Lease&, LeaseDto& dto) {
      dto.ssh.reset();
      return Status::ok();
    };
  });
  TempHome home("armhive-cli-unreachable");
  Cli cli{f, f.ci_b, home.path};
  std::string id = cli.run({"lease", "create", "--pool", "tiny"}).out;
  id.pop_back();
  auto ssh = cli.run({"ssh", id, "--dry-run"});
  CHECK(ssh.exit_code == 2);
  CHECK(ssh.out.empty());
  CHECK(ssh.err.find("offers no SSH") != std::string::npos);
  CHECK(ssh.err.find("armhive exec " + id + " -- CMD") != std::string::npos);
  CHECK(cli.run({"exec", id, "--", "echo", "x"}).out == "x\n");  // the agent still works
  CHECK(cli.run({"lease", "show", id}).out.find("SSH:      none through armhived") !=
        std::string::npos);
}

TEST_CASE("cli: ssh waits for a provisioning lease to be ready with its host keys", "[cli][ssh]") {
  ApiFixture f;
  TempHome home("armhive-cli-ssh-wait");
  Cli cli{f, f.ci_b, home.path};
  std::string id = cli.run({"lease", "create", "--pool", "slow"}).out;
  id.pop_back();
  // Ready only once the CLI is waiting for it (it long-polls the server).
  std::thread later([&] {
    for (int i = 0; i < 30000 && f.leases.waits() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    f.leases.make_ready(id);
  });
  auto ssh = cli.run({"ssh", id, "-i", "~/.ssh/id_ed25519", "--dry-run", "--wait", "60"});
  later.join();
  INFO(ssh.err);
  CHECK(ssh.exit_code == 0);
  CHECK(ssh.err.find("waiting up to 60 s for lease " + id +
                     " to be ready with its VM's SSH host keys (pending)") != std::string::npos);
  CHECK(ssh.out.find("StrictHostKeyChecking=yes") != std::string::npos);
  CHECK(ssh.out.find("HostKeyAlias=armhive-lease-" + id) != std::string::npos);
}

TEST_CASE("cli: ssh to a lease that stays pending gives up after --wait, saying so", "[cli][ssh]") {
  ApiFixture f;
  TempHome home("armhive-cli-ssh-pending");
  Cli cli{f, f.ci_b, home.path};
  std::string id = cli.run({"lease", "create", "--pool", "slow"}).out;
  id.pop_back();
  auto ssh = cli.run({"ssh", id, "--dry-run", "--wait", "1"});
  CHECK(ssh.exit_code == 4);
  CHECK(ssh.out.empty());
  CHECK(ssh.err.find("is pending, not ready for ssh (still waiting after 1 s") !=
        std::string::npos);
}

TEST_CASE("cli: ssh without known host keys refuses, unless asked to trust on first use",
          "[cli][ssh]") {
  // A server that hands out a ready lease before it knows its VM's host keys.
  ApiFixture f(true, [](HttpOptions& o) {
    o.lease_view = [](const Lease&, LeaseDto& dto) {
      if (dto.ssh) {
        dto.ssh->host_keys.clear();
        dto.ssh->known_hosts.clear();
      }
      return Status::ok();
    };
  });
  TempHome home("armhive-cli-ssh-nokeys");
  Cli cli{f, f.ci_b, home.path};
  std::string id = cli.run({"lease", "create", "--pool", "tiny"}).out;
  id.pop_back();
  auto refused = cli.run({"ssh", id, "-i", "~/.ssh/id_ed25519", "--dry-run", "--wait", "1"});
  CHECK(refused.exit_code == 3);
  CHECK(refused.out.empty());
  CHECK(refused.err.find("waiting up to 1 s for lease " + id) != std::string::npos);
  CHECK(refused.err.find("does not know the host keys of lease " + id +
                         "'s VM after waiting 1 s") != std::string::npos);
  CHECK(refused.err.find("--accept-new-host-key") != std::string::npos);

  auto tofu = cli.run(
      {"ssh", id, "-i", "~/.ssh/id_ed25519", "--dry-run", "--wait", "0", "--accept-new-host-key"});
  CHECK(tofu.exit_code == 0);
  CHECK(tofu.err.find("trusting the one it shows now") != std::string::npos);
  CHECK(tofu.out.rfind("ssh -o HostKeyAlias=armhive-lease-" + id +
                           " -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=",
                       0) == 0);
  CHECK(tofu.out.find("StrictHostKeyChecking=no") == std::string::npos);
}

TEST_CASE("cli: hosts drain, maintenance and undrain", "[cli][drain]") {
  ApiFixture f;
  TempHome home("armhive-cli-drain");
  Cli admin{f, f.admin, home.path};
  Cli ci{f, f.ci_b, home.path};

  auto refused = ci.run({"hosts", "drain", "honeycomb"});
  CHECK(refused.exit_code == 2);  // the API refused
  CHECK(refused.err.find("only an admin token may drain a host") != std::string::npos);
  auto unknown = admin.run({"hosts", "drain", "tx1"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("no host named 'tx1'") != std::string::npos);
  CHECK(unknown.err.find("`armhive hosts` lists the hosts") != std::string::npos);
  CHECK(admin.run({"hosts", "drain"}).exit_code != 0);  // NAME is required
  auto empty = admin.run({"hosts", "drain", ""});       // and not empty (no "/v1/hosts//drain")
  CHECK(empty.exit_code != 0);
  CHECK(empty.err.find("give the host's name") != std::string::npos);

  auto drained = admin.run({"hosts", "drain", "honeycomb"});
  INFO(drained.err);
  CHECK(drained.exit_code == 0);
  CHECK(drained.out.find("honeycomb: draining: takes no new VMs") != std::string::npos);
  CHECK(drained.out.find("armhive hosts undrain honeycomb") != std::string::npos);
  CHECK(ci.run({"hosts"}).out.find("honeycomb (aarch64, cortex-a72, kvm, draining)") !=
        std::string::npos);
  CHECK(admin.run_json({"hosts", "maintenance", "honeycomb"})["state"] == "maintenance");

  auto undrained = admin.run({"hosts", "undrain", "honeycomb"});
  CHECK(undrained.exit_code == 0);
  CHECK(undrained.out.find("honeycomb: takes new VMs again") != std::string::npos);
  CHECK(ci.run({"hosts"}).out.find("honeycomb (aarch64, cortex-a72, kvm):") != std::string::npos);
}

TEST_CASE("cli: hosts add and rm", "[cli][hosts]") {
  ApiFixture f(ApiFixture::WithHostAdmin{});
  TempHome home("armhive-cli-hosts");
  Cli admin{f, f.admin, home.path};

  auto ok = admin.run({"hosts", "add", "tx1", "--uri", "qemu+ssh://armhive@tx1.lab/system",
                       "--label", "board=thunderx", "--dedicated", "2-47", "--l2-cluster", "0-1",
                       "--l2-cluster", "2-3", "--network-guard", "host"});
  INFO(ok.err);
  CHECK(ok.exit_code == 0);
  CHECK(ok.err.find("connecting armhived to tx1 (qemu+ssh://armhive@tx1.lab/system)") !=
        std::string::npos);
  CHECK(ok.out.find("tx1: driven (aarch64") != std::string::npos);
  const std::vector<HostSpec> added = f.host_admin->added();
  REQUIRE(added.size() == 1);
  CHECK(added[0].labels.at("board") == "thunderx");
  CHECK(added[0].dedicated_cpus == std::optional<std::string>("2-47"));
  CHECK(added[0].l2_clusters == std::vector<std::string>{"0-1", "2-3"});
  auto listed = admin.run({"hosts"});
  CHECK(listed.out.find("libvirt qemu+ssh://armhive@tx1.lab/system, labels board=thunderx") !=
        std::string::npos);

  auto bad_label = admin.run({"hosts", "add", "tx2", "--uri", "qemu:///system", "--label", "x"});
  CHECK(bad_label.exit_code == 1);
  CHECK(bad_label.err.find("--label takes KEY=VALUE") != std::string::npos);
  auto down = admin.run({"hosts", "add", "hc9", "--uri", "qemu+tls://unreachable/system"});
  CHECK(down.exit_code == 3);  // 503: try again once armhived can reach it
  CHECK(down.err.find("host hc9 not added") != std::string::npos);
  CHECK(down.err.find("Name or service not known") != std::string::npos);
  CHECK(down.err.find("hint: armhived must reach the host's libvirtd") != std::string::npos);
  CHECK(f.host_admin->added().size() == 1);

  auto busy = admin.run({"hosts", "rm", "busy"});
  CHECK(busy.exit_code == 2);
  CHECK(busy.err.find("drain it first") != std::string::npos);
  CHECK(busy.err.find("hint: armhive hosts drain busy") != std::string::npos);
  auto removed = admin.run({"hosts", "rm", "tx1"});
  CHECK(removed.exit_code == 0);
  CHECK(removed.out == "tx1: removed; armhived no longer drives it\n");
  CHECK(admin.run({"hosts"}).out.find("tx1") == std::string::npos);
}

TEST_CASE("cli: hosts lists a host never reached with libvirt's error and no core table",
          "[cli][hosts]") {
  ApiFixture f(true, [](HttpOptions& o) {
    o.waiting_hosts = [] {
      HostView v;  // as HostRegistry::view_of makes it
      v.topology.hostname = "tx9";
      v.uri = "qemu+tls://tx9.lab/system";
      v.state = HostState::kUnreachable;
      v.last_error = "host tx9 (qemu+tls://tx9.lab/system): Connection refused";
      v.unreachable_since = std::chrono::system_clock::now();
      return std::vector<HostView>{v};
    };
  });
  TempHome home("armhive-cli-waiting");
  Cli ci{f, f.ci_b, home.path};
  auto listed = ci.run({"hosts"});
  INFO(listed.out << listed.err);
  CHECK(listed.exit_code == 0);
  const size_t at = listed.out.find("tx9 (unreachable): never reached, CPUs not known yet\n");
  REQUIRE(at != std::string::npos);
  const std::string tx9 = listed.out.substr(at);
  CHECK(tx9.find("  libvirt qemu+tls://tx9.lab/system\n") != std::string::npos);
  CHECK(tx9.find("armhived keeps trying it and places VMs on it once it answers") !=
        std::string::npos);
  CHECK(tx9.find("  last error: host tx9 (qemu+tls://tx9.lab/system): Connection refused\n") !=
        std::string::npos);
  CHECK(tx9.find("CPU  NODE") == std::string::npos);  // no empty core table
  // The driven host is listed as before, with its table.
  CHECK(listed.out.find("honeycomb (aarch64, cortex-a72, kvm):") != std::string::npos);
}

TEST_CASE("cli: pools, hosts, events, bench and completion", "[cli]") {
  ApiFixture f;
  TempHome home("armhive-cli-7");
  Cli cli{f, f.ci_b, home.path};
  std::string id = cli.run({"lease", "create", "--pool", "tiny"}).out;
  id.pop_back();

  auto pools = cli.run({"pools"});
  CHECK(pools.out.find("POOL") == 0);
  CHECK(pools.out.find("tiny") != std::string::npos);
  CHECK(cli.run_json({"pools"}).size() == 2);

  auto hosts = cli.run({"hosts", "--svg", (cli.home / "map.svg").string()});
  INFO(hosts.err);
  CHECK(hosts.exit_code == 0);
  CHECK(hosts.out.find("honeycomb (aarch64, cortex-a72, kvm)") != std::string::npos);
  CHECK(hosts.out.find(id) != std::string::npos);
  CHECK(hosts.out.find("last error") == std::string::npos);
  // A degraded host says so, with the failure, rather than claiming to be disconnected.
  f.leases.set_host_state(HostState::kDegraded, "virDomainCreateXML: no space left on device");
  auto degraded = cli.run({"hosts"});
  CHECK(degraded.out.find("honeycomb (aarch64, cortex-a72, kvm, degraded)") != std::string::npos);
  CHECK(degraded.out.find("last error: virDomainCreateXML: no space left on device") !=
        std::string::npos);
  CHECK(degraded.out.find("DISCONNECTED") == std::string::npos);
  std::ifstream svg(cli.home / "map.svg");
  std::string svg_text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  CHECK(svg_text.find("<svg") != std::string::npos);

  auto events = cli.run({"--json", "events", "--no-follow"});
  CHECK(events.exit_code == 0);
  int lines = 0;
  std::istringstream in(events.out);
  for (std::string line; std::getline(in, line);) {
    CHECK(json::parse(line)["lease_id"] == id);
    ++lines;
  }
  CHECK(lines == 2);

  json run = cli.run_json({"bench", id, "--suite", "compression"});
  std::string a = run["id"];
  std::string b = cli.run_json({"bench", id})["id"];
  auto waited = cli.run({"bench", id, "--wait"});
  CHECK(waited.exit_code == 0);
  CHECK(waited.err.find("succeeded") != std::string::npos);
  auto show = cli.run({"bench", "show", a});
  CHECK(show.out.find("State:    succeeded") != std::string::npos);
  json shown = cli.run_json({"bench", "show", a});
  CHECK(shown["state"] == "succeeded");
  CHECK(shown["request"]["suites"] == json::array({"compression"}));
  CHECK(shown["report"].is_object());
  CHECK(cli.run_json({"bench", "ls"}).size() == 3);
  auto report = cli.run({"bench", "report", a, "-o", (cli.home / "r.html").string()});
  CHECK(report.exit_code == 0);
  CHECK(fs::exists(cli.home / "r.html"));
  auto cmp = cli.run({"bench", "compare", a, b, "-o", (cli.home / "cmp.html").string()});
  INFO(cmp.err);
  CHECK(cmp.exit_code == 0);
  CHECK(cmp.out.find("zstd -3 compress MB/s (1 thread)") != std::string::npos);
  CHECK(cmp.out.find("1.50x") != std::string::npos);
  CHECK(fs::exists(cli.home / "cmp.html"));
  CHECK(cli.run({"bench", "show", "b-nope"}).exit_code == 2);

  auto completion = cli.run({"completion", "bash"});
  CHECK(completion.exit_code == 0);
  CHECK(completion.out.find("complete -F _armhive armhive") != std::string::npos);
  // Every command `armhive --help` lists is completed at the first word.
  auto help = cli.run({"--help"});
  const auto top_start = completion.out.find("local top=\"");
  REQUIRE(top_start != std::string::npos);
  const std::string top = completion.out.substr(
      top_start + 11, completion.out.find('"', top_start + 11) - (top_start + 11));
  for (const char* command : {"lease", "ssh", "cp", "gitlab", "github", "pools", "completion"}) {
    INFO(command);
    CHECK(help.out.find(std::string("  ") + command) != std::string::npos);
    CHECK((" " + top + " ").find(std::string(" ") + command + " ") != std::string::npos);
  }
}

TEST_CASE("cli: github shows the provider's state or says GitHub is not configured",
          "[cli][github]") {
  ApiFixture f(true, [](HttpOptions& o) {
    o.github_state = [] {
      GithubStateDto g;
      g.last_reconcile = "2026-01-02T03:04:05.000Z";
      g.last_reconcile_error = "GitHub list runners: HTTP 502";
      g.pending_jobs = 2;
      g.runners = 3;
      g.rate_limit_remaining = 4999;
      g.rate_limit_reset = "2026-01-02T04:00:00.000Z";
      g.backoff_until = "2026-01-02T03:10:00.000Z";
      g.reconciled_jobs_total = 5;
      g.ghosts_deleted_total = 1;
      g.rate_limited_total = 7;
      return g;
    };
  });
  TempHome home("armhive-cli-github");
  Cli cli{f, f.admin, home.path};
  auto human = cli.run({"github"});
  INFO(human.err);
  REQUIRE(human.exit_code == 0);
  CHECK(human.out.find("Last reconcile:  2026-01-02T03:04:05.000Z (") == 0);
  CHECK(human.out.find("), failed: GitHub list runners: HTTP 502\n") != std::string::npos);
  CHECK(human.out.find("\nPending jobs:    2 ") != std::string::npos);
  CHECK(human.out.find("\nRunners:         3\n") != std::string::npos);
  CHECK(human.out.find("\nRate limit:      4999 remaining, resets 2026-01-02T04:00:00.000Z (") !=
        std::string::npos);
  CHECK(human.out.find("\nBackoff:         until 2026-01-02T03:10:00.000Z (") != std::string::npos);
  CHECK(human.out.find("5 jobs reconciled, 1 ghost runner deleted, 0 runners forgotten, "
                       "7 rate-limited replies\n") != std::string::npos);

  json j = cli.run_json({"github"});
  CHECK(j["last_reconcile"] == "2026-01-02T03:04:05.000Z");
  CHECK(j["last_reconcile_error"] == "GitHub list runners: HTTP 502");
  CHECK(j["pending_jobs"] == 2);
  CHECK(j["runners"] == 3);
  CHECK(j["rate_limit_remaining"] == 4999);
  CHECK(j["backoff_until"] == "2026-01-02T03:10:00.000Z");
  CHECK(j["rate_limited_total"] == 7);

  // Not an admin: refused, saying which token would do.
  Cli ci{f, f.ci_b, home.path};
  auto refused = ci.run({"github"});
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("only admin tokens") != std::string::npos);
  CHECK(refused.err.find("--role admin") != std::string::npos);

  // A daemon without [github]: 404, said plainly (also with --json, nothing on stdout).
  ApiFixture plain;
  Cli none{plain, plain.admin, home.path};
  for (const auto& args :
       {std::vector<std::string>{"github"}, std::vector<std::string>{"--json", "github"}}) {
    auto r = none.run(args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("GitHub is not configured on " + plain.url()) != std::string::npos);
    CHECK(r.err.find("[github]") != std::string::npos);
    CHECK(r.err.find("armhive lease ls") == std::string::npos);  // no lease hint
  }
}

TEST_CASE("cli: github before the first pass says so rather than showing empty values",
          "[cli][github]") {
  ApiFixture f(true, [](HttpOptions& o) { o.github_state = [] { return GithubStateDto{}; }; });
  TempHome home("armhive-cli-github-fresh");
  Cli cli{f, f.admin, home.path};
  auto human = cli.run({"github"});
  INFO(human.err);
  REQUIRE(human.exit_code == 0);
  CHECK(human.out.find("Last reconcile:  none yet\n") == 0);
  CHECK(human.out.find("\nRate limit:      not known yet") != std::string::npos);
  CHECK(human.out.find("\nBackoff:         none\n") != std::string::npos);
  json j = cli.run_json({"github"});
  CHECK_FALSE(j.contains("last_reconcile"));
  CHECK_FALSE(j.contains("rate_limit_remaining"));
}

TEST_CASE("cli: usage reports what leases used, lease show has their usage lines", "[cli][usage]") {
  ApiFixture f;
  TempHome home("armhive-cli-usage");
  Cli cli{f, f.ci_b, home.path};
  json a = cli.run_json({"lease", "create", "--pool", "tiny", "--label", "team=a,b"});
  json b = cli.run_json({"lease", "create", "--pool", "tiny"});
  const std::string id_a = a["id"], id_b = b["id"];
  Lease fake_clock = f.leases.get_lease(id_a).value();
  LeaseUsage u;
  u.cpu_ns = 42'000'000'000ULL;
  u.peak_rss_bytes = 200ULL << 20;
  u.disk_write_bytes = 1ULL << 30;
  u.net_rx_bytes = 3000;
  u.net_tx_bytes = 1000;
  u.started_at = fake_clock.created_at;
  u.sampled_at = fake_clock.created_at + std::chrono::seconds(60);
  u.final = true;
  REQUIRE(f.leases.set_usage(id_a, u));
  u.final = false;
  u.cpu_ns = 6'000'000'000ULL;
  REQUIRE(f.leases.set_usage(id_b, u));

  auto show = cli.run({"lease", "show", id_a});
  INFO(show.out);
  CHECK(show.exit_code == 0);
  CHECK(show.out.find("Usage:    CPU 42.0 s over 1m (0.70 CPUs), peak memory 200.0 MiB (final)\n"
                      "          disk written 1.0 GiB, network in 2.9 KiB, out 1000 B\n") !=
        std::string::npos);
  CHECK(cli.run_json({"lease", "show", id_a})["usage"]["cpu_seconds"] == 42);

  // The fake's leases were made in September 2026.
  const std::vector<std::string> window = {"--since", "2026-09-01T00:00:00Z", "--until",
                                           "2026-10-01T00:00:00Z"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), window.begin(), window.end());
    return args;
  };
  auto table = cli.run(with({"usage"}));
  INFO(table.out << table.err);
  CHECK(table.exit_code == 0);
  CHECK(table.out.find("Leases created from 2026-09-01T00:00:00.000Z to "
                       "2026-10-01T00:00:00.000Z, by owner:\n") == 0);
  CHECK(table.out.find("OWNER  LEASES  CPU     WALL  CPUS  PEAK MEM   DISK WRITTEN") !=
        std::string::npos);
  CHECK(table.out.find("ci-b   2       48.0 s  2m    0.40  200.0 MiB  2.0 GiB") !=
        std::string::npos);

  json report = cli.run_json(with({"usage", "--group-by", "label", "--label", "team"}));
  CHECK(report["group_by"] == "label");
  REQUIRE(report["rows"].size() == 2);
  CHECK(report["rows"][0]["group"] == "");
  CHECK(report["rows"][1]["group"] == "a,b");
  CHECK(report["rows"][1]["cpu_seconds"] == 42);

  auto csv = cli.run(with({"usage", "--group-by", "label", "--label", "team", "--csv"}));
  CHECK(csv.exit_code == 0);
  CHECK(csv.out ==
        "label:team,leases,cpu_seconds,wall_seconds,peak_memory_bytes,disk_write_bytes,"
        "net_rx_bytes,net_tx_bytes\r\n"
        ",1,6.000,60.000,209715200,1073741824,3000,1000\r\n"
        "\"a,b\",1,42.000,60.000,209715200,1073741824,3000,1000\r\n");

  // Another token sees none of ci-b's leases; bad flags are usage errors (1) naming the flag,
  // what only the server can judge is its 400 (2).
  Cli other{f, f.ci_a, home.path};
  CHECK(other.run_json(with({"usage"}))["rows"].empty());
  auto bad_since = cli.run({"usage", "--since", "last week"});
  CHECK(bad_since.exit_code == 1);
  CHECK(bad_since.err.find("--since") != std::string::npos);
  CHECK(cli.run({"usage", "--group-by", "team"}).exit_code == 1);
  auto no_key = cli.run({"usage", "--group-by", "label"});
  CHECK(no_key.exit_code == 1);
  CHECK(no_key.err.find("--label") != std::string::npos);
  auto bad_key = cli.run({"usage", "--group-by", "label", "--label", "Bad Key"});
  CHECK(bad_key.exit_code == 2);
  CHECK(bad_key.err.find("label") != std::string::npos);
}

}  // namespace
}  // namespace armhive
