// Warm pool under a burst (issue 17 item 3): N lease requests at once on a pool with min_warm,
// max and max_starting, once per max_starting value, side by side in one run.
//
//   armhive-bench-burst [--catalog DIR] [--leases 20] [--min-warm 2] [--max 6]
//                       [--max-starting 1,2] [--hold S] [--out FILE.json]
//
// Per lease: time from request to ready, whether it was a warm hand-out, how long it stayed
// pending, the queue positions and reasons the engine reported while it waited (what
// GET /v1/leases/{id} shows as `queue`, read through LeaseService::get_lease every 50 ms).
// Each lease is released `--hold` seconds after it is ready (a short CI job), so the pool's
// `max` recycles. Per run: boots completed and refill throughput (VMs per minute from the first
// boot's create to the last boot's agent answer), against max_starting.
//
// Two hypervisors:
//   --catalog DIR  real tiny-image guests through the LibvirtHypervisor (run inside
//                  scripts/libvirt-sandbox): 1-vCPU VMs on the shared set (every CPU but the
//                  first) with overcommit = max, so that `max` VMs fit a 2-CPU host;
//   (default)      a timing model: the in-memory hypervisor whose create, boot and hand-out
//                  take the real cold-path figures of BENCHMARKS.md (armhive-bench-cold, TCG:
//                  create 1.24-2.09 s, boot to agent 11.25-14.00 s, uniform and seeded; warm
//                  hand-out 42 ms). It cannot show guests slowing each other down.
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "daemon/bench/stats.h"
#include "daemon/core/cpu_sets.h"
#include "daemon/engine/lease_engine.h"
#include "daemon/images/catalog.h"
#include "daemon/store/sqlite_lease_store.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/handles.h"
#include "daemon/virt/host_discovery.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "daemon/virt/network.h"
#include "tests/support/fake_hypervisor.h"
#include "tests/support/topologies.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The storage pool the benchmark's LibvirtHypervisor made is transient: destroying it removes
// it, so that a later run with another --state-dir in the same libvirtd does not conflict.
void drop_storage_pool(const Connection& conn, const char* name) {
  auto raw = conn.get();
  if (!raw.is_ok()) return;
  StoragePoolHandle p(virStoragePoolLookupByName(raw->get(), name));
  if (p && virStoragePoolIsActive(p.get()) == 1) virStoragePoolDestroy(p.get());
  virResetLastError();
}

