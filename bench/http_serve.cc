// armhive-bench-http-serve: the real HttpServer over the real LeaseEngine (SQLite file, a warm
// pool on an in-memory hypervisor whose VMs boot at once), for load generators such as wrk
// (bench/http_load.py drives it; BENCHMARKS.md "API under load"). Prints one JSON line
// {"url", "token", "lease_id"} once serving, then serves until stdin closes.
//
// `--hold-long-polls N --url U --token T --lease L` is the other half: it opens N connections
// that each long-poll `GET /v1/leases/L?wait=ready` on a lease that never becomes ready, and
// holds them until stdin closes (re-opening any the server answers).
//
// Written against HttpServer's stable surface only (constructor, start, url), so the same
// file also builds in an older tree for before/after runs (bench/http_load.py --before).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "daemon/core/cpu_sets.h"
#include "daemon/engine/lease_engine.h"
#include "daemon/http/server.h"
#include "daemon/store/sqlite_lease_store.h"
#include "daemon/store/token_store.h"
#include "tests/support/fake_hypervisor.h"
#include "tests/support/topologies.h"

namespace armhive {
namespace {

void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 65536);
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int serve() {
  FakeHypervisor hypervisor;
  hypervisor.pings_until_ready = 1;
  SystemClock clock;
  Metrics metrics;
  std::string dir =
      (std::filesystem::temp_directory_path() / ("armhive-bench-http-" + std::to_string(getpid())))
          .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto fail = [&](const Status& s) {
    std::cerr << "bench: " << s.to_string() << "\n";
    std::filesystem::remove_all(dir);
    return 1;
  };
  auto db = Database::open(dir + "/armhive.db");
  if (!db.is_ok()) return fail(db.status());
  auto store = SqliteLeaseStore::open(**db);
  auto tokens = TokenStore::open(**db, clock);
  auto audit = AuditLog::open(**db, clock);
  if (!store.is_ok() || !tokens.is_ok() || !audit.is_ok()) return fail(internal_error("stores"));
  PoolConfig warm;
  warm.name = "ci";
  warm.image = "tiny";
  warm.vcpus = 1;
  warm.min_warm = 4;
  warm.max = 8;
  warm.max_starting = 4;
  // Fits the host only when it is empty, which the warm pool never lets it be: its leases stay
  // pending (the long-polls' lease).
  PoolConfig never = warm;
  never.name = "never";
  never.min_warm = 0;
  never.max = 1;
  never.vcpus = 15;
  EngineOptions options;
  options.pools = {warm, never};
  options.agent_poll = std::chrono::milliseconds(1);
  HostTopology host = lx2160a_topology();
  auto alloc = CoreAllocator::create(host, default_cpu_sets(host));
  if (!alloc.is_ok()) return fail(alloc.status());
  LeaseEngine engine(
      options, hypervisor, **store, std::move(alloc).value(),
      [](const std::string& name) -> Result<BootImage> {
        return BootImage{name, "1", "/i/disk.qcow2", "/i/vmlinuz", "/i/initrd", "", "root"};
      },
      clock, &metrics);
  if (Status s = engine.start(); !s.is_ok()) return fail(s);
  auto secret = (*tokens)->create({"bench", TokenRole::kCi, 0, Seconds(0)});
  if (!secret.is_ok()) return fail(secret.status());
  HttpOptions http;
  http.port = 0;
  HttpServer server(http, engine, nullptr, **tokens, **audit, metrics);
  if (Status s = server.start(); !s.is_ok()) return fail(s);
  for (int i = 0; i < 10000 && engine.pools()[0].warm == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  LeaseRequest r;
  r.pool = "ci";
  r.owner = "bench";
  auto ready = engine.create_lease(r);
  r.pool = "never";
  auto pending = engine.create_lease(r);
  if (!ready.is_ok()) return fail(ready.status());
  nlohmann::json hello = {{"url", server.url()},
                          {"token", *secret},
                          {"lease_id", ready->id},
                          {"pending_lease_id", pending.is_ok() ? pending->id : ""}};
  std::cout << hello.dump() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  server.stop();
  engine.stop();
  std::filesystem::remove_all(dir);
  return 0;
}

int open_poll(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(request.size())) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

int hold_long_polls(int n, const std::string& url, const std::string& token,
                    const std::string& lease) {
  int port = std::stoi(url.substr(url.rfind(':') + 1));
  std::string request = "GET /v1/leases/" + lease +
                        "?wait=ready&timeout=300s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        "Authorization: Bearer " +
                        token + "\r\n\r\n";
  std::vector<pollfd> fds;
  for (int i = 0; i < n; ++i) fds.push_back({open_poll(port, request), POLLIN, 0});
  fds.push_back({STDIN_FILENO, POLLIN, 0});
  std::cout << "{\"held\":" << n << "}" << std::endl;
  for (;;) {
    if (poll(fds.data(), fds.size(), 1000) < 0) break;
    if (fds.back().revents != 0) break;  // stdin closed: done
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].fd >= 0 && fds[i].revents == 0) continue;
      char buf[4096];
      if (fds[i].fd >= 0 && recv(fds[i].fd, buf, sizeof buf, MSG_DONTWAIT) > 0) continue;
      if (fds[i].fd >= 0) close(fds[i].fd);
      fds[i].fd = open_poll(port, request);  // answered or dropped: wait again
    }
  }
  for (auto& p : fds) {
    if (p.fd > STDIN_FILENO) close(p.fd);
  }
  return 0;
}

}  // namespace
}  // namespace armhive

int main(int argc, char** argv) {
  CLI::App app{"armhive HTTP server for load benchmarks"};
  int hold = 0;
  std::string url, token, lease;
  app.add_option("--hold-long-polls", hold, "open and hold this many long-polls instead");
  app.add_option("--url", url);
  app.add_option("--token", token);
  app.add_option("--lease", lease);
  CLI11_PARSE(app, argc, argv);
  armhive::raise_fd_limit();
  if (hold > 0) return armhive::hold_long_polls(hold, url, token, lease);
  return armhive::serve();
}
