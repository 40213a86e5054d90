// iperf3 to and from a leased guest three ways, side by side in one run: direct to the guest's
// bridge address, through the lease's per-lease forward, and through the API tunnel.
//
//   armhive-bench-access --catalog DIR [--samples N] [--seconds S] [--out FILE.json]
//                        [--state-dir DIR] [--api-port P] [--commit C]
//                        [--paths direct,forward,tunnel]
//
// Must run inside the sandbox network namespace (scripts/libvirt-sandbox run --name NS --), as
// root, from a build tree (it starts BUILD/daemon/armhived, BUILD being two levels above this
// program, or $ARMHIVE_BUILD_DIR).
//
// What runs: a real armhived (tests/support/daemon_process.h; API on --api-port, default 18520)
// with an [access] table on 127.0.0.1 (forwards on 18521-18522: SSH and 5201) and a pool
// "bench" of one 1-vCPU tiny VM on a dedicated core (CPU 1; CPU 0 for everything else) whose
// leases may ask for guest port 5201. One lease asks for it with the daemon's admin token;
// `iperf3 -s -D` runs in the guest through the API's exec. The three paths:
//   direct   iperf3 -c GUEST_ADDRESS:5201
//   forward  iperf3 -c to the lease's forward of 5201 (armhived's ForwardTable)
//   tunnel   iperf3 -c to a listener of this program that relays each accepted connection
//            through the API tunnel (GET /v1/leases/{id}/tunnel?port=5201, the same bearer token)
//            with the CLI's own tunnel client (api/tunnel_client.h, what `armhive tunnel` runs);
//            iperf3 opens a control and a data connection, so each gets its own tunnel.
// Samples are interleaved (for each sample: to-guest then -R from-guest, each direct, forward,
// tunnel), so every path sees the same machine. iperf3 -J is parsed with parse_iperf3_json (the
// receiver's bits per second). Every figure is EMULATED when the host has no KVM for aarch64.
// The lease is released and the daemon stopped on every exit path (the sandbox's `down` removes
// whatever a killed run left).
// Results: bench/results/access-<date>.json, summarised in BENCHMARKS.md.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "api/client.h"
#include "api/tunnel_client.h"
#include "base/process_runner.h"
#include "daemon/bench/iperf3_parser.h"
#include "daemon/bench/stats.h"
#include "tests/support/daemon_process.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

volatile std::sig_atomic_t g_interrupted = 0;  // NOLINT: a signal flag must be a global
extern "C" void on_signal(int /*sig*/) { g_interrupted = 1; }

constexpr int kIperfPort = 5201;

struct Options {
  std::string catalog;
  int samples = 5;
  int seconds = 5;
  std::string out;
  std::string state_dir = "/tmp/armhive-bench-access";
  int api_port = 18520;
  std::string commit;                                                // recorded in the result
  std::vector<std::string> paths = {"direct", "forward", "tunnel"};  // which to sample
  std::vector<std::string> command;                                  // argv, recorded in the result
};

std::string daemon_config() {
  return R"(
[access]
listen = "127.0.0.1"
port_min = 18521
port_max = 18522

[host.cpus]
housekeeping = "0"
dedicated = "1"

[[pools]]
name = "bench"
image = "tiny"
vcpus = 1
memory_mib = 512
network = "armhive"
max = 1
max_starting = 1
min_warm = 0
default_ttl = "30m"
max_ttl = "1h"
cpu_policy = "dedicated"
access_ports = [5201]
)";
}

// A loopback listener whose every accepted connection is relayed through the API tunnel by
// run_tunnel (one thread per connection, for the connection's life). A connection ends when
// the tunnel does: the guest closed its side, or the daemon went away.
// Threading: start()/stop() from the controlling thread.
class TunnelListener {
 public:
  TunnelListener(ClientOptions options, std::string lease_id, int guest_port)
      : options_(std::move(options)), lease_id_(std::move(lease_id)), guest_port_(guest_port) {}
  ~TunnelListener() { stop(); }
  TunnelListener(const TunnelListener&) = delete;
  TunnelListener& operator=(const TunnelListener&) = delete;

