// Scale of the state (issue 17 item 5): warm hand-out latency and lease-list latency with
// 10^3, 10^5 and 10^6 ended leases (each with its history) in the database.
//
//   armhive-bench-state [--sizes 1000,100000,1000000] [--handouts N] [--out FILE.json]
//                       [--postgres URL]
//
// One SQLite file grows through the sizes (rows are added, never rebuilt); with --postgres the
// same series runs on that PostgreSQL database too, in the same run, so the two stores are
// compared side by side (issue 36). The database must be empty (no `leases` table): the bench
// fills it and leaves it so. At each size:
//   handout      LeaseEngine::create_lease on a warm pool (in-memory hypervisor), N times
//   list_active  LeaseService::list_leases of the live leases (include_ended false), N times
//   list_page    one page of 1,000 leases with their history, from a random point
//   list_all     paging through every lease, 1,000 per page (the whole table), once
// The history rows are written with one INSERT … SELECT per size so that 10^6 rows take
// seconds; they are read back through the store first (a schema drift fails the run).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "daemon/bench/stats.h"
#include "daemon/core/cpu_sets.h"
#include "daemon/engine/lease_engine.h"
#include "daemon/store/pg_database.h"
#include "daemon/store/sqlite_lease_store.h"
#include "tests/support/fake_hypervisor.h"
#include "tests/support/topologies.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

double ms_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
}

json distribution(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    if (ms.empty()) return 0.0;
    size_t i = static_cast<size_t>(p * static_cast<double>(ms.size() - 1) + 0.5);
    return ms[std::min(i, ms.size() - 1)];
  };
  SampleSpread s = compute_spread(ms);
  return {{"n", ms.size()},
          {"p50_ms", pct(0.5)},
          {"p90_ms", pct(0.9)},
          {"p99_ms", pct(0.99)},
          {"max_ms", s.max},
          {"mean_ms", s.mean},
          {"p99_over_p50", pct(0.5) > 0 ? pct(0.99) / pct(0.5) : 0}};
}

// Adds ended leases (released, two history rows each) until the table holds `target` rows of
// history leases; ids "l-h" + 10 hex digits never collide with the engine's 12-hex ids.
Status seed_postgres(Database& db, int64_t from, int64_t to) {
  return db.transaction([&](Database::Tx& tx) -> Status {
    ARMHIVE_RETURN_IF_ERROR(tx.execute(
        "INSERT INTO leases (id, pool, owner, purpose, ssh_keys, labels, idempotency_key, state, "
        "reason, ttl_s, created_at, ready_at, expires_at, ended_at, vm_name, address, "
        "login_user, cpus, warm) "
        "SELECT 'l-h' || lpad(to_hex(x), 10, '0'), 'ci', 'bench', 'ci', '[]', '{}', '', "
        "'released', 'released by its owner', 3600, 1764547200000 + x, 1764547200100 + x, "
        "1764550800000 + x, 1764547260000 + x, 'armhive-vm-h' || lpad(to_hex(x), 8, '0'), "
        "'10.77.0.9', 'root', '[1]', 1 FROM generate_series(?::bigint, ?::bigint) AS x",
        {from, to - 1}));
    return tx.execute(
        "INSERT INTO lease_history (lease_id, seq, from_state, to_state, at, reason) "
        "SELECT 'l-h' || lpad(to_hex(x), 10, '0'), s.seq, s.f, s.t, 1764547200000 + x + s.seq, "
        "s.r FROM generate_series(?::bigint, ?::bigint) AS x, "
        "(SELECT 0 AS seq, 'pending' AS f, 'ready' AS t, 'warm hand-out' AS r UNION ALL "
        "SELECT 1, 'ready', 'released', 'released by its owner') AS s",
        {from, to - 1});
  });
}

