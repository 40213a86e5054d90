// End-to-end: access to real guests from an "outside" namespace (the CI runner, the laptop)
// through the host's per-lease forwards, and what a guest may and may not reach, per network
// mode. This process runs in the sandbox's namespace (the host); the outside namespace is made
// and removed by the test.

#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/process_runner.h"
#include "daemon/store/database.h"
#include "daemon/store/token_store.h"
#include "daemon/virt/connection.h"
#include "daemon/virt/error.h"
#include "daemon/virt/network.h"
#include "daemon/virt/network_guard.h"
#include "tests/support/daemon_process.h"
#include "tests/support/e2e_daemon.h"
#include "tests/support/outside_netns.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// One API port per test case: the daemon names its storage pool after it.
constexpr int kNatApiPort = 18490;
constexpr int kIsolatedApiPort = 18491;
constexpr int kExamplesApiPort = 18492;
constexpr int kBridgeApiPort = 18521;
constexpr int kBridgeForwardPort = 18522;
constexpr int kPortMin = 22100;
constexpr int kPortMax = 22104;

// The one pool of these tests: a 1-vCPU tiny guest on `network`.
std::string ci_pool(const std::string& network, int min_warm) {
  return R"(
[[pools]]
name = "ci"
image = "tiny"
vcpus = 1
memory_mib = 384
max = 1
max_starting = 1
default_ttl = "10m"
cpu_policy = "dedicated"
min_warm = )" +
         std::to_string(min_warm) + "\nnetwork = \"" + network + "\"\n";
}

// The daemon's config after DaemonProcess's own (which defines the isolated "armhive"
// network): forwards on the host's outside address, and (for nat) a NAT network of its own.
// `egress`: [[networks.egress]] tables for the nat network.
std::string config(const std::string& network, const std::string& egress = {}) {
  std::string t = R"(
[access]
listen = "10.78.0.1"
port_min = 22100
port_max = 22104

[host.cpus]
housekeeping = "0"
dedicated = "1"

[[networks]]
name = "ahnat"
mode = "nat"
bridge = "ahbr1"
cidr = "10.79.0.1/24"
dhcp_start = "10.79.0.10"
dhcp_end = "10.79.0.50"
)" + egress;
  return t + ci_pool(network, 1);
}

// Starts the daemon listening on every address (the outside's and the bridges' too) and
// returns its admin client.
std::unique_ptr<Client> start_on_every_address(DaemonProcess& daemon) {
  daemon.set_bind("0.0.0.0");
  Status started = daemon.start();
  INFO(daemon.log());
  REQUIRE(started.is_ok());
  auto api = daemon.client();
  REQUIRE(api);
  return api;
}