  // Listens on 127.0.0.1 (an ephemeral port: port()).
  Status start() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return unavailable("socket: " + std::string(std::strerror(errno)));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return unavailable("cannot listen on 127.0.0.1: " + std::string(std::strerror(errno)));
    }
    port_ = ntohs(a.sin_port);
    if (::pipe2(stop_, O_CLOEXEC) != 0) return unavailable("pipe2 failed");
    accepter_ = std::thread([this] { accept_loop(); });
    return Status::ok();
  }
  int port() const { return port_; }

  // Stops accepting, shuts every relayed connection down and waits for the relays (each ends
  // as soon as its tunnel does: stop the daemon first, or let the guest end them).
  void stop() {
    if (stop_[1] >= 0) {
      (void)!::write(stop_[1], "x", 1);
    }
    if (accepter_.joinable()) accepter_.join();
    for (auto& r : relays_) r.join();
    relays_.clear();
    for (int* fd : {&fd_, &stop_[0], &stop_[1]}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }

  // The first tunnel failure any relay saw (ok when none).
  Status first_error() {
    std::lock_guard lock(mu_);
    return error_;
  }

 private:
  void accept_loop() {
    for (;;) {
      pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents != 0) return;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      int one = 1;
      (void)::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // as iperf3's own end
      relays_.emplace_back([this, c] {
        Status s = run_tunnel(options_, lease_id_, guest_port_, c, c);
        ::close(c);
        if (!s.is_ok()) {
          std::lock_guard lock(mu_);
          if (error_.is_ok()) error_ = s;
        }
      });
    }
  }

  ClientOptions options_;
  std::string lease_id_;
  int guest_port_;
  int fd_ = -1;
  int port_ = 0;
  int stop_[2] = {-1, -1};
  std::thread accepter_;
  std::list<std::thread> relays_;  // accepter thread while it runs, then stop()
  std::mutex mu_;                  // guards error_
  Status error_ = Status::ok();
};

Result<IperfResult> iperf3(const std::string& host, int port, int seconds, bool reverse) {
  std::vector<std::string> argv = {
      "iperf3", "-c", host, "-p", std::to_string(port), "-t", std::to_string(seconds), "-J"};
  if (reverse) argv.push_back("-R");
  SubprocessRunner run;
  auto r = run.run({.argv = argv, .timeout = std::chrono::seconds(seconds + 30)});
  if (!r.is_ok()) return r.status();
  auto parsed = parse_iperf3_json(r->out);
  if (!parsed.is_ok()) {
    return parsed.status().annotate("iperf3 to " + host + ":" + std::to_string(port) + ": " +
                                    r->err);
  }
  return parsed;
}

json spread_json(const SampleSpread& s) {
  return {{"n", s.n},       {"median", s.median}, {"min", s.min}, {"max", s.max},
          {"mean", s.mean}, {"stddev", s.stddev}, {"cv", s.cv}};
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Host facts for the result: CPUs, whether KVM exists, the load when the run started.
json host_json() {
  json h = {{"cpus", std::thread::hardware_concurrency()},
            {"dev_kvm", fs::exists("/dev/kvm")},  // says nothing of aarch64 guests on x86
            {"loadavg_at_start", first_line("/proc/loadavg")}};
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      h["cpu_model"] = line.substr(line.find(':') + 2);
      break;
    }
  }
  return h;
}

Status write_result(const std::string& out, const std::string& text) {
  if (out.empty()) {
    std::cout << text;
    std::cout.flush();
    return std::cout ? Status::ok() : unavailable("cannot write the result to stdout");
  }
  // Written beside and renamed into place, so a failed run never leaves half a result file.
  const std::string tmp = out + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return unavailable("cannot write the result", out);
    }
  }
  std::error_code ec;
  fs::rename(tmp, out, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return unavailable("cannot write the result: " + ec.message(), out);
  }
  return Status::ok();
}