Status seed(Database& db, int64_t from, int64_t to) {
  if (to <= from) return Status::ok();
  if (db.dialect() == Database::Dialect::kPostgres) return seed_postgres(db, from, to);
  return db.transaction([&](Database::Tx& tx) -> Status {
    ARMHIVE_RETURN_IF_ERROR(tx.execute(
        "WITH RECURSIVE c(x) AS (SELECT ? UNION ALL SELECT x + 1 FROM c WHERE x < ?) "
        "INSERT INTO leases (id, pool, owner, purpose, ssh_keys, labels, idempotency_key, state, "
        "reason, ttl_s, created_at, ready_at, expires_at, ended_at, vm_name, address, "
        "login_user, cpus, warm) "
        "SELECT printf('l-h%010x', x), 'ci', 'bench', 'ci', '[]', '{}', '', 'released', "
        "'released by its owner', 3600, 1764547200000 + x, 1764547200100 + x, "
        "1764550800000 + x, 1764547260000 + x, printf('armhive-vm-h%08x', x), '10.77.0.9', "
        "'root', '[1]', 1 FROM c",
        {from, to - 1}));
    return tx.execute(
        "WITH RECURSIVE c(x) AS (SELECT ? UNION ALL SELECT x + 1 FROM c WHERE x < ?) "
        "INSERT INTO lease_history (lease_id, seq, from_state, to_state, at, reason) "
        "SELECT printf('l-h%010x', x), s.seq, s.f, s.t, 1764547200000 + x + s.seq, s.r FROM c, "
        "(SELECT 0 AS seq, 'pending' AS f, 'ready' AS t, 'warm hand-out' AS r UNION ALL "
        "SELECT 1, 'ready', 'released', 'released by its owner') AS s",
        {from, to - 1});
  });
}

struct Env {
  FakeHypervisor hypervisor;
  SystemClock clock;
  std::unique_ptr<Database> db;
  std::unique_ptr<SqliteLeaseStore> store;
  std::unique_ptr<LeaseEngine> engine;

  // `where`: a SQLite file, or a PostgreSQL URL when `postgres`.
  Status start(const std::string& where, bool postgres) {
    hypervisor.pings_until_ready = 1;
    if (postgres) {
      ARMHIVE_ASSIGN_OR_RETURN(auto pg, PgDatabase::connect(where));
      db = std::move(pg);
    } else {
      ARMHIVE_ASSIGN_OR_RETURN(db, Database::open(where));
    }
    ARMHIVE_ASSIGN_OR_RETURN(store, SqliteLeaseStore::open(*db));
    return Status::ok();
  }
  Status start_engine() {
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
        clock, nullptr);
    return engine->start();
  }
  int warm() {
    auto pools = engine->pools();
    return pools.empty() ? 0 : pools[0].warm;
  }
};

Result<json> measure(Env& env, int64_t rows, int handouts, std::mt19937& rng) {
  json out = {{"history_rows", rows}};
  // Warm hand-outs, each released again (so the history keeps growing, as in production).
  std::vector<double> handout, list_active, list_page;
  for (int i = 0; i < handouts; ++i) {
    for (int w = 0; w < 10000 && env.warm() == 0; ++w) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    LeaseRequest req{.pool = "ci", .owner = "bench"};
    auto t0 = SteadyClock::now();
    auto lease = env.engine->create_lease(req);
    handout.push_back(ms_since(t0));
    if (!lease.is_ok()) return lease.status();
    if (lease->state != LeaseState::kReady) {
      return internal_error("not a warm hand-out: " + lease->reason, lease->id);
    }
    LeaseFilter active;
    active.include_ended = false;
    active.limit = kMaxListLimit;
    t0 = SteadyClock::now();
    auto listed = env.engine->list_leases(active);
    list_active.push_back(ms_since(t0));
    if (!listed.is_ok()) return listed.status();
    (void)env.engine->release_lease(lease->id);
  }
  // Pages from random points of the history.
  std::uniform_int_distribution<int64_t> at(0, std::max<int64_t>(0, rows - 1001));
  for (int i = 0; i < std::max(10, handouts / 10); ++i) {
    char id[32];
    std::snprintf(id, sizeof id, "l-h%010llx", static_cast<unsigned long long>(at(rng)));
    LeaseFilter page;
    page.limit = kMaxListLimit;
    page.after_id = rows > 0 ? id : "";
    auto t0 = SteadyClock::now();
    auto listed = env.engine->list_leases(page);
    list_page.push_back(ms_since(t0));
    if (!listed.is_ok()) return listed.status();
    if (rows > 1001 && listed->size() != kMaxListLimit) {
      return internal_error("short page: " + std::to_string(listed->size()));
    }
  }
  // The whole table, page by page.
  auto t0 = SteadyClock::now();
  LeaseFilter all;
  all.limit = kMaxListLimit;
  size_t seen = 0;
  size_t pages = 0;
  for (;;) {
    auto listed = env.engine->list_leases(all);
    if (!listed.is_ok()) return listed.status();
    seen += listed->size();
    ++pages;
    if (listed->size() < kMaxListLimit) break;
    all.after_id = listed->back().id;
  }
  double all_ms = ms_since(t0);
  if (seen < static_cast<size_t>(rows)) return internal_error("paging lost leases");
  out["handout"] = distribution(handout);
  out["list_active"] = distribution(list_active);
  out["list_page_1000"] = distribution(list_page);
  out["list_all"] = {{"leases", seen}, {"pages", pages}, {"total_ms", all_ms}};
  return out;
}

