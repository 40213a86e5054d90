// Warm hand-out latency: request -> ready response with the lease's SSH keys installed.
//
//   armhive-bench-handout [--leases N] [--out FILE.json]
//       In one run, side by side: the lease engine called directly, and the full stack over
//       HTTP (HttpServer + token auth + SQLite file + engine), both over an in-memory
//       hypervisor whose VMs boot instantly, so what is measured is armhive's own path.
//   armhive-bench-handout --server URL --token T --pool P [--leases N] [--out FILE.json]
//       Against a running armhived with real guests: each lease waits for a warm VM first, so
//       every measured request is a warm hand-out (keys injected through the guest agent).
//
// Results: JSON with p50/p90/p99/max/mean per mode, summarised in BENCHMARKS.md.

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "api/client.h"
#include "bench/latency_summary.h"
#include "daemon/core/cpu_sets.h"
#include "daemon/engine/lease_engine.h"
#include "daemon/http/server.h"
#include "daemon/store/sqlite_lease_store.h"
#include "daemon/store/token_store.h"
#include "tests/support/fake_hypervisor.h"
#include "tests/support/topologies.h"

namespace armhive {
namespace {

using Clock = std::chrono::steady_clock;
const std::string kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk2b2hDb3JlS2V5Rm9yVGVzdHNPbmx5MTIzNDU2Nzg5 "
    "bench@armhive";

bool wait_warm(const std::function<int()>& warm, std::chrono::seconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (warm() > 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

struct InProcess {
  FakeHypervisor hypervisor;
  SystemClock clock;
  Metrics metrics;
  std::unique_ptr<Database> db;
  std::unique_ptr<SqliteLeaseStore> store;
  std::unique_ptr<TokenStore> tokens;
  std::unique_ptr<AuditLog> audit;
  std::unique_ptr<LeaseEngine> engine;
  std::string dir;

  Status start() {
    dir = (std::filesystem::temp_directory_path() / "armhive-bench-handout").string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    hypervisor.pings_until_ready = 1;
    ARMHIVE_ASSIGN_OR_RETURN(db, Database::open(dir + "/armhive.db"));
    ARMHIVE_ASSIGN_OR_RETURN(store, SqliteLeaseStore::open(*db));
    ARMHIVE_ASSIGN_OR_RETURN(tokens, TokenStore::open(*db, clock));
    ARMHIVE_ASSIGN_OR_RETURN(audit, AuditLog::open(*db, clock));
    PoolConfig pool;
    pool.name = "ci";
    pool.image = "tiny";
    pool.vcpus = 1;
    pool.min_warm = 4;
    pool.max = 8;
    pool.max_starting = 4;
    EngineOptions options;
    options.pools = {pool};
    options.agent_poll = std::chrono::milliseconds(1);
    HostTopology host = lx2160a_topology();
    ARMHIVE_ASSIGN_OR_RETURN(CoreAllocator alloc,
                             CoreAllocator::create(host, default_cpu_sets(host)));
    engine = std::make_unique<LeaseEngine>(
        options, hypervisor, *store, std::move(alloc),
        [](const std::string& name) -> Result<BootImage> {
          return BootImage{name, "1", "/i/disk.qcow2", "/i/vmlinuz", "/i/initrd", "", "root"};
        },
        clock, &metrics);
    return engine->start();
  }
  int warm() {
    auto pools = engine->pools();
    return pools.empty() ? 0 : pools[0].warm;
  }
};

int run_in_process(int leases, nlohmann::json& out) {
  InProcess env;
  if (Status s = env.start(); !s.is_ok()) {
    std::cerr << "bench: " << s.to_string() << "\n";
    return 1;
  }
  auto secret = env.tokens->create({.name = "bench", .role = TokenRole::kCi});
  HttpOptions http;
  http.port = 0;
  HttpServer server(http, *env.engine, nullptr, *env.tokens, *env.audit, env.metrics);
  if (Status s = server.start(); !s.is_ok() || !secret.is_ok()) {
    std::cerr << "bench: cannot start the HTTP server\n";
    return 1;
  }
  auto client = Client::create({.server = server.url(), .token = *secret});
  std::vector<double> direct, http_ms;
  // Interleave the two modes so that both see the same machine state.
  for (int i = 0; i < leases; ++i) {
    if (!wait_warm([&] { return env.warm(); }, std::chrono::seconds(10))) return 1;
    LeaseRequest req{.pool = "ci", .ssh_keys = {kKey}, .owner = "bench"};
    auto t0 = Clock::now();
    auto lease = env.engine->create_lease(req);
    double took = ms_since(t0);
    if (!lease.is_ok() || lease->state != LeaseState::kReady || !lease->warm_handout) {
      std::cerr << "bench: direct lease " << i << " not a warm hand-out\n";
      return 1;
    }
    direct.push_back(took);
    (void)env.engine->release_lease(lease->id);

    if (!wait_warm([&] { return env.warm(); }, std::chrono::seconds(10))) return 1;
    LeaseCreateRequest body;
    body.pool = "ci";
    body.ssh_keys = {kKey};
    t0 = Clock::now();
    auto dto = (*client)->create_lease(body);
    took = ms_since(t0);
    if (!dto.is_ok() || dto->state != "ready") {
      std::cerr << "bench: HTTP lease " << i << " failed: " << dto.status().to_string() << "\n";
      return 1;
    }
    http_ms.push_back(took);
    (void)(*client)->release_lease(dto->id);
  }
  server.stop();
  env.engine->stop();
  out["modes"]["engine_direct"] = summarise_ms(direct);
  out["modes"]["http_full_stack"] = summarise_ms(http_ms);
  out["modes"]["engine_direct"]["what"] =
      "LeaseEngine::create_lease on a warm pool, SQLite file, in-memory hypervisor";
  out["modes"]["http_full_stack"]["what"] =
      "POST /v1/leases over loopback HTTP with bearer-token auth, same engine";
  out["http_over_direct_p50"] =
      out["modes"]["http_full_stack"]["p50_ms"].get<double>() /
      std::max(1e-9, out["modes"]["engine_direct"]["p50_ms"].get<double>());
  std::filesystem::remove_all(env.dir);
  return 0;
}

int run_against_daemon(const std::string& server, const std::string& token, const std::string& pool,
                       int leases, nlohmann::json& out) {
  auto client = Client::create({.server = server, .token = token});
  if (!client.is_ok()) return 1;
  auto warm = [&]() {
    auto pools = (*client)->pools();
    if (!pools.is_ok()) return 0;
    for (const PoolDto& p : *pools) {
      if (p.name == pool) return p.warm;
    }
    return 0;
  };
  std::vector<double> ms;
  for (int i = 0; i < leases; ++i) {
    if (!wait_warm(warm, std::chrono::seconds(300))) {
      std::cerr << "bench: no warm VM in pool " << pool << " after 300 s\n";
      return 1;
    }
    LeaseCreateRequest body;
    body.pool = pool;
    body.ssh_keys = {kKey};
    auto t0 = Clock::now();
    auto dto = (*client)->create_lease(body);
    double took = ms_since(t0);
    if (!dto.is_ok() || dto->state != "ready" || !dto->warm_handout) {
      std::cerr << "bench: lease " << i << " was not a warm hand-out\n";
      return 1;
    }
    ms.push_back(took);
    std::cerr << "lease " << i + 1 << "/" << leases << ": " << took << " ms\n";
    (void)(*client)->release_lease(dto->id);
  }
  out["modes"]["daemon_real_guests"] = summarise_ms(ms);
  // The cold path (every refill behind these hand-outs is one), split by the daemon's
  // armhive_boot_phase_seconds histograms: mean seconds per phase.
  httplib::Client http(server);
  auto metrics = http.Get("/metrics", {{"Authorization", "Bearer " + token}});
  if (metrics && metrics->status == 200) {
    std::map<std::string, std::pair<double, double>> phases;  // phase -> (sum, count)
    std::regex line(R"re(armhive_boot_phase_seconds_(sum|count)\{([^}]*)\} ([0-9.eE+-]+))re");
    std::regex phase_label(R"re(phase="([a-z]+)")re");
    for (std::sregex_iterator it(metrics->body.begin(), metrics->body.end(), line), end; it != end;
         ++it) {
      std::smatch p;
      std::string labels = (*it)[2];
      if (!std::regex_search(labels, p, phase_label)) continue;
      double v = std::stod((*it)[3]);
      auto& [sum, count] = phases[p[1]];
      ((*it)[1] == "sum" ? sum : count) += v;
    }
    for (const auto& [phase, sc] : phases) {
      if (sc.second > 0) {
        out["cold_path"][phase] = {{"mean_s", sc.first / sc.second}, {"n", sc.second}};
      }
    }
  }
  out["modes"]["daemon_real_guests"]["what"] =
      "POST /v1/leases to a running armhived; keys injected into a real guest via the agent";
  out["server"] = server;
  out["pool"] = pool;
  return 0;
}

}  // namespace
}  // namespace armhive

int main(int argc, char** argv) {
  CLI::App app{"Warm hand-out latency benchmark"};
  int leases = 300;
  std::string out_path, server, token, pool = "ci";
  app.add_option("--leases", leases, "Number of leases")->check(CLI::Range(1, 100000));
  app.add_option("--out", out_path, "Write the JSON results here");
  app.add_option("--server", server, "A running armhived (real guests); default: in-process");
  app.add_option("--token", token, "Bearer token for --server");
  app.add_option("--pool", pool, "Pool for --server");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);

  nlohmann::json out = {{"benchmark", "warm_handout_latency"},
                        {"leases", leases},
                        {"goal", {{"p50_ms", 10}, {"p99_ms", 50}}}};
  int rc = server.empty() ? armhive::run_in_process(leases, out)
                          : armhive::run_against_daemon(server, token, pool, leases, out);
  if (rc != 0) return rc;
  std::string text = out.dump(2);
  std::cout << text << "\n";
  if (!out_path.empty()) std::ofstream(out_path) << text << "\n";
  return 0;
}