// Releases the lease (and waits until its VM is gone) on every exit path, before the daemon
// stops: that also cuts the lease's tunnels, so the relays end.
class LeaseGuard {
 public:
  explicit LeaseGuard(Client& api) : api_(api) {}
  ~LeaseGuard() { release(); }
  LeaseGuard(const LeaseGuard&) = delete;
  LeaseGuard& operator=(const LeaseGuard&) = delete;
  void set(std::string id) { id_ = std::move(id); }
  void release() {
    if (id_.empty()) return;
    (void)api_.release_lease(id_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      auto l = api_.get_lease(id_);
      if (!l.is_ok() || l->state == "released" || l->state == "failed") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    id_.clear();
  }

 private:
  Client& api_;
  std::string id_;
};

int run(const Options& opt) {
  auto fail = [](const Status& s) {
    std::cerr << "bench: " << s.to_string() << "\n";
    return 1;
  };
  json host = host_json();
  // Declared first so it goes last: its relays end once the daemon (below) has gone.
  std::optional<TunnelListener> tunnel;
  DaemonProcess daemon(opt.state_dir, opt.catalog, opt.api_port, daemon_config());
  if (Status s = daemon.start(std::chrono::seconds(120)); !s.is_ok()) return fail(s);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);  // a relay whose iperf3 went away ends, not this process
  auto api = daemon.client();
  if (!api) return fail(internal_error("no API client"));

  LeaseGuard guard(*api);
  LeaseCreateRequest req;
  req.pool = "bench";
  req.ttl_seconds = 1800;
  req.ports = {kIperfPort};
  auto created = api->create_lease(req);
  if (!created.is_ok()) return fail(created.status());
  guard.set(created->id);
  auto ready = api->wait_lease(created->id, std::chrono::seconds(300));
  if (!ready.is_ok()) return fail(ready.status());
  if (ready->state != "ready") return fail(unavailable("the lease is " + ready->state));
  LeaseDto lease = *ready;
  // The extra port's forward opens with the lease's SSH forward; a hand-out's JSON may precede it.
  for (int i = 0; i < 60 && lease.forwards.empty() && g_interrupted == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto g = api->get_lease(lease.id);
    if (g.is_ok()) lease = *g;
  }
  if (!lease.vm || lease.vm->address.empty()) return fail(unavailable("the lease has no address"));
  if (lease.forwards.empty() || lease.forwards[0].guest_port != kIperfPort) {
    return fail(unavailable("the lease has no forward of port 5201"));
  }
  // How the daemon runs guests (its /v1/hosts): "tcg" makes every figure EMULATED.
  std::string accel = "unknown";
  if (auto hosts = api->hosts(); hosts.is_ok() && !hosts->empty()) accel = hosts->front().accel;
  host["accel"] = accel;
  const std::string address = lease.vm->address;
  const std::string fwd_host = lease.forwards[0].host;
  const int fwd_port = lease.forwards[0].port;

  ExecRequestDto exec;
  exec.argv = {"iperf3", "-s", "-D", "-p", std::to_string(kIperfPort)};
  exec.timeout_s = 30;
  exec.timeout_given = true;
  auto server = api->exec(lease.id, exec);
  if (!server.is_ok()) return fail(server.status());
  if (server->exit_code != 0) return fail(unavailable("iperf3 -s in the guest failed"));
  std::this_thread::sleep_for(std::chrono::seconds(1));

  ClientOptions topts;
  topts.server = "http://127.0.0.1:" + std::to_string(opt.api_port);
  topts.token = daemon.token();
  topts.timeout = std::chrono::seconds(30);
  tunnel.emplace(topts, lease.id, kIperfPort);
  if (Status s = tunnel->start(); !s.is_ok()) return fail(s);