// One store's series through the sizes.
Result<json> series(const std::string& where, bool postgres, const std::vector<int64_t>& sizes,
                    int handouts) {
  std::mt19937 rng(20261201);
  json results = json::array();
  int64_t seeded = 0;
  if (postgres) {
    ARMHIVE_ASSIGN_OR_RETURN(auto pg, PgDatabase::connect(where));
    ARMHIVE_ASSIGN_OR_RETURN(
        auto found, pg->query("SELECT 1 FROM information_schema.tables WHERE "
                              "table_schema = current_schema() AND table_name = 'leases'"));
    if (!found.empty()) {
      return invalid_argument("--postgres", "the database has leases already: give an empty one");
    }
  }
  auto fail = [](const Status& s) -> Result<json> { return s; };
  for (int64_t size : sizes) {
    // The engine is stopped while rows are added (as if they had accumulated over months).
    {
      Env seed_env;
      if (Status s = seed_env.start(where, postgres); !s.is_ok()) return fail(s);
      auto t0 = SteadyClock::now();
      if (Status s = seed(*seed_env.db, seeded, size); !s.is_ok()) return fail(s);
      std::cerr << "seeded " << size << " rows in " << ms_since(t0) / 1000 << " s\n";
      seeded = std::max(seeded, size);
      auto probe = seed_env.store->find("l-h0000000000");
      if (!probe.is_ok()) return fail(probe.status());
      if (!probe->has_value() || (*probe)->history.size() != 2) {
        return fail(internal_error("seeded rows do not read back as leases"));
      }
    }
    Env env;
    if (Status s = env.start(where, postgres); !s.is_ok()) return fail(s);
    if (Status s = env.start_engine(); !s.is_ok()) return fail(s);
    auto m = measure(env, size, handouts, rng);
    env.engine->stop();
    if (!m.is_ok()) return fail(m.status());
    std::cerr << (postgres ? "postgresql " : "sqlite ") << m->dump() << "\n";
    results.push_back(*m);
  }
  return results;
}

int run(const std::vector<int64_t>& sizes, int handouts, const std::string& out_path,
        const std::string& commit, const std::string& postgres) {
  const std::string dir = (fs::temp_directory_path() / "armhive-bench-state").string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto fail = [&](const Status& s) {
    std::cerr << "bench: " << s.to_string() << "\n";
    fs::remove_all(dir);
    return 1;
  };
  auto sqlite = series(dir + "/armhive.db", false, sizes, handouts);
  if (!sqlite.is_ok()) return fail(sqlite.status());
  json backends = json::array({{{"store", "sqlite"}, {"sizes", *sqlite}}});
  if (!postgres.empty()) {
    auto pg = series(postgres, true, sizes, handouts);
    if (!pg.is_ok()) return fail(pg.status());
    backends.push_back({{"store", "postgresql"}, {"sizes", *pg}});
  }
  std::ostringstream cmd;
  cmd << "armhive-bench-state --handouts " << handouts << " --sizes ";
  for (size_t i = 0; i < sizes.size(); ++i) cmd << (i ? "," : "") << sizes[i];
  if (!postgres.empty()) cmd << " --postgres URL";
  json doc = {{"benchmark", "state_scale"},
              {"machine", {{"cpus", std::thread::hardware_concurrency()}}},
              {"commit", commit},
              {"command", cmd.str()},
              {"goal", "hand-out p99 within 5x of p50 at every size"},
              {"sizes", *sqlite},
              {"backends", backends}};
  if (out_path.empty()) {
    std::cout << doc.dump(2) << "\n";
  } else {
    std::ofstream(out_path) << doc.dump(2) << "\n";
  }
  fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace armhive

int main(int argc, char** argv) {
  CLI::App app{"armhive state scale benchmark"};
  std::vector<int64_t> sizes = {1000, 100000, 1000000};
  int handouts = 300;
  std::string out, commit;
  app.add_option("--sizes", sizes, "history rows, ascending")->delimiter(',');
  app.add_option("--handouts", handouts, "hand-outs per size")->check(CLI::Range(10, 100000));
  app.add_option("--out", out, "JSON result file (default stdout)");
  app.add_option("--commit", commit, "commit recorded in the JSON");
  std::string postgres;
  app.add_option("--postgres", postgres,
                 "also run on this PostgreSQL database (a libpq URL; empty database)");
  CLI11_PARSE(app, argc, argv);
  if (!std::is_sorted(sizes.begin(), sizes.end())) {
    std::cerr << "bench: --sizes must be ascending\n";
    return 2;
  }
  return armhive::run(sizes, handouts, out, commit, postgres);
}
