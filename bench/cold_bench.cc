// Cold lease against bare libvirt (issue 17 items 1 and 2): request -> guest agent answering,
// split into overlay, define+start, boot and readiness, side by side in one run.
//
//   armhive-bench-cold --catalog DIR [--rounds N] [--out FILE.json] [--uri URI] [--state-dir D]
//
// Each round runs, in turn and one VM at a time, the same tiny-image guest three ways:
//   bare        a plain program on the libvirt C API: virStorageVolCreateXML (qcow2 overlay),
//               virDomainCreateXML, guest-ping every agent_poll, then the DHCP lease
//               (virDomainInterfaceAddresses) as a user without armhive would wait for it;
//   armhive     LeaseEngine::create_lease on a pool with min_warm 0 (SQLite file, the real
//               LibvirtHypervisor), polled until the lease is ready; the address is reserved
//               before boot (daemon/virt/dhcp_reservation.h);
//   armhive-dhcp  the same with the reservation off (the behaviour before item 2): readiness
//               waits for the guest's DHCP exchange.
// The armhive phases are timed from outside the engine by a Hypervisor decorator (the calls
// the engine makes and when they first succeed). Both paths use the same domain XML
// (build_domain_xml is a pure function), so the guests are identical and what differs is the
// orchestration. Real guests: run inside scripts/libvirt-sandbox (it holds the sandbox lock).
#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "daemon/bench/stats.h"
#include "daemon/core/cpu_sets.h"
#include "daemon/engine/lease_engine.h"
#include "daemon/images/catalog.h"
#include "daemon/store/sqlite_lease_store.h"
#include "daemon/virt/domain_xml.h"
#include "daemon/virt/error.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/handles.h"
#include "daemon/virt/host_discovery.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "daemon/virt/network.h"
#include "daemon/virt/storage.h"
#include "daemon/virt/xml.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kAgentPoll{250};  // the engine's default agent_poll
constexpr std::chrono::milliseconds kAgentTimeout{2000};
constexpr std::chrono::minutes kBootTimeout{4};

