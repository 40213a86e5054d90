#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/engine/lease_engine.h"
#include "daemon/store/database.h"
#include "daemon/store/sqlite_lease_store.h"
#include "tests/support/fake_hypervisor.h"
#include "tests/support/faulty_hypervisor.h"
#include "tests/support/faulty_store.h"
#include "tests/support/manual_clock.h"

namespace armhive {

extern const std::string kTestKey;

// Waits until the engine's first pool has `warm` warm VMs and nothing is booting.
bool settle_pool(LeaseEngine& engine, int warm);

// Until `done` holds (the engine's passes and destroys run on its own threads); false after
// ~10 s.
template <typename F>
bool eventually(LeaseEngine& engine, F done) {
  for (int i = 0; i < 2000; ++i) {
    engine.wait_idle(std::chrono::seconds(1));
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// A pool "ci" of the tiny image on the LX2160A test topology.
PoolConfig ci_pool(int min_warm, int max, int vcpus = 2);

// One LeaseEngine over a FakeHypervisor and a SQLite LeaseStore (in memory or a file), each
// behind a fault-injecting wrapper driven by `faults` (disarmed: plain pass-through), and a
// manual clock. Options are tuned for tests: fast polls, no background reaper/reconcile/usage
// sampling.
struct Harness {
  explicit Harness(std::vector<PoolConfig> pools,
                   std::string db_path = ":memory:", std::shared_ptr<FakeHypervisor> hv = nullptr,
                   std::chrono::milliseconds retry_backoff = std::chrono::milliseconds(5));
  ~Harness();

  // (Re)creates the engine over the same hypervisor, database and clock (a daemon restart
  // after `kill -9`: the old engine is stopped, its VMs keep running).
  void make_engine();
  void start();  // REQUIREs success
  Lease lease(LeaseRequest req = {});
  Lease wait_ready(const std::string& id);
  // Waits until the pool has `warm` warm VMs and nothing is booting.
  bool settle(int warm);
  int cores_held();

  ManualClock clock;
  Metrics metrics;
  FaultPlan faults;
  std::shared_ptr<FakeHypervisor> hypervisor;
  std::unique_ptr<FaultyHypervisor> faulty_hypervisor;
  std::unique_ptr<Database> db;
  std::unique_ptr<SqliteLeaseStore> store;
  std::unique_ptr<FaultyStore> faulty_store;
  std::unique_ptr<LeaseEngine> engine;
  std::atomic<bool> image_missing{false};
  std::function<void()> on_resolve;  // runs at every image resolution
  EngineOptions options;
};

}  // namespace armhive