double seconds_between(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The cold path as the timing model draws it (seconds).
struct ModelTimes {
  double create_min = 1.24, create_max = 2.09;
  double boot_min = 11.25, boot_max = 14.00;
  double handout = 0.042;
};

// Forwards to `inner` and notes when each VM's create began and its agent first answered. In
// model mode it also makes the calls take the model's times: create_vm sleeps, the agent
// answers only once the drawn boot time has passed since create returned, set_authorized_keys
// sleeps the hand-out time. Thread-safe (the engine calls it from its workers); mu_ is never
// held across a forwarded call or a sleep.
class BurstHypervisor final : public Hypervisor {
 public:
  BurstHypervisor(Hypervisor& inner, std::optional<ModelTimes> model, uint32_t seed)
      : inner_(inner), model_(model), rng_(seed) {}

  Status create_vm(const VmSpec& spec) override {
    auto t0 = SteadyClock::now();
    double create_s = 0, boot_s = 0;
    {
      std::lock_guard lock(mu_);
      vms_[spec.name].create_begin = t0;
      if (model_) {
        create_s = std::uniform_real_distribution<>(model_->create_min, model_->create_max)(rng_);
        boot_s = std::uniform_real_distribution<>(model_->boot_min, model_->boot_max)(rng_);
      }
    }
    if (model_) std::this_thread::sleep_for(std::chrono::duration<double>(create_s));
    Status s = inner_.create_vm(spec);
    std::lock_guard lock(mu_);
    vms_[spec.name].agent_from =
        SteadyClock::now() +
        std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(boot_s));
    return s;
  }
  Status ping_agent(std::string_view name, milliseconds timeout) override {
    std::string n(name);
    if (model_) {
      std::lock_guard lock(mu_);
      auto it = vms_.find(n);
      if (it == vms_.end() || SteadyClock::now() < it->second.agent_from) {
        return Status(ErrorCode::kUnavailable, "guest agent is not connected", n);
      }
    }
    Status s = inner_.ping_agent(name, timeout);
    if (s.is_ok()) {
      std::lock_guard lock(mu_);
      auto& t = vms_[n].agent_ok;
      if (!t) t = SteadyClock::now();
    }
    return s;
  }
  Status set_authorized_keys(std::string_view name, std::string_view user,
                             const std::vector<std::string>& keys) override {
    if (model_) std::this_thread::sleep_for(std::chrono::duration<double>(model_->handout));
    return inner_.set_authorized_keys(name, user, keys);
  }
  Status destroy_vm(std::string_view name) override { return inner_.destroy_vm(name); }
  Result<std::vector<VmInfo>> list_vms() override { return inner_.list_vms(); }
  Result<std::vector<std::string>> list_vm_files() override { return inner_.list_vm_files(); }
  Status set_lease(std::string_view name, std::string_view lease_id) override {
    return inner_.set_lease(name, lease_id);
  }
  void set_event_handler(std::function<void(const VmEvent&)> handler) override {
    inner_.set_event_handler(std::move(handler));
  }
  Result<std::string> guest_address(std::string_view name) override {
    return inner_.guest_address(name);
  }
  Result<GuestExecResult> exec(std::string_view name, const GuestExecRequest& request) override {
    return inner_.exec(name, request);
  }
  Result<int64_t> exec_start(std::string_view name, const GuestExecRequest& request) override {
    return inner_.exec_start(name, request);
  }
  Result<std::optional<GuestExecResult>> exec_status(std::string_view name, int64_t pid) override {
    return inner_.exec_status(name, pid);
  }
  Result<std::string> console_log(std::string_view name, size_t max_bytes) override {
    return inner_.console_log(name, max_bytes);
  }

  struct VmTimes {
    SteadyClock::time_point create_begin;
    SteadyClock::time_point agent_from;
    std::optional<SteadyClock::time_point> agent_ok;
  };
  std::map<std::string, VmTimes> times() {
    std::lock_guard lock(mu_);
    return vms_;
  }

 private:
  Hypervisor& inner_;
  std::optional<ModelTimes> model_;
  std::mutex mu_;
  std::mt19937 rng_;
  std::map<std::string, VmTimes> vms_;
};

struct LeaseTrace {
  std::string id;
  SteadyClock::time_point requested;
  std::optional<SteadyClock::time_point> ready, released;
  std::optional<SteadyClock::time_point> left_pending;
  bool warm = false;
  std::string end;  // a terminal state other than released, with its reason
  std::optional<int> first_position;
  std::vector<std::string> reasons;  // distinct, in the order first seen
};

json spread(std::vector<double> v) {
  SampleSpread s = compute_spread(v);
  std::sort(v.begin(), v.end());
  double p90 = v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(0.9 * v.size()))];
  return {{"n", s.n}, {"median", s.median}, {"p90", p90}, {"min", s.min}, {"max", s.max}};
}

struct RunConfig {
  int leases = 20;
  int min_warm = 2;
  int max = 6;
  int max_starting = 1;
  double hold_s = 5;
  std::chrono::seconds limit{900};
};