std::string make_key(const std::string& path) {
  SubprocessRunner run;
  fs::remove(path);
  fs::remove(path + ".pub");
  auto r =
      run.run({.argv = {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "e2e", "-f", path}});
  REQUIRE(r.is_ok());
  REQUIRE(r->ok());
  std::ifstream in(path + ".pub");
  std::string line;
  std::getline(in, line);
  return line;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

// ssh from outside, verifying the host key against `known_hosts` only, looked up under `alias`
// (the lease's ssh.host_key_alias, whose lines ssh.known_hosts holds) when given.
std::vector<std::string> ssh_argv(const std::string& key, const std::string& known_hosts, int port,
                                  const std::string& host, const std::string& cmd,
                                  const std::string& alias = {}) {
  std::vector<std::string> argv{"ssh"};
  if (!alias.empty()) argv.insert(argv.end(), {"-o", "HostKeyAlias=" + alias});
  std::vector<std::string> rest{"-i",           key,
                                "-o",           "IdentitiesOnly=yes",
                                "-o",           "StrictHostKeyChecking=yes",
                                "-o",           "UserKnownHostsFile=" + known_hosts,
                                "-o",           "BatchMode=yes",
                                "-o",           "ConnectTimeout=8",
                                "-o",           "LogLevel=ERROR",
                                "-p",           std::to_string(port),
                                "root@" + host, cmd};
  argv.insert(argv.end(), rest.begin(), rest.end());
  return argv;
}

// A ready lease: its first ready response already names the forward and carries the VM's host
// keys (the engine reads them before the VM is ready).
LeaseDto ready_lease(Client& api, const std::string& pub) {
  LeaseCreateRequest req;
  req.pool = "ci";
  req.ttl_seconds = 600;
  req.ssh_keys = {pub};
  auto created = api.create_lease(req);
  REQUIRE(created.is_ok());
  auto ready = api.wait_lease(created->id, 300s);
  REQUIRE(ready.is_ok());
  REQUIRE(ready->state == "ready");
  REQUIRE(ready->ssh);
  REQUIRE_FALSE(ready->ssh->host_keys.empty());
  REQUIRE(ready->ssh->host_key_alias == "armhive-lease-" + ready->id);
  return *ready;
}

// Runs argv in the guest through the agent.
ExecResultDto guest(Client& api, const std::string& lease, std::vector<std::string> argv) {
  auto r = api.exec(lease, {std::move(argv), "", 60});
  REQUIRE(r.is_ok());
  return *r;
}

// How a TCP connection from the guest to host:port ends (busybox nc, 5 s): "connected",
// "refused" (reached, nothing listening), "timed out" (dropped on the way) or "no route" (on
// the guest's own link: nobody answered its ARP request). Only "timed out" and "no route" show
// a filter at work, so a broken tool cannot pass for a guard.
std::string guest_connect(Client& api, const std::string& lease, const std::string& host,
                          int port) {
  auto r = guest(api, lease,
                 {"sh", "-c", "nc -w 5 \"$0\" \"$1\" </dev/null", host, std::to_string(port)});
  if (r.exit_code == 0) return "connected";
  if (r.err.find("refused") != std::string::npos) return "refused";
  if (r.err.find("timed out") != std::string::npos) return "timed out";
  if (r.err.find("No route to host") != std::string::npos) return "no route";
  return "other: " + r.err;
}

// A connection that a filter stopped, at the host or on the guest's link.
bool dropped(const std::string& how) { return how == "timed out" || how == "no route"; }

// An HTTP/1.0 GET from the guest (busybox nc); the response, or empty.
std::string guest_http_get(Client& api, const std::string& lease, const std::string& host, int port,
                           const std::string& path) {
  auto r =
      guest(api, lease,
            {"sh", "-c", "printf 'GET %s HTTP/1.0\\r\\n\\r\\n' \"$2\" | nc -w 10 \"$0\" \"$1\"",
             host, std::to_string(port), path});
  return r.exit_code == 0 ? r.out : std::string();
}

// What the guest and the host see, for a failure message.
std::string diagnostics(Client& api, const std::string& lease) {
  std::string d = "guest routes: " + guest(api, lease, {"ip", "route"}).out;
  d += "guest addresses: " + guest(api, lease, {"ip", "-4", "addr"}).out;
  SubprocessRunner run;
  for (std::vector<std::string> argv : {std::vector<std::string>{"nft", "list", "ruleset"},
                                        {"sysctl", "net.ipv4.ip_forward"},
                                        {"ip", "route"}}) {
    auto r = run.run({.argv = argv});
    if (r.is_ok()) d += "host " + argv[0] + ": " + r->out + r->err;
  }
  return d;
}

std::vector<AuditEntry> audit(const std::string& state, const std::string& lease) {
  SystemClock clock;
  auto db = Database::open(state + "/armhive.db");
  REQUIRE(db.is_ok());
  auto log = AuditLog::open(**db, clock);
  REQUIRE(log.is_ok());
  auto entries = (*log)->recent(1000, lease);
  REQUIRE(entries.is_ok());
  return *entries;
}

bool has_action(const std::vector<AuditEntry>& entries, const std::string& action,
                const std::string& detail_part) {
  for (const AuditEntry& e : entries) {
    if (e.action == action && e.detail.find(detail_part) != std::string::npos) return true;
  }
  return false;
}

// Removes what the daemon made in the sandbox for `network` (it leaves networks up on exit).
void remove_network_and_guard(const std::string& network) {
  REQUIRE(init_libvirt().is_ok());
  auto conn = Connection::open("qemu:///system");
  REQUIRE(conn.is_ok());
  CHECK(remove_network(*conn, network).is_ok());
  SubprocessRunner run;
  CHECK(remove_network_guard(run, network).is_ok());
  auto tables = run.run({.argv = {"nft", "list", "tables"}});
  REQUIRE(tables.is_ok());
  CHECK(tables->out.find(guard_table_name(network)) == std::string::npos);
}

TEST_CASE(
    "nat: from outside through the forward with verified host keys, guest egress, nothing of the "
    "host reachable from the guest, forwards end with the lease",
    "[access-e2e][nat]") {
  const std::string state = e2e_state() + "/access-nat";
  OutsideNamespace out("armhive-e2e-out", "10.79.0.0/24");
  const int api_port = kNatApiPort;
  DaemonProcess daemon(state, e2e_state() + "/images", api_port, config("ahnat"));
  auto api = start_on_every_address(daemon);

  const std::string key_a = state + "/id_a";
  const std::string key_b = state + "/id_b";
  const std::string pub_a = make_key(key_a);
  const std::string pub_b = make_key(key_b);
  LeaseDto a = ready_lease(*api, pub_a);
  REQUIRE(a.ssh);
  REQUIRE(a.vm);
  CHECK(a.ssh->host == OutsideNamespace::kHostAddress);
  CHECK(a.ssh->port >= kPortMin);
  CHECK(a.ssh->port <= kPortMax);
  CHECK(a.ssh->command.find("StrictHostKeyChecking=no") == std::string::npos);
  const std::string kh_a = state + "/known_hosts_a";
  write(kh_a, a.ssh->known_hosts);

  // From outside: a real OpenSSH login through the forward, host key verified.
  auto login =
      out.run(ssh_argv(key_a, kh_a, a.ssh->port, a.ssh->host, "hostname", a.ssh->host_key_alias));
  INFO(login.err);
  REQUIRE(login.ok());
  CHECK(login.out.find(a.vm->name) != std::string::npos);
  // A host key other than the VM's is refused.
  const std::string kh_wrong = state + "/known_hosts_wrong";
  std::string other = make_key(state + "/not_the_host");
  write(kh_wrong, a.ssh->host_key_alias + " " + other.substr(0, other.rfind(' ')) + "\n");
  CHECK_FALSE(
      out.run(ssh_argv(key_a, kh_wrong, a.ssh->port, a.ssh->host, "true", a.ssh->host_key_alias))
          .ok());
  // A certificate from the API for a key the lease never listed opens A, host key verified;
  // the same key without its certificate does not.
  const std::string cert_key_a = state + "/cert_a";
  auto cert_a = api->ssh_certificate(a.id, make_key(cert_key_a));
  REQUIRE(cert_a.is_ok());
  CHECK(cert_a->principal == "lease-" + a.id);
  CHECK(cert_a->user == "root");
  CHECK(cert_a->valid_before == a.expires_at);
  auto refused_key =
      out.run(ssh_argv(cert_key_a, kh_a, a.ssh->port, a.ssh->host, "true", a.ssh->host_key_alias));
  CHECK_FALSE(refused_key.ok());
  CHECK(refused_key.err.find("Permission denied") != std::string::npos);
  write(cert_key_a + "-cert.pub", cert_a->certificate + "\n");
  auto by_cert = out.run(
      ssh_argv(cert_key_a, kh_a, a.ssh->port, a.ssh->host, "hostname", a.ssh->host_key_alias));
  INFO(by_cert.err);
  CHECK(by_cert.ok());
  CHECK(by_cert.out.find(a.vm->name) != std::string::npos);
  CHECK_FALSE(out.run(ssh_argv(cert_key_a, kh_wrong, a.ssh->port, a.ssh->host, "true",
                               a.ssh->host_key_alias))
                  .ok());
  auto malformed = api->ssh_certificate(a.id, "ssh-ed25519 AAAA");
  REQUIRE_FALSE(malformed.is_ok());
  CHECK(malformed.status().field() == "public_key");

  // The guest's own address is not reachable from outside (routed via the host, not forwarded).
  CHECK_FALSE(
      out.run(ssh_argv(key_a, kh_a, 22, a.vm->address, "true", a.ssh->host_key_alias)).ok());
  // The API is reachable from outside (it listens on every address)...
  const std::string api_url = "http://10.78.0.1:" + std::to_string(api_port) + "/healthz";
  CHECK(out.run({"curl", "-sf", "--max-time", "5", api_url}).ok());

  // ...but not from the guest, at any host address (dropped, not refused); nor libvirtd's, the
  // forwards' or sshd's ports.
  CHECK(guest_connect(*api, a.id, "10.78.0.1", api_port) == "timed out");
  CHECK(guest_connect(*api, a.id, "10.79.0.1", api_port) == "timed out");
  CHECK(guest_connect(*api, a.id, "10.79.0.1", 16509) == "timed out");
  CHECK(guest_connect(*api, a.id, "10.78.0.1", a.ssh->port) == "timed out");
  CHECK(guest_connect(*api, a.id, "10.79.0.1", 22) == "timed out");
  // nat: the guest fetches a file from a server in the outside namespace.
  fs::create_directories(state + "/www");
  write(state + "/www/hello.txt", "hello from outside\n");
  pid_t www = out.spawn({"python3", "-m", "http.server", "8000", "--bind",
                         OutsideNamespace::kOutsideAddress, "--directory", state + "/www"},
                        state + "/www.log");
  REQUIRE(eventually(
      [&] {
        return out.run({"curl", "-sf", "http://10.78.0.2:8000/hello.txt"}).ok();
      },
      30s));
  std::string fetched = guest_http_get(*api, a.id, "10.78.0.2", 8000, "/hello.txt");
  if (fetched.find("\r\n\r\nhello from outside\n") == std::string::npos) {
    std::string diag = diagnostics(*api, a.id);
    write(state + "/diagnostics.txt", diag);
    FAIL_CHECK("the guest could not fetch from outside; see " + state + "/diagnostics.txt");
  }
  // A closed port outside is refused: "timed out" above is the host's guard at work.
  CHECK(guest_connect(*api, a.id, "10.78.0.2", 8001) == "refused");
  out.kill(www);

  // An open session is cut when the lease is released; the forward then refuses.
  pid_t session = out.spawn(ssh_argv(key_a, kh_a, a.ssh->port, a.ssh->host,
                                     "echo started; sleep 600", a.ssh->host_key_alias),
                            state + "/session.log");
  REQUIRE(eventually(
      [&] {
        std::ifstream in(state + "/session.log");
        std::string s((std::istreambuf_iterator<char>(in)), {});
        return s.find("started") != std::string::npos;
      },
      60s));
  REQUIRE(api->release_lease(a.id).is_ok());
  CHECK(eventually([&] { return out.exited(session); }, 60s));
  auto after =
      out.run(ssh_argv(key_a, kh_a, a.ssh->port, a.ssh->host, "true", a.ssh->host_key_alias));
  CHECK_FALSE(after.ok());
  CHECK(after.err.find("refused") != std::string::npos);

  auto entries = audit(state, a.id);
  CHECK(has_action(entries, "forward.opened", "10.78.0.1:" + std::to_string(a.ssh->port)));
  CHECK(has_action(entries, "forward.connection", "from 10.78.0.2:"));
  CHECK(has_action(entries, "forward.closed", std::to_string(a.ssh->port)));
  CHECK(has_action(entries, "ssh.certificate", "principal=lease-" + a.id));

  // The pool's next VM (lease B) opens with B's key only: A's key never opens it.
  LeaseDto b = ready_lease(*api, pub_b);
  REQUIRE(b.ssh);
  CHECK(b.vm->name != a.vm->name);
  const std::string kh_b = state + "/known_hosts_b";
  write(kh_b, b.ssh->known_hosts);
  auto with_a =
      out.run(ssh_argv(key_a, kh_b, b.ssh->port, b.ssh->host, "true", b.ssh->host_key_alias));
  CHECK_FALSE(with_a.ok());
  CHECK(with_a.err.find("Permission denied") != std::string::npos);
  CHECK(
      out.run(ssh_argv(key_b, kh_b, b.ssh->port, b.ssh->host, "true", b.ssh->host_key_alias)).ok());
  // Nor does A's certificate, still within its validity: B's VM trusts the CA for B only.
  auto cert_on_b =
      out.run(ssh_argv(cert_key_a, kh_b, b.ssh->port, b.ssh->host, "true", b.ssh->host_key_alias));
  CHECK_FALSE(cert_on_b.ok());
  CHECK(cert_on_b.err.find("Permission denied") != std::string::npos);

  // `armhive ssh` from outside: a fresh key, a certificate for B, B's host keys verified.
  const std::string server = "http://10.78.0.1:" + std::to_string(api_port);
  fs::create_directories(state + "/home");
  auto cli =
      out.run({"env", "HOME=" + state + "/home", "ARMHIVE_SERVER=" + server,
               "ARMHIVE_TOKEN=" + daemon.token(), ARMHIVE_CLI_PATH, "ssh", b.id, "--", "hostname"});
  INFO(cli.err);
  CHECK(cli.ok());
  CHECK(cli.out.find(b.vm->name) != std::string::npos);

  // Through the API tunnel only: from outside with the access range blocked (only the API port
  // reachable), `armhive ssh --tunnel` logs in with a certificate and verifies B's host keys.
  for (std::vector<std::string> argv :
       {std::vector<std::string>{"nft", "add", "table", "inet", "e2e_api_only"},
        {"nft", "add", "chain", "inet", "e2e_api_only", "out",
         "{ type filter hook output priority 0 ; }"},
        {"nft", "add", "rule", "inet", "e2e_api_only", "out", "ip", "daddr",
         OutsideNamespace::kHostAddress, "tcp", "dport",
         std::to_string(kPortMin) + "-" + std::to_string(kPortMax), "drop"}}) {
    auto r = out.run(argv);
    INFO(r.err);
    REQUIRE(r.ok());
  }
  CHECK_FALSE(
      out.run(ssh_argv(key_b, kh_b, b.ssh->port, b.ssh->host, "true", b.ssh->host_key_alias)).ok());
  const std::vector<std::string> env_b = {"env", "HOME=" + state + "/home",
                                          "ARMHIVE_SERVER=" + server,
                                          "ARMHIVE_TOKEN=" + daemon.token()};
  auto with_env = [](std::vector<std::string> env, const std::vector<std::string>& argv) {
    env.insert(env.end(), argv.begin(), argv.end());
    return env;
  };
  auto tunneled =
      out.run(with_env(env_b, {ARMHIVE_CLI_PATH, "ssh", b.id, "--tunnel", "--", "hostname"}));
  INFO(tunneled.err);
  CHECK(tunneled.ok());
  CHECK(tunneled.out.find(b.vm->name) != std::string::npos);
  // The plain ssh a user would write with the tunnel as ProxyCommand: the right host keys are
  // taken, another key is refused.
  const std::string proxy = std::string(ARMHIVE_CLI_PATH) + " tunnel " + b.id + " 22";
  auto via_proxy = [&](const std::string& known_hosts) {
    std::vector<std::string> argv = ssh_argv(key_b, known_hosts, 22, "vm-b", "hostname");
    argv.insert(argv.begin() + 1, {"-o", "ProxyCommand=" + proxy, "-o", "HostKeyAlias=vm-b"});
    return out.run(with_env(env_b, argv));
  };
  std::string alias_lines;
  for (const auto& k : b.ssh->host_keys) alias_lines += "vm-b " + k + "\n";
  write(state + "/known_hosts_alias", alias_lines);
  write(state + "/known_hosts_alias_wrong", "vm-b " + other.substr(0, other.rfind(' ')) + "\n");
  auto proxied = via_proxy(state + "/known_hosts_alias");
  INFO(proxied.err);
  CHECK(proxied.ok());
  CHECK(proxied.out.find(b.vm->name) != std::string::npos);
  auto spoofed = via_proxy(state + "/known_hosts_alias_wrong");
  CHECK_FALSE(spoofed.ok());
  CHECK(spoofed.err.find("Host key verification failed") != std::string::npos);
  // Another token cannot open B's tunnel (404: it does not see the lease).
  std::string other_token;
  {
    SystemClock clock;
    auto db = Database::open(state + "/armhive.db");
    REQUIRE(db.is_ok());
    auto tokens = TokenStore::open(**db, clock);
    REQUIRE(tokens.is_ok());
    auto made = (*tokens)->create({.name = "someone-else"});
    REQUIRE(made.is_ok());
    other_token = *made;
  }
  auto stranger = out.run({"env", "ARMHIVE_SERVER=" + server, "ARMHIVE_TOKEN=" + other_token,
                           ARMHIVE_CLI_PATH, "tunnel", b.id, "22"});
  CHECK_FALSE(stranger.ok());
  CHECK(stranger.err.find("no lease") != std::string::npos);
  // A tunnel session held open, to be cut at expiry below (its own HOME: its own key).
  fs::create_directories(state + "/home_t");
  pid_t held_tunnel = out.spawn({"env", "HOME=" + state + "/home_t", "ARMHIVE_SERVER=" + server,
                                 "ARMHIVE_TOKEN=" + daemon.token(), ARMHIVE_CLI_PATH, "ssh", b.id,
                                 "--tunnel", "--", "echo started; sleep 600"},
                                state + "/session_t.log");
  REQUIRE(eventually(
      [&] {
        std::ifstream in(state + "/session_t.log");
        std::string s((std::istreambuf_iterator<char>(in)), {});
        return s.find("started") != std::string::npos;
      },
      60s));
  // The forwards are reachable again for what follows; the tunnel session stays open.
  REQUIRE(out.run({"nft", "delete", "table", "inet", "e2e_api_only"}).ok());

  // At expiry an open session (with a certificate) is cut.
  const std::string cert_key_b = state + "/cert_b";
  auto cert_b = api->ssh_certificate(b.id, make_key(cert_key_b));
  REQUIRE(cert_b.is_ok());
  write(cert_key_b + "-cert.pub", cert_b->certificate + "\n");
  pid_t held = out.spawn(ssh_argv(cert_key_b, kh_b, b.ssh->port, b.ssh->host,
                                  "echo started; sleep 600", b.ssh->host_key_alias),
                         state + "/session_b.log");
  REQUIRE(eventually(
      [&] {
        std::ifstream in(state + "/session_b.log");
        std::string s((std::istreambuf_iterator<char>(in)), {});
        return s.find("started") != std::string::npos;
      },
      60s));
  // Both sessions are up: the lease ends 20 s from now (a shorter wait than a minute's, issue 30).
  REQUIRE(api->renew_lease(b.id, 20).is_ok());
  CHECK(eventually([&] { return out.exited(held); }, 240s));
  CHECK(eventually([&] { return out.exited(held_tunnel); }, 60s));
  CHECK(eventually(
      [&] {
        auto g = api->get_lease(b.id);
        return g.is_ok() && g->state == "expired";
      },
      60s));
  // After the lease ended its tunnel is refused (the refusal's wording for a lease that is not
  // ready is checked by tests/daemon/http/tunnel_itest.cc).
  auto late = out.run(with_env(env_b, {ARMHIVE_CLI_PATH, "tunnel", b.id, "22"}));
  INFO("armhive tunnel after expiry: " << late.err);
  CHECK_FALSE(late.ok());
  auto entries_b = audit(state, b.id);
  CHECK(has_action(entries_b, "tunnel.opened", "from 10.78.0.2 to "));
  CHECK(has_action(entries_b, "tunnel.closed", "bytes_from_guest="));
  CHECK(has_action(entries_b, "tunnel.closed", "(lease ended)"));

  daemon.kill(SIGTERM);
  remove_network_and_guard("ahnat");
}

// The host's neighbour entry for `address` on the isolated network: its MAC, or empty.
std::string host_neighbour(const std::string& address) {
  SubprocessRunner run;
  auto r = run.run({.argv = {"ip", "neigh", "show", address}});
  REQUIRE(r.is_ok());
  size_t at = r->out.find("lladdr ");
  return at == std::string::npos ? std::string() : r->out.substr(at + 7, 17);
}

// Sets net.bridge.bridge-nf-call-iptables to 0 in this namespace for its lifetime (when the
// kernel has br_netfilter at all), and back to what it was.
class BridgeNetfilterOff {
 public:
  BridgeNetfilterOff() {
    std::ifstream in(kPath);
    if (in >> was_) set("0");
  }
  ~BridgeNetfilterOff() {
    if (!was_.empty()) set(was_);
  }
  BridgeNetfilterOff(const BridgeNetfilterOff&) = delete;
  BridgeNetfilterOff& operator=(const BridgeNetfilterOff&) = delete;

 private:
  static constexpr const char* kPath = "/proc/sys/net/bridge/bridge-nf-call-iptables";
  static void set(const std::string& value) {
    std::ofstream out(kPath);
    out << value << "\n";
  }
  std::string was_;
};

TEST_CASE(
    "isolated: the forward works, but the guest reaches neither outside, the host, nor its "
    "neighbour, whatever MAC or address it claims",
    "[access-e2e][isolated]") {
  const std::string state = e2e_state() + "/access-isolated";
  OutsideNamespace out("armhive-e2e-out", "10.77.0.0/24");
  const int api_port = kIsolatedApiPort;
  // Two guests side by side on the one shared core: neighbours on the isolated network. The
  // guard is checked every 2 s so that a removed guard comes back within the test.
  DaemonProcess daemon(state, e2e_state() + "/images", api_port, R"(
[access]
listen = "10.78.0.1"
port_min = 22100
port_max = 22104

[host.cpus]
housekeeping = "0"
shared = "1"

[[pools]]
name = "ci"
image = "tiny"
vcpus = 1
memory_mib = 384
max = 2
max_starting = 2
min_warm = 2
default_ttl = "10m"
cpu_policy = "shared"
overcommit = 2.0
network = "armhive"
)");
  daemon.set_engine_keys("guard_check_period = \"2s\"\n");
  // A host without br_netfilter (Debian's default) switches frames between guests at layer 2
  // without nftables ever seeing them; this machine's kernel has it, so the sandbox turns it
  // off for its bridges (a per-namespace setting) to be such a host.
  BridgeNetfilterOff layer2_only;
  auto api = start_on_every_address(daemon);
  const std::string key = state + "/id";
  const std::string pub = make_key(key);
  LeaseDto l = ready_lease(*api, pub);
  LeaseDto b = ready_lease(*api, pub);
  REQUIRE(l.vm);
  REQUIRE(b.vm);
  const std::string kh = state + "/known_hosts";
  write(kh, l.ssh->known_hosts);
  auto login =
      out.run(ssh_argv(key, kh, l.ssh->port, l.ssh->host, "hostname", l.ssh->host_key_alias));
  INFO(login.err);
  CHECK(login.ok());

  fs::create_directories(state + "/www");
  write(state + "/www/hello.txt", "hello\n");
  pid_t www = out.spawn({"python3", "-m", "http.server", "8000", "--bind",
                         OutsideNamespace::kOutsideAddress, "--directory", state + "/www"},
                        state + "/www.log");
  REQUIRE(eventually(
      [&] {
        return out.run({"curl", "-sf", "http://10.78.0.2:8000/hello.txt"}).ok();
      },
      30s));
  CHECK(guest_http_get(*api, l.id, "10.78.0.2", 8000, "/hello.txt").empty());
  CHECK(guest_connect(*api, l.id, "10.78.0.2", 8000) != "connected");
  out.kill(www);
  const std::string port = std::to_string(api_port);
  CHECK(out.run({"curl", "-sf", "--max-time", "5", "http://10.78.0.1:" + port + "/healthz"}).ok());
  CHECK(guest_connect(*api, l.id, "10.77.0.1", api_port) == "timed out");
  // An isolated guest has no route beyond its bridge: the host's other addresses are unreachable.
  CHECK(guest_connect(*api, l.id, "10.78.0.1", api_port).find("unreachable") != std::string::npos);
  CHECK(guest_connect(*api, l.id, "10.77.0.1", 16509) == "timed out");
  CHECK(guest_connect(*api, l.id, "10.77.0.1", 22) == "timed out");

  // The network's DNS is the one host service a guest reaches (so "timed out" below is a filter
  // at work, not a broken tool)...
  CHECK(guest_connect(*api, l.id, "10.77.0.1", 53) == "connected");
  // ...and its neighbour's sshd is not: on isolated bridge ports their ARP requests never meet.
  CHECK(dropped(guest_connect(*api, l.id, b.vm->address, 22)));
  CHECK(dropped(guest_connect(*api, b.id, l.vm->address, 22)));

  // Lease A's guest claims B's address and tells the host so (gratuitous ARP): the host's entry
  // for B stays B's, and B's forward still lands on B (its host key, its name).
  const std::string kh_b = state + "/known_hosts_b";
  write(kh_b, b.ssh->known_hosts);
  auto on_b = [&] {
    return out.run(
        ssh_argv(key, kh_b, b.ssh->port, b.ssh->host, "hostname", b.ssh->host_key_alias));
  };
  auto before = on_b();
  INFO(before.err);
  REQUIRE(before.ok());
  const std::string b_mac = host_neighbour(b.vm->address);
  REQUIRE_FALSE(b_mac.empty());
  auto claimed = guest(*api, l.id,
                       {"sh", "-c",
                        "ip addr add \"$0\"/24 dev eth0 && arping -U -c 3 -I eth0 -s \"$0\" "
                        "\"$0\"; arping -A -c 3 -I eth0 -s \"$0\" \"$0\"; ip addr del \"$0\"/24 "
                        "dev eth0",
                        b.vm->address});
  INFO("arping in A: " << claimed.out << claimed.err);
  CHECK(host_neighbour(b.vm->address) == b_mac);
  auto after = on_b();
  INFO(after.err);
  CHECK(after.ok());
  CHECK(after.out.find(b.vm->name) != std::string::npos);

  // A's guest takes another MAC: its frames go nowhere, not even to the DNS it reached before.
  auto mac = guest(*api, l.id,
                   {"sh", "-c",
                    "cat /sys/class/net/eth0/address && ip link set dev eth0 address "
                    "52:54:00:0b:ad:01"});
  INFO(mac.err);
  REQUIRE(mac.exit_code == 0);
  const std::string own_mac = mac.out.substr(0, 17);
  CHECK(dropped(guest_connect(*api, l.id, "10.77.0.1", 53)));
  CHECK(dropped(guest_connect(*api, l.id, b.vm->address, 22)));
  REQUIRE(guest(*api, l.id, {"ip", "link", "set", "dev", "eth0", "address", own_mac}).exit_code ==
          0);
  CHECK(eventually([&] { return guest_connect(*api, l.id, "10.77.0.1", 53) == "connected"; }, 60s));

  // The host's firewall is reloaded and the guard's table goes with it: armhived puts it back,
  // and the guest reaches the API no more than before.
  SubprocessRunner run;
  auto dropped = run.run({.argv = {"nft", "delete", "table", "inet", "armhive_armhive"}});
  REQUIRE(dropped.is_ok());
  REQUIRE(dropped->ok());
  CHECK(eventually(
      [&] {
        auto listed = run.run({.argv = {"nft", "list", "table", "inet", "armhive_armhive"}});
        return listed.is_ok() && listed->ok();
      },
      60s));
  CHECK(guest_connect(*api, l.id, "10.77.0.1", api_port) == "timed out");
  CHECK(daemon.log().find("network guard of armhive: its rules were gone") != std::string::npos);

  REQUIRE(api->release_lease(l.id).is_ok());
  REQUIRE(api->release_lease(b.id).is_ok());
  daemon.kill(SIGTERM);
  // The "armhive" network stays for the other e2e tests; its guard goes with the daemon's rules.
  CHECK(remove_network_guard(run, "armhive").is_ok());
}

// The site LAN of a bridge-mode test: an existing host bridge `ahsite0` (the host's address
// 10.81.0.1/24 on it, as on a bridge over the LACP bond) and, on the same bridge through a veth
// pair, a namespace playing the site's DHCP server (10.81.0.2, dnsmasq handing out
// 10.81.0.50-99): armhive runs no DHCP in bridge mode, and the host's guard would drop a
// guest's DHCP to a server on the host itself. Removed (bridge, namespace, dnsmasq) by the
// destructor; `scripts/libvirt-sandbox down` removes both should a test be killed.
class SiteLan {
 public:
  static constexpr const char* kBridge = "ahsite0";
  static constexpr const char* kHostAddress = "10.81.0.1";
  static constexpr const char* kDhcpAddress = "10.81.0.2";

  explicit SiteLan(const std::string& state)
      : site_("armhive-e2e-site"), leases_(state + "/site.leases") {
    run({"ip", "link", "delete", kBridge});  // stale from a killed run; fails when absent
    step({"ip", "link", "add", kBridge, "type", "bridge"});
    step({"ip", "addr", "add", std::string(kHostAddress) + "/24", "dev", kBridge});
    step({"ip", "link", "set", kBridge, "up"});
    // OutsideNamespace's veth pair, moved from its routed /24 onto the bridge.
    step({"ip", "addr", "flush", "dev", "ahout0"});
    step({"ip", "link", "set", "ahout0", "master", kBridge});
    step({"ip", "-n", site_.name(), "addr", "flush", "dev", "ahout1"});
    step({"ip", "-n", site_.name(), "addr", "add", std::string(kDhcpAddress) + "/24", "dev",
          "ahout1"});
    fs::create_directories(state);
    fs::remove(leases_);
    dnsmasq_ =
        site_.spawn({"dnsmasq", "--keep-in-foreground", "--no-daemon", "--conf-file=/dev/null",
                     "--port=0", "--bind-interfaces", "--interface=ahout1", "--except-interface=lo",
                     "--dhcp-range=10.81.0.50,10.81.0.99,255.255.255.0,10m", "--dhcp-authoritative",
                     "--dhcp-leasefile=" + leases_, "--pid-file=", "--log-dhcp"},
                    state + "/site-dhcp.log");
  }
  ~SiteLan() {
    site_.kill(dnsmasq_);
    run({"ip", "link", "delete", kBridge});
  }
  SiteLan(const SiteLan&) = delete;
  SiteLan& operator=(const SiteLan&) = delete;

  OutsideNamespace& site() { return site_; }
  // dnsmasq's lease file: one "EXPIRY MAC ADDRESS NAME CLIENT-ID" line per lease it gave.
  std::string leases() const {
    std::ifstream in(leases_);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

 private:
  static ProcessResult run(std::vector<std::string> argv) {
    SubprocessRunner r;
    auto res = r.run({.argv = std::move(argv), .timeout = 30s});
    REQUIRE(res.is_ok());
    return *res;
  }
  static void step(std::vector<std::string> argv) {
    ProcessResult r = run(argv);
    INFO(argv[0] << " " << argv[1] << " " << argv[2] << ": " << r.err);
    REQUIRE(r.ok());
  }

  OutsideNamespace site_;
  std::string leases_;
  pid_t dnsmasq_ = -1;
};

TEST_CASE(
    "bridge: a guest on an existing host bridge takes the site's DHCP address, the forward "
    "reaches it, the host's API does not",
    "[bridge-e2e]") {
  const std::string state = e2e_state() + "/access-bridge";
  const int api_port = kBridgeApiPort;
  const std::string forward = std::to_string(kBridgeForwardPort);
  DaemonProcess daemon(state, e2e_state() + "/images", api_port, R"(
[access]
listen = "127.0.0.1"
port_min = )" + forward + "\nport_max = " + forward + R"(

[host.cpus]
housekeeping = "0"
dedicated = "1"

[[networks]]
name = "ahsite"
mode = "bridge"
bridge = "ahsite0"
)" + ci_pool("ahsite", 0));
  SiteLan lan(state);
  auto api = start_on_every_address(daemon);  // on the bridge's host address too

  const std::string key = state + "/id";
  LeaseDto l = ready_lease(*api, make_key(key));
  REQUIRE(l.vm);
  REQUIRE(l.ssh);
  // The address is the site DHCP's: in its range, and in its lease file.
  INFO("site DHCP leases: " << lan.leases());
  CHECK(l.vm->address.rfind("10.81.0.", 0) == 0);
  const int last = std::stoi(l.vm->address.substr(l.vm->address.rfind('.') + 1));
  CHECK(last >= 50);
  CHECK(last <= 99);
  CHECK(lan.leases().find(" " + l.vm->address + " ") != std::string::npos);

  // The forward on the host reaches the guest's sshd over the bridge, host key verified.
  CHECK(l.ssh->host == "127.0.0.1");
  CHECK(l.ssh->port == kBridgeForwardPort);
  const std::string kh = state + "/known_hosts";
  write(kh, l.ssh->known_hosts);
  SubprocessRunner run;
  auto login = run.run(
      {.argv = ssh_argv(key, kh, l.ssh->port, l.ssh->host, "hostname", l.ssh->host_key_alias),
       .timeout = 60s});
  REQUIRE(login.is_ok());
  INFO(login->err);
  CHECK(login->ok());
  CHECK(login->out.find(l.vm->name) != std::string::npos);

  // The API listens on the host's bridge address (the host itself reaches it there)...
  const std::string host_api =
      std::string("http://") + SiteLan::kHostAddress + ":" + std::to_string(api_port) + "/healthz";
  auto healthz = run.run({.argv = {"curl", "-sf", "--max-time", "5", host_api}, .timeout = 30s});
  REQUIRE(healthz.is_ok());
  CHECK(healthz->ok());
  // ...but a bridged guest's connections to the host are dropped (not refused): the API,
  // libvirtd, the forward's port. A closed port of the site's DHCP machine is refused: the
  // guest's network works, so "timed out" is the host's guard.
  CHECK(guest_connect(*api, l.id, SiteLan::kHostAddress, api_port) == "timed out");
  CHECK(guest_connect(*api, l.id, SiteLan::kHostAddress, 16509) == "timed out");
  CHECK(guest_connect(*api, l.id, SiteLan::kHostAddress, kBridgeForwardPort) == "timed out");
  CHECK(guest_connect(*api, l.id, SiteLan::kDhcpAddress, 8001) == "refused");

  REQUIRE(api->release_lease(l.id).is_ok());
  daemon.kill(SIGTERM);
  remove_network_and_guard("ahsite");
}

// The shipped CI examples, their shell steps extracted from the YAML and run from outside as the
// CI service would (tests/daemon/access/run_ci_example.py), against a real lease.
TEST_CASE("examples: the GitHub Actions and GitLab CI jobs run from outside through the forward",
          "[access-e2e][examples]") {
  const std::string state = e2e_state() + "/access-examples";
  OutsideNamespace out("armhive-e2e-out");
  const int api_port = kExamplesApiPort;
  // The nat network with an egress allow-list: only 10.78.0.2, TCP/UDP 8000.
  DaemonProcess daemon(
      state, e2e_state() + "/images", api_port,
      config("ahnat", "[[networks.egress]]\ncidr = \"10.78.0.2\"\nports = [8000]\n"));
  auto api = start_on_every_address(daemon);
  {
    // Allowed: the listed destination and port. Dropped: any other port there (a closed port
    // would be refused if the packets got through).
    fs::create_directories(state + "/www");
    write(state + "/www/hello.txt", "allowed\n");
    pid_t www = out.spawn({"python3", "-m", "http.server", "8000", "--bind",
                           OutsideNamespace::kOutsideAddress, "--directory", state + "/www"},
                          state + "/www.log");
    REQUIRE(eventually(
        [&] {
          return out.run({"curl", "-sf", "http://10.78.0.2:8000/hello.txt"}).ok();
        },
        30s));
    LeaseDto l = ready_lease(*api, make_key(state + "/id_egress"));
    CHECK(guest_http_get(*api, l.id, "10.78.0.2", 8000, "/hello.txt").find("allowed") !=
          std::string::npos);
    CHECK(guest_connect(*api, l.id, "10.78.0.2", 8001) == "timed out");
    out.kill(www);
    REQUIRE(api->release_lease(l.id).is_ok());
  }
  std::string token;
  {
    std::ifstream in(state + "/admin.token");
    std::getline(in, token);
  }
  // A checkout for `git archive HEAD`.
  const std::string repo = state + "/repo";
  fs::create_directories(repo);
  write(repo + "/Makefile", "all:\n\ttrue\ncheck:\n\ttrue\n");
  SubprocessRunner run;
  for (std::vector<std::string> argv : {std::vector<std::string>{"git", "init", "-q", repo},
                                        {"git", "-C", repo, "add", "Makefile"},
                                        {"git", "-C", repo, "-c", "user.name=e2e", "-c",
                                         "user.email=e2e@armhive", "commit", "-q", "-m", "e2e"}}) {
    auto r = run.run({.argv = argv});
    REQUIRE(r.is_ok());
    REQUIRE(r->ok());
  }
  const std::string runner =
      std::string(ARMHIVE_SOURCE_DIR) + "/tests/daemon/access/run_ci_example.py";
  const std::string server = "http://10.78.0.1:" + std::to_string(api_port);
  for (const char* kind : {"github", "gitlab"}) {
    const std::string yaml =
        std::string(ARMHIVE_SOURCE_DIR) + "/examples/" +
        (std::string(kind) == "github" ? "github-actions.yml" : "gitlab-ci.yml");
    auto job = out.run({"sh", "-c",
                        "cd \"$0\" && exec env ARMHIVE_SERVER=\"$1\" ARMHIVE_TOKEN=\"$2\" "
                        "python3 \"$3\" \"$4\" \"$5\"",
                        repo, server, token, runner, kind, yaml},
                       std::chrono::minutes(10));
    INFO(kind << " job:\n" << job.out << job.err);
    CHECK(job.ok());
    CHECK(job.out.find("aarch64") != std::string::npos);        // uname -m in the guest
    CHECK(job.out.find("make check in") != std::string::npos);  // the job's build step ran there
    CHECK(job.out.find("Makefile") != std::string::npos);       // with the archived sources
    CHECK(job.out.find("released l-") != std::string::npos);    // and gave the VM back
  }
  daemon.kill(SIGTERM);
  remove_network_and_guard("ahnat");
}

}  // namespace
}  // namespace armhive