double seconds_between(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// When the engine's hypervisor calls about one VM began and first succeeded.
struct CallTimes {
  std::optional<SteadyClock::time_point> create_begin, create_end, agent_ok, address_ok;
};

// Forwards every call to the real hypervisor and notes the times above. Thread-safe: the
// engine calls it from its workers; the map is guarded by mu_, which no forwarded call holds.
class TimingHypervisor final : public Hypervisor {
 public:
  explicit TimingHypervisor(Hypervisor& inner) : inner_(inner) {}

  Status create_vm(const VmSpec& spec) override {
    {
      std::lock_guard lock(mu_);
      last_spec_ = spec;
    }
    note(spec.name, &CallTimes::create_begin);
    Status s = inner_.create_vm(spec);
    if (s.is_ok()) note(spec.name, &CallTimes::create_end);
    return s;
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
  Status ping_agent(std::string_view name, std::chrono::milliseconds timeout) override {
    Status s = inner_.ping_agent(name, timeout);
    if (s.is_ok()) note(std::string(name), &CallTimes::agent_ok);
    return s;
  }
  Result<std::string> guest_address(std::string_view name) override {
    auto r = inner_.guest_address(name);
    if (r.is_ok()) note(std::string(name), &CallTimes::address_ok);
    return r;
  }
  Status set_authorized_keys(std::string_view name, std::string_view user,
                             const std::vector<std::string>& keys) override {
    return inner_.set_authorized_keys(name, user, keys);
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

  CallTimes times(const std::string& name) {
    std::lock_guard lock(mu_);
    return times_[name];
  }
  std::optional<VmSpec> last_spec() {
    std::lock_guard lock(mu_);
    return last_spec_;
  }

 private:
  void note(const std::string& name, std::optional<SteadyClock::time_point> CallTimes::*field) {
    auto now = SteadyClock::now();
    std::lock_guard lock(mu_);
    auto& slot = times_[name].*field;
    if (!slot) slot = now;  // the first success counts
  }

  Hypervisor& inner_;
  std::mutex mu_;
  std::map<std::string, CallTimes> times_;
  std::optional<VmSpec> last_spec_;
};

// One sample: seconds per phase, from the request.
struct Sample {
  double overlay_define_start = 0;  // bare: overlay and start apart; armhive: create_vm
  double overlay = 0;
  double define_start = 0;
  double queue = 0;  // armhive: request -> create_vm called (engine scheduling)
  double boot = 0;   // started -> guest agent answers
  double readiness = 0;
  double to_agent = 0;  // request -> agent answering (the issue's figure)
  double to_ready = 0;  // request -> ready (bare: address known; armhive: lease ready)
};

json sample_json(const Sample& s) {
  return {{"overlay_s", s.overlay},
          {"define_start_s", s.define_start},
          {"create_s", s.overlay_define_start},
          {"queue_s", s.queue},
          {"boot_s", s.boot},
          {"readiness_s", s.readiness},
          {"to_agent_s", s.to_agent},
          {"to_ready_s", s.to_ready}};
}

struct Setup {
  Image image;
  std::string network;
  std::string state_dir;
  std::string pool_name;  // the bare program's storage pool
  std::string uri;
};

Result<std::string> volume_xml(const std::string& name, const std::string& base, uint64_t size) {
  detail::XmlWriter w;
  w.start("volume");
  w.element("name", name);
  w.start("capacity").attr("unit", "bytes").text(std::to_string(size)).end();
  w.start("target").start("format").attr("type", "qcow2").end().end();
  w.start("backingStore");
  w.element("path", base);
  w.start("format").attr("type", "qcow2").end();
  w.end();
  w.end();
  return w.finish();
}

// The plain program: libvirt calls only, in the order a script would make them.
Result<Sample> run_bare(const Setup& setup, virConnectPtr conn, int round, VmSpec spec) {
  const std::string name = "armhive-bench-cold-bare-" + std::to_string(round);
  const fs::path dir = fs::path(setup.state_dir) / "bare";
  fs::create_directories(dir / name);
  ARMHIVE_ASSIGN_OR_RETURN(uint64_t size, qcow2_virtual_size(setup.image.disk.path));
  // The very guest the engine just booted (image, cmdline, vCPUs, memory, pinning), renamed.
  spec.name = name;
  spec.vm_id = "bench-bare-" + std::to_string(round);
  spec.mac.clear();
  DomainPaths paths;
  paths.overlay = (dir / (name + ".qcow2")).string();
  paths.console_log = (dir / name / "console.log").string();
  ARMHIVE_ASSIGN_OR_RETURN(std::string dom_xml, build_domain_xml(spec, paths, Accel::kTcg));
  ARMHIVE_ASSIGN_OR_RETURN(std::string vol_xml, volume_xml(name + ".qcow2", spec.base_disk, size));

  Sample s;
  const auto t0 = SteadyClock::now();
  StoragePoolHandle pool(virStoragePoolLookupByName(conn, setup.pool_name.c_str()));
  if (!pool) return libvirt_error("look up pool", setup.pool_name);
  StorageVolHandle vol(virStorageVolCreateXML(pool.get(), vol_xml.c_str(), 0));
  if (!vol) return libvirt_error("create overlay", name);
  const auto t_overlay = SteadyClock::now();
  DomainHandle dom(virDomainCreateXML(conn, dom_xml.c_str(), 0));
  if (!dom) {
    Status err = libvirt_error("start domain", name);
    virStorageVolDelete(vol.get(), 0);
    return err;
  }
  const auto t_started = SteadyClock::now();
  const int timeout_s = static_cast<int>(kAgentTimeout.count() / 1000);
  std::optional<SteadyClock::time_point> t_agent, t_addr;
  while (SteadyClock::now() - t0 < kBootTimeout && !t_addr) {
    if (!t_agent) {
      LibvirtString reply(
          virDomainQemuAgentCommand(dom.get(), R"({"execute":"guest-ping"})", timeout_s, 0));
      if (reply) {
        t_agent = SteadyClock::now();
      } else {
        virResetLastError();
      }
    }
    if (t_agent) {
      virDomainInterfacePtr* ifaces = nullptr;
      int n = virDomainInterfaceAddresses(dom.get(), &ifaces,
                                          VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE, 0);
      for (int i = 0; i < n; ++i) {
        if (ifaces[i]->naddrs > 0) t_addr = SteadyClock::now();
        virDomainInterfaceFree(ifaces[i]);
      }
      if (n >= 0) free(ifaces);  // NOLINT: libvirt allocated the array
      virResetLastError();
    }
    if (!t_addr) std::this_thread::sleep_for(kAgentPoll);
  }
  virDomainDestroy(dom.get());
  virStorageVolDelete(vol.get(), 0);
  virResetLastError();
  fs::remove_all(dir / name);
  if (!t_addr) return Status(ErrorCode::kTimeout, "bare guest not ready", name);
  s.overlay = seconds_between(t0, t_overlay);
  s.define_start = seconds_between(t_overlay, t_started);
  s.overlay_define_start = seconds_between(t0, t_started);
  s.boot = seconds_between(t_started, *t_agent);
  s.readiness = seconds_between(*t_agent, *t_addr);
  s.to_agent = seconds_between(t0, *t_agent);
  s.to_ready = seconds_between(t0, *t_addr);
  return s;
}

// armhive: one engine, one lease at a time on a min_warm 0 pool.
class ArmhiveRunner {
 public:
  static Result<std::unique_ptr<ArmhiveRunner>> open(const Setup& setup, const HostTopology& host,
                                                     bool reserve, const std::string& label) {
    std::unique_ptr<ArmhiveRunner> r(new ArmhiveRunner());
    r->dir_ = (fs::path(setup.state_dir) / label).string();
    fs::create_directories(r->dir_);
    LibvirtHypervisorOptions o;
    o.uri = setup.uri;
    o.state_dir = r->dir_ + "/vms";
    o.storage_pool = "armhive-bench-cold-" + label;
    o.accel = host.accel;
    o.reserve_addresses = reserve;
    ARMHIVE_ASSIGN_OR_RETURN(r->hv_, LibvirtHypervisor::open(o));
    r->timing_ = std::make_unique<TimingHypervisor>(*r->hv_);
    ARMHIVE_ASSIGN_OR_RETURN(r->db_, Database::open(r->dir_ + "/armhive.db"));
    ARMHIVE_ASSIGN_OR_RETURN(r->store_, SqliteLeaseStore::open(*r->db_));
    PoolConfig pool;
    pool.name = "cold-" + label;
    pool.image = "tiny";
    pool.vcpus = 1;
    pool.memory_mib = 512;
    pool.network = setup.network;
    pool.min_warm = 0;
    pool.max = 1;
    pool.max_starting = 1;
    r->pool_ = pool.name;
    r->options_.pools = {pool};
    r->options_.agent_poll = kAgentPoll;
    r->options_.agent_timeout = kAgentTimeout;
    r->options_.boot_timeout = kBootTimeout;
    r->host_ = host;
    r->image_ = setup.image;
    return r;
  }

  // A fresh engine per sample: engines reconcile every armhive domain of the host, so two must
  // never run at once, and none may run while the bare program's guest boots.
  Status start_engine() {
    ARMHIVE_ASSIGN_OR_RETURN(CoreAllocator alloc,
                             CoreAllocator::create(host_, default_cpu_sets(host_)));
    const Image image = image_;
    engine_ = std::make_unique<LeaseEngine>(
        options_, *timing_, *store_, std::move(alloc),
        [image](const std::string&) -> Result<BootImage> {
          return BootImage{image.name,        image.version, image.disk.path, image.kernel.path,
                           image.initrd.path, image.cmdline, image.login_user};
        },
        clock_, nullptr);
    ARMHIVE_RETURN_IF_ERROR(engine_->start());
    // A running daemon has finished its first reconcile pass long before a request comes.
    std::this_thread::sleep_for(std::chrono::seconds(2));
    return Status::ok();
  }
  void stop_engine() {
    if (engine_) engine_->stop();
    engine_.reset();
  }
  std::optional<VmSpec> last_spec() { return timing_->last_spec(); }

  ~ArmhiveRunner() {
    stop_engine();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  Result<Sample> run() {
    ARMHIVE_RETURN_IF_ERROR(start_engine());
    Result<Sample> s = sample();
    stop_engine();
    return s;
  }

 private:
  Result<Sample> sample() {
    LeaseRequest req;
    req.pool = pool_;
    req.owner = "bench";
    const auto t0 = SteadyClock::now();
    ARMHIVE_ASSIGN_OR_RETURN(Lease lease, engine_->create_lease(req));
    std::optional<SteadyClock::time_point> t_ready;
    while (SteadyClock::now() - t0 < kBootTimeout) {
      ARMHIVE_ASSIGN_OR_RETURN(Lease now, engine_->get_lease(lease.id));
      if (now.state == LeaseState::kReady) {
        t_ready = SteadyClock::now();
        lease = now;
        break;
      }
      if (is_terminal(now.state)) {
        return Status(ErrorCode::kUnavailable, "lease ended: " + now.reason, lease.id);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (!t_ready) return Status(ErrorCode::kTimeout, "lease not ready", lease.id);
    CallTimes t = timing_->times(lease.vm_name);
    ARMHIVE_RETURN_IF_ERROR(engine_->release_lease(lease.id).status());
    // Wait until the VM is gone so that the next guest boots on a quiet host.
    for (int i = 0; i < 600; ++i) {
      auto vms = hv_->list_vms();
      if (vms.is_ok() && vms->empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!t.create_begin || !t.create_end || !t.agent_ok || !t.address_ok) {
      return internal_error("the engine skipped a phase", lease.vm_name);
    }
    Sample s;
    s.queue = seconds_between(t0, *t.create_begin);
    s.overlay_define_start = seconds_between(*t.create_begin, *t.create_end);
    s.boot = seconds_between(*t.create_end, *t.agent_ok);
    s.readiness = seconds_between(*t.agent_ok, *t.address_ok);
    s.to_agent = seconds_between(t0, *t.agent_ok);
    s.to_ready = seconds_between(t0, *t_ready);
    return s;
  }

  ArmhiveRunner() = default;
  std::string dir_;
  std::string pool_;
  EngineOptions options_;
  HostTopology host_;
  Image image_;
  SystemClock clock_;
  std::unique_ptr<LibvirtHypervisor> hv_;
  std::unique_ptr<TimingHypervisor> timing_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<SqliteLeaseStore> store_;
  std::unique_ptr<LeaseEngine> engine_;
};

json spread_json(const std::vector<double>& v) {
  SampleSpread s = compute_spread(v);
  return {{"n", s.n},     {"median", s.median}, {"min", s.min},
          {"max", s.max}, {"cv", s.cv},         {"values", v}};
}

int run(const std::string& catalog_dir, int rounds, const std::string& out, const std::string& uri,
        const std::string& state_dir, const std::string& commit) {
  auto fail = [](const Status& s) {
    std::cerr << "bench: " << s.to_string() << "\n";
    return 1;
  };
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

  // A clean slate: an interrupted run leaves its databases, whose pending leases an engine
  // would recover and serve first.
  std::error_code ec;
  fs::remove_all(state_dir, ec);
  Setup setup{*image, "armhive-bench-cold", state_dir, "armhive-bench-cold-bare", uri};
  const NetworkSpec net{setup.network, "ahbcold0",    "10.79.0.1/24",
                        "10.79.0.10",  "10.79.0.100", 1500};
  fs::create_directories(fs::path(state_dir) / "bare");
  if (Status s = ensure_network(*conn, net); !s.is_ok()) return fail(s);
  int rc = 0;
  {
    auto pool = ensure_dir_pool(*conn, setup.pool_name, (fs::path(state_dir) / "bare").string());
    if (!pool.is_ok()) return fail(pool.status());
    auto with = ArmhiveRunner::open(setup, *host, true, "armhive");
    auto without = ArmhiveRunner::open(setup, *host, false, "armhive-dhcp");
    if (!with.is_ok() || !without.is_ok()) {
      rc = fail(with.is_ok() ? without.status() : with.status());
    } else {
      std::map<std::string, std::vector<Sample>> samples;
      ConnectPtr raw = conn->get().value();
      for (int round = 0; round < rounds && rc == 0; ++round) {
        for (const char* mode : {"armhive", "armhive-dhcp", "bare"}) {
          const std::string m = mode;
          std::optional<VmSpec> spec = (*without)->last_spec();
          Result<Sample> s = m == "armhive"        ? (*with)->run()
                             : m == "armhive-dhcp" ? (*without)->run()
                             : spec                ? run_bare(setup, raw.get(), round, *spec)
                                    : Result<Sample>(internal_error("no VmSpec recorded"));
          if (!s.is_ok()) {
            rc = fail(s.status().annotate(mode));
            break;
          }
          std::cerr << "round " << round << " " << mode << ": to agent " << s->to_agent
                    << " s, ready " << s->to_ready << " s\n";
          samples[mode].push_back(*s);
        }
      }
      if (rc == 0) {
        json modes = json::object();
        for (const auto& [mode, list] : samples) {
          json m = json::object();
          for (const char* key : {"overlay_s", "define_start_s", "create_s", "queue_s", "boot_s",
                                  "readiness_s", "to_agent_s", "to_ready_s"}) {
            std::vector<double> v;
            for (const Sample& s : list) v.push_back(sample_json(s)[key].get<double>());
            m[key] = spread_json(v);
          }
          modes[mode] = m;
        }
        // Per round ratios (side by side), then their median.
        std::vector<double> agent_ratio, agent_added;
        for (size_t i = 0; i < samples["bare"].size(); ++i) {
          agent_ratio.push_back(samples["armhive"][i].to_agent / samples["bare"][i].to_agent);
          agent_added.push_back(samples["armhive"][i].to_agent - samples["bare"][i].to_agent);
        }
        char hostname[256] = {};
        gethostname(hostname, sizeof hostname - 1);
        json doc = {
            {"benchmark", "cold_lease_vs_bare_libvirt"},
            {"machine",
             {{"hostname", hostname},
              {"cpus", host->cpus.size()},
              {"accel", host->accel == Accel::kKvm ? "kvm" : "tcg (EMULATED)"},
              {"memory_kib", host->memory_kib}}},
            {"commit", commit},
            {"command",
             "armhive-bench-cold --catalog " + catalog_dir + " --rounds " + std::to_string(rounds)},
            {"image", {{"name", image->name}, {"version", image->version}}},
            {"agent_poll_ms", kAgentPoll.count()},
            {"rounds", rounds},
            {"modes", modes},
            {"armhive_over_bare_to_agent", spread_json(agent_ratio)},
            {"armhive_minus_bare_to_agent_s", spread_json(agent_added)},
            {"goal", "armhive adds <= 5 % or <= 50 ms (whichever is larger) to request -> agent"}};
        if (out.empty()) {
          std::cout << doc.dump(2) << "\n";
        } else {
          std::ofstream f(out);
          f << doc.dump(2) << "\n";
        }
      }
    }
    ConnectPtr raw = conn->get().value();
    StoragePoolHandle p(virStoragePoolLookupByName(raw.get(), setup.pool_name.c_str()));
    if (p && virStoragePoolIsActive(p.get()) == 1) virStoragePoolDestroy(p.get());
    virResetLastError();
  }
  (void)remove_network(*conn, net.name);
  fs::remove_all(state_dir, ec);
  return rc;
}

}  // namespace
}  // namespace armhive

int main(int argc, char** argv) {
  CLI::App app{"cold lease vs bare libvirt"};
  std::string catalog, out, commit;
  std::string uri = "qemu:///system";
  std::string state_dir = (std::filesystem::temp_directory_path() / "armhive-bench-cold").string();
  int rounds = 5;
  app.add_option("--catalog", catalog, "image catalogue with the tiny image")->required();
  app.add_option("--rounds", rounds, "samples per mode (interleaved)");
  app.add_option("--out", out, "JSON result file (default stdout)");
  app.add_option("--uri", uri);
  app.add_option("--state-dir", state_dir);
  app.add_option("--commit", commit, "commit recorded in the JSON");
  CLI11_PARSE(app, argc, argv);
  if (rounds < 2) {
    std::cerr << "bench: --rounds must be at least 2\n";
    return 2;
  }
  return armhive::run(catalog, rounds, out, uri, state_dir, commit);
}