// One burst on a fresh engine over `hv`. `make_alloc` gives the host's cores.
Result<json> run_burst(const RunConfig& cfg, Hypervisor& inner, std::optional<ModelTimes> model,
                       const std::function<Result<CoreAllocator>()>& make_alloc,
                       const std::function<Result<BootImage>(const std::string&)>& images,
                       const std::string& network, const std::string& dir, bool shared) {
  BurstHypervisor hv(inner, model, 20260130 + cfg.max_starting);
  fs::remove_all(dir);
  fs::create_directories(dir);
  ARMHIVE_ASSIGN_OR_RETURN(auto db, Database::open(dir + "/armhive.db"));
  ARMHIVE_ASSIGN_OR_RETURN(auto store, SqliteLeaseStore::open(*db));
  PoolConfig pool;
  pool.name = "burst";
  pool.image = "tiny";
  pool.vcpus = 1;
  pool.memory_mib = 512;
  pool.network = network;
  pool.min_warm = cfg.min_warm;
  pool.max = cfg.max;
  pool.max_starting = cfg.max_starting;
  if (shared) {
    pool.cpu_policy = CpuPolicy::kShared;
    pool.overcommit = cfg.max;
  }
  EngineOptions options;
  options.pools = {pool};
  options.boot_timeout = std::chrono::minutes(5);
  options.handout_wait = std::chrono::seconds(30);
  ARMHIVE_ASSIGN_OR_RETURN(CoreAllocator alloc, make_alloc());
  SystemClock clock;
  LeaseEngine engine(options, hv, *store, std::move(alloc), images, clock, nullptr);
  ARMHIVE_RETURN_IF_ERROR(engine.start());
  auto warm_now = [&] {
    auto p = engine.pools();
    return p.empty() ? std::pair{0, 0} : std::pair{p[0].warm, p[0].starting};
  };
  const auto fill_deadline = SteadyClock::now() + std::chrono::minutes(5);
  while (warm_now() != std::pair{cfg.min_warm, 0}) {
    if (SteadyClock::now() > fill_deadline) {
      engine.stop();
      return Status(ErrorCode::kTimeout, "the pool did not fill to min_warm", pool.name);
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  std::cerr << "burst max_starting " << cfg.max_starting << ": pool warm, " << cfg.leases
            << " requests\n";

  // The burst: every request from its own thread at once (create_lease waits for a warm
  // hand-out, so sequential requests would not be a burst).
  std::vector<LeaseTrace> traces(static_cast<size_t>(cfg.leases));
  std::vector<std::thread> clients;
  std::atomic<int> failed_creates{0};
  const auto t0 = SteadyClock::now();
  for (int i = 0; i < cfg.leases; ++i) {
    clients.emplace_back([&, i] {
      LeaseRequest req;
      req.pool = pool.name;
      req.owner = "bench";
      req.ssh_keys = {
          "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBurstBenchKeyOnlyForTheBenchmark0000 b"};
      traces[i].requested = SteadyClock::now();
      auto l = engine.create_lease(req);
      if (!l.is_ok()) {
        ++failed_creates;
        traces[i].end = l.status().to_string();
        return;
      }
      traces[i].id = l->id;
    });
  }
  for (auto& c : clients) c.join();
  if (failed_creates > 0) {
    engine.stop();
    return Status(ErrorCode::kInternal, "a lease request failed: " + traces[0].end);
  }

  // Watch every lease: queue slots while pending, ready, release after the hold.
  const auto deadline = t0 + cfg.limit;
  auto hold =
      std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(cfg.hold_s));
  for (;;) {
    bool open = false;
    for (LeaseTrace& t : traces) {
      if (t.released || !t.end.empty()) continue;
      open = true;
      auto now = SteadyClock::now();
      if (t.ready) {
        if (now - *t.ready >= hold) {
          if (auto r = engine.release_lease(t.id); !r.is_ok()) t.end = r.status().to_string();
          t.released = SteadyClock::now();
        }
        continue;
      }
      auto l = engine.get_lease(t.id);
      if (!l.is_ok()) {
        t.end = l.status().to_string();
        continue;
      }
      if (l->queue) {
        if (!t.first_position) t.first_position = l->queue->position;
        std::string r(to_string(l->queue->reason));
        if (std::find(t.reasons.begin(), t.reasons.end(), r) == t.reasons.end()) {
          t.reasons.push_back(r);
        }
      }
      if (l->state != LeaseState::kPending && !t.left_pending) t.left_pending = now;
      if (l->state == LeaseState::kReady) {
        t.ready = now;
        t.warm = l->warm_handout;
      } else if (is_terminal(l->state)) {
        t.end = std::string(to_string(l->state)) + ": " + l->reason;
      }
    }
    if (!open || SteadyClock::now() > deadline) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  const auto burst_end = SteadyClock::now();
  // Refill after the burst: back to min_warm warm VMs.
  std::optional<double> refill_s;
  while (SteadyClock::now() - burst_end < std::chrono::minutes(3)) {
    if (warm_now() == std::pair{cfg.min_warm, 0}) {
      refill_s = seconds_between(burst_end, SteadyClock::now());
      break;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  engine.stop();
  // The engine leaves its VMs running for the next start(): this run's are destroyed here
  // (only the ones it created: the sandbox's libvirtd may run other tests' domains).
  if (auto vms = inner.list_vms(); vms.is_ok()) {
    auto ours = hv.times();
    for (const VmInfo& vm : *vms) {
      if (ours.count(vm.name)) (void)inner.destroy_vm(vm.name);
    }
  }

  json per_lease = json::array();
  std::vector<double> to_ready, to_ready_cold, queued;
  std::map<std::string, int> reason_counts;
  int warm = 0, not_ready = 0;
  for (size_t i = 0; i < traces.size(); ++i) {
    const LeaseTrace& t = traces[i];
    json j = {{"index", i + 1}, {"lease", t.id}, {"warm", t.warm}, {"reasons", t.reasons}};
    if (t.first_position) j["first_position"] = *t.first_position;
    if (t.ready) {
      double r = seconds_between(t.requested, *t.ready);
      j["to_ready_s"] = r;
      to_ready.push_back(r);
      if (t.warm) {
        ++warm;
      } else {
        to_ready_cold.push_back(r);
      }
    } else {
      ++not_ready;
      j["end"] = t.end.empty() ? "not ready within the limit" : t.end;
    }
    double q = seconds_between(t.requested, t.left_pending.value_or(burst_end));
    j["queued_s"] = q;
    queued.push_back(q);
    for (const auto& r : t.reasons) ++reason_counts[r];
    per_lease.push_back(j);
  }
  // Boots of this run: from the first create to the last agent answer.
  int boots = 0;
  std::optional<SteadyClock::time_point> first_create, last_agent;
  std::vector<double> boot_s;
  for (const auto& [name, vt] : hv.times()) {
    if (!vt.agent_ok || vt.create_begin < t0) continue;  // the initial fill is not the burst
    ++boots;
    boot_s.push_back(seconds_between(vt.create_begin, *vt.agent_ok));
    if (!first_create || vt.create_begin < *first_create) first_create = vt.create_begin;
    if (!last_agent || *vt.agent_ok > *last_agent) last_agent = vt.agent_ok;
  }
  double window = first_create ? seconds_between(*first_create, *last_agent) : 0;
  // How long a boot slot stood idle: from each boot's agent answer to the next create that
  // began after it (while leases still waited for boots).
  std::vector<SteadyClock::time_point> creates;
  std::vector<double> slot_gaps;
  json vm_times = json::array();
  for (const auto& [name, vt] : hv.times()) {
    if (vt.create_begin < t0) continue;
    creates.push_back(vt.create_begin);
    json v = {{"create_s", seconds_between(t0, vt.create_begin)}};
    if (vt.agent_ok) v["agent_s"] = seconds_between(t0, *vt.agent_ok);
    vm_times.push_back(v);
  }
  std::sort(creates.begin(), creates.end());
  for (const auto& [name, vt] : hv.times()) {
    if (vt.create_begin < t0 || !vt.agent_ok) continue;
    auto next = std::upper_bound(creates.begin(), creates.end(), *vt.agent_ok);
    if (next != creates.end()) slot_gaps.push_back(seconds_between(*vt.agent_ok, *next));
  }
  json out = {{"max_starting", cfg.max_starting},
              {"leases", per_lease},
              {"warm_handouts", warm},
              {"not_ready", not_ready},
              {"to_ready_s", spread(to_ready)},
              {"to_ready_cold_s", spread(to_ready_cold)},
              {"queued_s", spread(queued)},
              {"reasons_seen", reason_counts},
              {"burst_s", seconds_between(t0, burst_end)},
              {"boots", boots},
              {"boot_create_to_agent_s", spread(boot_s)},
              {"boot_slot_idle_s", spread(slot_gaps)},
              {"vms", vm_times},
              {"refill_vms_per_minute", window > 0 ? boots * 60.0 / window : 0.0},
              {"refill_to_min_warm_after_burst_s", refill_s ? json(*refill_s) : json(nullptr)}};
  std::cerr << "burst max_starting " << cfg.max_starting << ": " << warm << " warm, median "
            << out["to_ready_s"]["median"] << " s to ready, " << out["refill_vms_per_minute"]
            << " VMs/min\n";
  return out;
}

int run(const std::string& catalog_dir, RunConfig cfg, const std::vector<int>& max_starting,
        const std::string& out, const std::string& uri, const std::string& state_dir,
        const std::string& commit) {
  auto fail = [](const Status& s) {
    std::cerr << "bench: " << s.to_string() << "\n";
    return 1;
  };
  json runs = json::array();
  json machine;
  std::string mode;
  char hostname[256] = {};
  gethostname(hostname, sizeof hostname - 1);
  std::error_code ec;
  if (catalog_dir.empty()) {
    mode = "timing model (in-memory hypervisor, cold-path times of BENCHMARKS.md)";
    machine = {{"hostname", hostname}, {"hypervisor", mode}};
    ModelTimes model;
    for (int ms : max_starting) {
      cfg.max_starting = ms;
      FakeHypervisor fake;
      fake.pings_until_ready = 1;
      HostTopology host = lx2160a_topology();
      auto r = run_burst(
          cfg, fake, model, [&]() { return CoreAllocator::create(host, default_cpu_sets(host)); },
          [](const std::string& name) -> Result<BootImage> {
            return BootImage{name, "1", "/i/disk.qcow2", "/i/vmlinuz", "/i/initrd", "", "root"};
          },
          "default", state_dir + "/model", false);
      if (!r.is_ok()) return fail(r.status());
      runs.push_back(*r);
    }
  } else {
    mode = "real tiny-image guests (LibvirtHypervisor, EMULATED: TCG)";
    auto catalog = ImageCatalog::open(catalog_dir);
    if (!catalog.is_ok()) return fail(catalog.status());
    auto image = catalog->find("tiny");
    if (!image.is_ok()) return fail(image.status());
    if (Status v = catalog->verify(*image); !v.is_ok()) return fail(v);
    auto loop = EventLoop::start();
    if (!loop.is_ok()) return fail(loop.status());
    auto conn = Connection::open(uri);
    if (!conn.is_ok()) return fail(conn.status());
    auto host = discover_host(*conn, {});
    if (!host.is_ok()) return fail(host.status());
    if (host->cpus.size() < 2) return fail(Status(ErrorCode::kUnavailable, "needs 2 CPUs"));
    machine = {{"hostname", hostname},
               {"cpus", host->cpus.size()},
               {"accel", host->accel == Accel::kKvm ? "kvm" : "tcg (EMULATED)"},
               {"memory_kib", host->memory_kib},
               {"hypervisor", mode}};
    fs::remove_all(state_dir, ec);
    // The widest range of the /24: every VM has a fresh MAC and dnsmasq keeps a destroyed VM's
    // lease for an hour, so one run of ~50 boots must not exhaust it (BENCHMARKS.md).
    const NetworkSpec net{"armhive-bench-burst", "ahbburst0",   "10.83.0.1/24",
                          "10.83.0.10",          "10.83.0.250", 1500};
    if (Status s = ensure_network(*conn, net); !s.is_ok()) return fail(s);
    // Every CPU but the first is shared; the first keeps the host and the emulator threads.
    CpuSets sets;
    for (const auto& c : host->cpus) {
      (c.id == host->cpus.front().id ? sets.housekeeping : sets.shared).push_back(c.id);
    }
    const Image img = *image;
    int rc = 0;
    for (int ms : max_starting) {
      cfg.max_starting = ms;
      LibvirtHypervisorOptions o;
      o.uri = uri;
      o.state_dir = state_dir + "/vms";
      o.storage_pool = "armhive-bench-burst";
      o.accel = host->accel;
      auto lv = LibvirtHypervisor::open(o);
      if (!lv.is_ok()) {
        rc = fail(lv.status());
        break;
      }
      auto r = run_burst(
          cfg, **lv, std::nullopt, [&]() { return CoreAllocator::create(*host, sets); },
          [img](const std::string&) -> Result<BootImage> {
            return BootImage{img.name,        img.version, img.disk.path, img.kernel.path,
                             img.initrd.path, img.cmdline, img.login_user};
          },
          net.name, state_dir + "/run", true);
      if (!r.is_ok()) {
        rc = fail(r.status());
        break;
      }
      runs.push_back(*r);
    }
    drop_storage_pool(*conn, "armhive-bench-burst");
    (void)remove_network(*conn, net.name);
    if (rc != 0) return rc;
  }
  fs::remove_all(state_dir, ec);
  std::ostringstream ms_list;
  for (size_t i = 0; i < max_starting.size(); ++i) ms_list << (i ? "," : "") << max_starting[i];
  json doc = {
      {"benchmark", "warm_pool_burst"},
      {"machine", machine},
      {"commit", commit},
      {"command", "armhive-bench-burst" +
                      (catalog_dir.empty() ? std::string() : " --catalog " + catalog_dir) +
                      " --leases " + std::to_string(cfg.leases) + " --min-warm " +
                      std::to_string(cfg.min_warm) + " --max " + std::to_string(cfg.max) +
                      " --max-starting " + ms_list.str() + " --hold " + std::to_string(cfg.hold_s)},
      {"pool", {{"min_warm", cfg.min_warm}, {"max", cfg.max}}},
      {"hold_s", cfg.hold_s},
      {"runs", runs}};
  if (out.empty()) {
    std::cout << doc.dump(2) << "\n";
  } else {
    std::ofstream f(out);
    f << doc.dump(2) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace armhive

int main(int argc, char** argv) {
  CLI::App app{"warm pool under a burst of lease requests"};
  std::string catalog, out, commit;
  std::string uri = "qemu:///system";
  std::string state_dir = (std::filesystem::temp_directory_path() / "armhive-bench-burst").string();
  armhive::RunConfig cfg;
  std::vector<int> max_starting = {1, 2};
  app.add_option("--catalog", catalog, "image catalogue with the tiny image: real guests");
  app.add_option("--leases", cfg.leases, "requests in the burst");
  app.add_option("--min-warm", cfg.min_warm);
  app.add_option("--max", cfg.max);
  app.add_option("--max-starting", max_starting, "one run per value")->delimiter(',');
  app.add_option("--hold", cfg.hold_s, "seconds each lease is held once ready");
  app.add_option("--out", out, "JSON result file (default stdout)");
  app.add_option("--uri", uri);
  app.add_option("--state-dir", state_dir);
  app.add_option("--commit", commit, "commit recorded in the JSON");
  CLI11_PARSE(app, argc, argv);
  if (cfg.leases < 1 || cfg.max < 1 || cfg.min_warm < 0 || max_starting.empty()) {
    std::cerr << "bench: --leases and --max must be at least 1, --max-starting non-empty\n";
    return 2;
  }
  return armhive::run(catalog, cfg, max_starting, out, uri, state_dir, commit);
}