  std::map<std::string, std::vector<double>> gbps;
  json samples = json::array();
  json retries = json::array();  // failed attempts, kept so a run that needed them says so
  for (int i = 0; i < opt.samples && g_interrupted == 0; ++i) {
    for (bool reverse : {false, true}) {
      for (const std::string& p : opt.paths) {
        if (g_interrupted != 0) break;
        // The guest's iperf3 server takes a moment after a test before it accepts the next
        // (a connection in that window is reset): pause, and retry a sample that failed so.
        Result<IperfResult> r = unavailable("not run");
        for (int attempt = 0; attempt < 3 && g_interrupted == 0; ++attempt) {
          std::this_thread::sleep_for(std::chrono::seconds(1));
          r = p == "direct"    ? iperf3(address, kIperfPort, opt.seconds, reverse)
              : p == "forward" ? iperf3(fwd_host, fwd_port, opt.seconds, reverse)
                               : iperf3("127.0.0.1", tunnel->port(), opt.seconds, reverse);
          if (r.is_ok()) break;
          std::cerr << "bench: " << p << " attempt " << attempt + 1 << ": "
                    << r.status().to_string() << "\n";
          retries.push_back({{"sample", i},
                             {"path", p},
                             {"reverse", reverse},
                             {"error", r.status().to_string()}});
        }
        if (!r.is_ok()) {
          Status t = tunnel->first_error();
          return fail(t.is_ok() ? r.status() : r.status().annotate(t.to_string()));
        }
        const std::string key = p + (reverse ? "_from_guest" : "_to_guest");
        const double g = r->received_bits_per_second / 1e9;
        gbps[key].push_back(g);
        samples.push_back({{"sample", i}, {"path", key}, {"gbit_s", g}});
        std::cerr << "bench: " << key << " " << g << " Gbit/s\n";
      }
    }
  }
  if (g_interrupted != 0) return fail(unavailable("interrupted"));
  guard.release();
  daemon.kill(SIGTERM);
  tunnel->stop();

  json result = {{"benchmark", "iperf3 direct vs per-lease forward vs API tunnel"},
                 {"emulated", accel != "kvm"},
                 {"guest", {{"image", "tiny"}, {"vcpus", 1}, {"memory_mib", 512}}},
                 {"iperf3_seconds", opt.seconds},
                 {"samples", samples},
                 {"retried_attempts", retries},
                 {"command", opt.command},
                 {"commit", opt.commit},
                 {"armhived", std::string(std::getenv("ARMHIVE_BUILD_DIR")) + "/daemon/armhived"},
                 {"host", host}};
  for (const std::string dir : {"_to_guest", "_from_guest"}) {
    SampleSpread d = compute_spread(gbps["direct" + dir]);
    for (const std::string& path : opt.paths) {
      SampleSpread s = compute_spread(gbps[path + dir]);
      result["spread_gbit_s"][path + dir] = spread_json(s);
      if (path != "direct" && d.n > 0) {
        result["ratio_" + path + "_over_direct" + dir] = d.median > 0 ? s.median / d.median : 0;
      }
    }
  }
  if (Status s = write_result(opt.out, result.dump(2) + "\n"); !s.is_ok()) return fail(s);
  return 0;
}

}  // namespace
}  // namespace armhive

int main(int argc, char** argv) {
  armhive::Options opt;
  CLI::App app{"iperf3 direct vs through the per-lease forward vs through the API tunnel"};
  app.add_option("--catalog", opt.catalog, "image catalogue with the tiny image")->required();
  app.add_option("--samples", opt.samples, "samples per path and direction")
      ->check(CLI::Range(1, 100));
  app.add_option("--seconds", opt.seconds, "iperf3 -t")->check(CLI::Range(1, 600));
  app.add_option("--out", opt.out, "JSON result file (default stdout)");
  app.add_option("--state-dir", opt.state_dir, "the daemon's state (wiped first)");
  app.add_option("--commit", opt.commit, "commit recorded in the result");
  app.add_option("--paths", opt.paths, "which paths to sample (for profiling one)")
      ->delimiter(',')
      ->check(CLI::IsMember({"direct", "forward", "tunnel"}));
  app.add_option("--api-port", opt.api_port, "the daemon's API port")->check(CLI::Range(1, 65535));
  CLI11_PARSE(app, argc, argv);
  opt.command.assign(argv, argv + argc);
  if (std::getenv("ARMHIVE_BUILD_DIR") == nullptr) {
    // DaemonProcess starts $ARMHIVE_BUILD_DIR/daemon/armhived: this program's build tree.
    std::error_code ec;
    std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) ::setenv("ARMHIVE_BUILD_DIR", self.parent_path().parent_path().c_str(), 1);
  }
  return armhive::run(opt);
}
