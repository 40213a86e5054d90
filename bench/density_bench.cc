// Density and overhead (issue 17 item 6): host memory per VM beyond guest RAM, armhived's own
// cost idle and with live leases, and how many tiny VMs a host holds.
//
//   armhive-bench-density [--catalog DIR] [--vms 1,4,8] [--memory-mib 512] [--leases 50]
//                         [--idle-s 10] [--out FILE.json]
//
// armhived's own cost (always): a child process of this program runs armhived's stack without
// libvirt (HttpServer, LeaseEngine, SQLite file, token store, metrics, their timers) over the
// in-memory hypervisor; its RSS (/proc/PID/status) and CPU (utime + stime of /proc/PID/stat
// over --idle-s) are read idle with a warm pool of 2, then again with --leases live leases.
//
// QEMU's per-VM cost (--catalog, real tiny-image guests, run inside scripts/libvirt-sandbox):
// for each N of --vms, a LeaseEngine keeps a warm pool of N 1-vCPU VMs (shared set = every CPU
// but the first, overcommit N); once all are warm and have idled for --idle-s, every QEMU
// process is read: VmRSS/RssAnon/RssFile/VmPTE (status), Rss/Pss (smaps_rollup), and in
// /proc/PID/smaps the resident part of the guest-RAM mapping (the anonymous mapping of exactly
// the guest's memory size) and of TCG's translation buffer (the largest other mapping of at
// least 256 MiB; absent under KVM). Host memory beyond guest RAM = Pss - guest RAM resident;
// least squares over N give the per-VM slope of the sum.
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "daemon/core/cpu_sets.h"
#include "daemon/engine/lease_engine.h"
#include "daemon/http/server.h"
#include "daemon/images/catalog.h"
#include "daemon/store/sqlite_lease_store.h"
#include "daemon/store/token_store.h"
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

// The storage pool the benchmark's LibvirtHypervisor made is transient: destroying it removes
// it, so that a later run with another --state-dir in the same libvirtd does not conflict.
void drop_storage_pool(const Connection& conn, const char* name) {
  auto raw = conn.get();
  if (!raw.is_ok()) return;
  StoragePoolHandle p(virStoragePoolLookupByName(raw->get(), name));
  if (p && virStoragePoolIsActive(p.get()) == 1) virStoragePoolDestroy(p.get());
  virResetLastError();
}

// "Key:   123 kB" fields of a /proc file, in KiB.
std::map<std::string, int64_t> kib_fields(const std::string& path) {
  std::map<std::string, int64_t> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream rest(line.substr(colon + 1));
    int64_t v = 0;
    if (rest >> v) out[line.substr(0, colon)] = v;
  }
  return out;
}

// utime + stime of a process, in seconds.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; rest >> field; ++i) {  // field 3 is the state
    if (i == 14) utime = std::stod(field);
    if (i == 15) {
      stime = std::stod(field);
      break;
    }
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The resident KiB of the guest-RAM mapping (anonymous, Size == guest_kib) and of the largest
// other mapping of at least 256 MiB (TCG's translation buffer).
struct Mappings {
  int64_t guest_ram_rss = 0;
  int64_t guest_ram_size = 0;
  int64_t tcg_buffer_rss = 0;
  int64_t tcg_buffer_size = 0;
};

Mappings big_mappings(pid_t pid, int64_t guest_kib) {
  Mappings m;
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps");
  int64_t size = 0;
  bool anonymous = false;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') < line.find(' ')) {
      // "start-end perms offset dev inode [path]": anonymous when there is no path.
      std::istringstream f(line);
      std::string range, perms, off, dev, inode, path;
      f >> range >> perms >> off >> dev >> inode >> path;
      anonymous = path.empty();
      size = 0;
      continue;
    }
    std::istringstream f(line);
    std::string key;
    int64_t v = 0;
    if (!(f >> key >> v)) continue;
    if (key == "Size:") size = v;
    if (key != "Rss:") continue;
    if (anonymous && size == guest_kib && m.guest_ram_size == 0) {
      m.guest_ram_size = size;
      m.guest_ram_rss = v;
    } else if (size >= 256 * 1024 && size > m.tcg_buffer_size) {
      m.tcg_buffer_size = size;
      m.tcg_buffer_rss = v;
    }
  }
  return m;
}

json process_json(pid_t pid) {
  auto st = kib_fields("/proc/" + std::to_string(pid) + "/status");
  auto roll = kib_fields("/proc/" + std::to_string(pid) + "/smaps_rollup");
  return {{"vm_rss_kib", st["VmRSS"]},       {"rss_anon_kib", st["RssAnon"]},
          {"rss_file_kib", st["RssFile"]},   {"rss_shmem_kib", st["RssShmem"]},
          {"vm_pte_kib", st["VmPTE"]},       {"threads", st["Threads"]},
          {"pss_kib", roll["Pss"]},          {"pss_anon_kib", roll["Pss_Anon"]},
          {"pss_file_kib", roll["Pss_File"]}};
}

double cpu_share(pid_t pid, double seconds) {
  double c0 = cpu_seconds(pid);
  auto t0 = SteadyClock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  double wall = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  return (cpu_seconds(pid) - c0) / wall;
}

// Least squares y = a + b x.
std::pair<double, double> fit(const std::vector<double>& x, const std::vector<double>& y) {
  double n = static_cast<double>(x.size()), sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  double d = n * sxx - sx * sx;
  if (d == 0) return {0, 0};
  double b = (n * sxy - sx * sy) / d;
  return {(sy - b * sx) / n, b};
}

// ---- child: armhived's stack over the in-memory hypervisor ------------------------------

int serve_engine(int leases) {
  FakeHypervisor hypervisor;
  hypervisor.pings_until_ready = 1;
  SystemClock clock;
  Metrics metrics;
  std::string dir =
      (fs::temp_directory_path() / ("armhive-bench-density-" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto fail = [&](const Status& s) {
    std::cerr << "bench: " << s.to_string() << "\n";
    fs::remove_all(dir);
    return 1;
  };
  auto db = Database::open(dir + "/armhive.db");
  if (!db.is_ok()) return fail(db.status());
  auto store = SqliteLeaseStore::open(**db);
  auto tokens = TokenStore::open(**db, clock);
  auto audit = AuditLog::open(**db, clock);
  if (!store.is_ok() || !tokens.is_ok() || !audit.is_ok()) return fail(internal_error("stores"));
  PoolConfig pool;
  pool.name = "ci";
  pool.image = "tiny";
  pool.vcpus = 1;
  pool.min_warm = 2;
  pool.max = leases + 4;
  pool.max_starting = 4;
  EngineOptions options;
  options.pools = {pool};
  HostTopology host = thunderx_2s_topology();  // 94 dedicated CPUs: room for the leases
  auto alloc = CoreAllocator::create(host, default_cpu_sets(host));
  if (!alloc.is_ok()) return fail(alloc.status());
  LeaseEngine engine(
      options, hypervisor, **store, std::move(alloc).value(),
      [](const std::string& name) -> Result<BootImage> {
        return BootImage{name, "1", "/i/disk.qcow2", "/i/vmlinuz", "/i/initrd", "", "root"};
      },
      clock, &metrics);
  if (Status s = engine.start(); !s.is_ok()) return fail(s);
  auto tokens_ok = (*tokens)->create({"bench", TokenRole::kCi, 0, Seconds(0)});
  if (!tokens_ok.is_ok()) return fail(tokens_ok.status());
  HttpOptions http;
  http.port = 0;
  HttpServer server(http, engine, nullptr, **tokens, **audit, metrics);
  if (Status s = server.start(); !s.is_ok()) return fail(s);
  auto warm = [&] { return engine.pools()[0].warm; };
  for (int i = 0; i < 10000 && warm() < pool.min_warm; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::cout << "ready" << std::endl;
  for (std::string line; std::getline(std::cin, line);) {
    if (line != "lease") continue;
    int ready = 0;
    for (int i = 0; i < leases; ++i) {
      LeaseRequest r;
      r.pool = "ci";
      r.owner = "bench";
      r.ssh_keys = {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDensityBenchKeyOnlyForTheBenchmark00 b"};
      auto l = engine.create_lease(r);
      if (!l.is_ok()) return fail(l.status());
      auto w = engine.wait_lease(l->id, std::chrono::seconds(10));
      ready += w.is_ok() && w->state == LeaseState::kReady ? 1 : 0;
    }
    std::cout << "leased " << ready << std::endl;
  }
  server.stop();
  engine.stop();
  fs::remove_all(dir);
  return 0;
}

// ---- parent ------------------------------------------------------------------------------

Result<json> measure_engine(const std::string& self, int leases, double idle_s) {
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) return internal_error("pipe");
  pid_t pid = fork();
  if (pid < 0) return internal_error("fork");
  if (pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    close(to_child[1]);
    close(from_child[0]);
    std::string n = std::to_string(leases);
    execl(self.c_str(), self.c_str(), "--serve-engine", "--leases", n.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  FILE* in = fdopen(from_child[0], "r");
  auto read_line = [&]() {
    char buf[256] = {};
    if (!fgets(buf, sizeof buf, in)) return std::string();
    return std::string(buf);
  };
  auto finish = [&](Status s) -> Result<json> {
    close(to_child[1]);
    fclose(in);
    int status = 0;
    waitpid(pid, &status, 0);
    return s;
  };
  if (read_line().rfind("ready", 0) != 0) {
    return finish(internal_error("the engine child did not start"));
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // first reconcile and timers settle
  json idle = process_json(pid);
  idle["cpu_share"] = cpu_share(pid, idle_s);
  if (write(to_child[1], "lease\n", 6) != 6) return finish(internal_error("write to child"));
  std::string leased = read_line();
  if (leased.rfind("leased ", 0) != 0) return finish(internal_error("the leases failed"));
  int ready = std::stoi(leased.substr(7));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  json busy = process_json(pid);
  busy["cpu_share"] = cpu_share(pid, idle_s);
  busy["ready_leases"] = ready;
  Result<json> out =
      json{{"what",
            "armhived's stack (HTTP, engine, SQLite, tokens, metrics) over the in-memory "
            "hypervisor, one process"},
           {"idle_warm_pool_2", idle},
           {"with_live_leases", busy},
           {"live_leases", leases}};
  close(to_child[1]);
  fclose(in);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

Result<json> measure_guests(const std::string& catalog_dir, const std::vector<int>& counts,
                            int memory_mib, double idle_s, const std::string& state_dir) {
  ARMHIVE_ASSIGN_OR_RETURN(auto catalog, ImageCatalog::open(catalog_dir));
  ARMHIVE_ASSIGN_OR_RETURN(Image image, catalog.find("tiny"));
  ARMHIVE_RETURN_IF_ERROR(catalog.verify(image));
  ARMHIVE_ASSIGN_OR_RETURN(auto loop, EventLoop::start());
  ARMHIVE_ASSIGN_OR_RETURN(auto conn, Connection::open("qemu:///system"));
  ARMHIVE_ASSIGN_OR_RETURN(HostTopology host, discover_host(conn, {}));
  if (host.cpus.size() < 2) return Status(ErrorCode::kUnavailable, "needs 2 CPUs");
  std::error_code ec;
  fs::remove_all(state_dir, ec);
  const NetworkSpec net{"armhive-bench-density", "ahbdens0", "10.84.0.1/24", "10.84.0.10",
                        "10.84.0.250",           1500};
  ARMHIVE_RETURN_IF_ERROR(ensure_network(conn, net));
  CpuSets sets;
  for (const auto& c : host.cpus) {
    (c.id == host.cpus.front().id ? sets.housekeeping : sets.shared).push_back(c.id);
  }
  json runs = json::array();
  Status failure = Status::ok();
  for (int n : counts) {
    LibvirtHypervisorOptions o;
    o.uri = "qemu:///system";
    o.state_dir = state_dir + "/vms";
    o.storage_pool = "armhive-bench-density";
    o.accel = host.accel;
    auto lv = LibvirtHypervisor::open(o);
    if (!lv.is_ok()) {
      failure = lv.status();
      break;
    }
    fs::create_directories(state_dir + "/db");
    auto db = Database::open(state_dir + "/db/armhive-" + std::to_string(n) + ".db");
    if (!db.is_ok()) {
      failure = db.status();
      break;
    }
    auto store = SqliteLeaseStore::open(**db);
    if (!store.is_ok()) {
      failure = store.status();
      break;
    }
    PoolConfig pool;
    pool.name = "density";
    pool.image = "tiny";
    pool.vcpus = 1;
    pool.memory_mib = static_cast<uint64_t>(memory_mib);
    pool.network = net.name;
    pool.min_warm = n;
    pool.max = n;
    pool.max_starting = 2;
    pool.cpu_policy = CpuPolicy::kShared;
    pool.overcommit = n;
    EngineOptions options;
    options.pools = {pool};
    options.boot_timeout = std::chrono::minutes(8);
    auto alloc = CoreAllocator::create(host, sets);
    if (!alloc.is_ok()) {
      failure = alloc.status();
      break;
    }
    auto mem_before = kib_fields("/proc/meminfo");
    SystemClock clock;
    const Image img = image;
    auto engine = std::make_unique<LeaseEngine>(
        options, **lv, **store, std::move(alloc).value(),
        [img](const std::string&) -> Result<BootImage> {
          return BootImage{img.name,        img.version, img.disk.path, img.kernel.path,
                           img.initrd.path, img.cmdline, img.login_user};
        },
        clock, nullptr);
    if (Status s = engine->start(); !s.is_ok()) {
      failure = s;
      break;
    }
    const auto t0 = SteadyClock::now();
    bool warm = false;
    while (SteadyClock::now() - t0 < std::chrono::minutes(15)) {
      auto p = engine->pools();
      if (!p.empty() && p[0].warm == n && p[0].starting == 0) {
        warm = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    double boot_all_s = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    std::cerr << "density: " << n << " VMs warm=" << warm << " after " << boot_all_s << " s\n";
    json vms = json::array();
    if (warm) {
      std::this_thread::sleep_for(std::chrono::duration<double>(idle_s));  // boots settle
      auto listed = (*lv)->list_vms();
      std::vector<pid_t> pids;
      if (listed.is_ok()) {
        for (const VmInfo& vm : *listed) {
          if (vm.pool != pool.name || vm.qemu_pid <= 0) continue;
          pids.push_back(static_cast<pid_t>(vm.qemu_pid));
        }
      }
      // CPU of all QEMUs over the same window.
      std::vector<double> c0;
      for (pid_t p : pids) c0.push_back(cpu_seconds(p));
      auto w0 = SteadyClock::now();
      std::this_thread::sleep_for(std::chrono::duration<double>(idle_s));
      double wall = std::chrono::duration<double>(SteadyClock::now() - w0).count();
      for (size_t i = 0; i < pids.size(); ++i) {
        json j = process_json(pids[i]);
        Mappings m = big_mappings(pids[i], static_cast<int64_t>(memory_mib) * 1024);
        j["guest_ram_size_kib"] = m.guest_ram_size;
        j["guest_ram_rss_kib"] = m.guest_ram_rss;
        j["tcg_buffer_size_kib"] = m.tcg_buffer_size;
        j["tcg_buffer_rss_kib"] = m.tcg_buffer_rss;
        j["beyond_guest_ram_pss_kib"] = j["pss_kib"].get<int64_t>() - m.guest_ram_rss;
        j["cpu_share_idle"] = (cpu_seconds(pids[i]) - c0[i]) / wall;
        vms.push_back(j);
      }
    }
    auto mem_after = kib_fields("/proc/meminfo");
    engine->stop();
    engine.reset();
    if (auto listed = (*lv)->list_vms(); listed.is_ok()) {
      for (const VmInfo& vm : *listed) {
        if (vm.pool == pool.name) (void)(*lv)->destroy_vm(vm.name);
      }
    }
    if (!warm) {
      failure = Status(ErrorCode::kTimeout, "the pool did not become warm", std::to_string(n));
      break;
    }
    runs.push_back(
        {{"vms", n},
         {"boot_all_s", boot_all_s},
         {"mem_available_drop_kib", mem_before["MemAvailable"] - mem_after["MemAvailable"]},
         {"qemu", vms}});
  }
  drop_storage_pool(conn, "armhive-bench-density");
  (void)remove_network(conn, net.name);
  fs::remove_all(state_dir, ec);
  if (!failure.is_ok()) return failure;
  return json{{"runs", runs},
              {"memory_mib", memory_mib},
              {"host",
               {{"cpus", host.cpus.size()},
                {"memory_kib", host.memory_kib},
                {"accel", host.accel == Accel::kKvm ? "kvm" : "tcg (EMULATED)"}}}};
}

// Per-VM slopes over the runs and the capacity estimate.
json summarise(json& guests, const json& engine, int memory_mib) {
  std::vector<double> x, pss, beyond, beyond_no_tcg, pte, cpu;
  for (const auto& run : guests["runs"]) {
    double s_pss = 0, s_beyond = 0, s_no_tcg = 0, s_pte = 0, s_cpu = 0;
    for (const auto& q : run["qemu"]) {
      s_pss += q["pss_kib"].get<double>();
      s_beyond += q["beyond_guest_ram_pss_kib"].get<double>();
      s_no_tcg +=
          q["beyond_guest_ram_pss_kib"].get<double>() - q["tcg_buffer_rss_kib"].get<double>();
      s_pte += q["vm_pte_kib"].get<double>();
      s_cpu += q["cpu_share_idle"].get<double>();
    }
    x.push_back(run["vms"].get<double>());
    pss.push_back(s_pss / 1024);
    beyond.push_back(s_beyond / 1024);
    beyond_no_tcg.push_back(s_no_tcg / 1024);
    pte.push_back(s_pte / 1024);
    cpu.push_back(s_cpu);
  }
  auto line = [&](const std::vector<double>& y) {
    auto [a, b] = fit(x, y);
    return json{{"per_vm", b}, {"fixed", a}, {"sums", y}};
  };
  json fits = {{"pss_mib", line(pss)},
               {"beyond_guest_ram_mib", line(beyond)},
               {"beyond_guest_ram_without_tcg_buffer_mib", line(beyond_no_tcg)},
               {"vm_pte_mib", line(pte)},
               {"cpu_share_idle", line(cpu)}};
  guests["fits"] = fits;
  // Capacity of this host: memory after the host's own 1 GiB and armhived's RSS.
  double host_mib = guests["host"]["memory_kib"].get<double>() / 1024;
  double armhived_mib = engine["with_live_leases"]["vm_rss_kib"].get<double>() / 1024;
  double usable = host_mib - 1024 - armhived_mib;
  double beyond_vm = fits["beyond_guest_ram_mib"]["per_vm"].get<double>();
  double pss_vm = fits["pss_mib"]["per_vm"].get<double>();
  double cpu_vm = fits["cpu_share_idle"]["per_vm"].get<double>();
  double shared_cpus = guests["host"]["cpus"].get<double>() - 1;
  return {
      {"host_memory_mib", host_mib},
      {"reserved_mib", {{"host", 1024}, {"armhived", armhived_mib}}},
      {"per_vm_if_guest_ram_fully_used_mib", memory_mib + beyond_vm},
      {"vms_if_guest_ram_fully_used", static_cast<int>(usable / (memory_mib + beyond_vm))},
      {"per_vm_as_measured_idle_tiny_mib", pss_vm},
      {"vms_by_memory_as_measured", pss_vm > 0 ? static_cast<int>(usable / pss_vm) : 0},
      {"idle_cpu_per_vm", cpu_vm},
      {"vms_by_idle_cpu_on_shared_cpus", cpu_vm > 0 ? static_cast<int>(shared_cpus / cpu_vm) : 0}};
}

}  // namespace
}  // namespace armhive

int main(int argc, char** argv) {
  CLI::App app{"density and overhead: QEMU per VM, armhived idle and with live leases"};
  std::string catalog, out, commit;
  std::string state_dir =
      (std::filesystem::temp_directory_path() / "armhive-bench-density").string();
  std::vector<int> vms = {1, 4, 8};
  int memory_mib = 512, leases = 50;
  double idle_s = 10;
  bool serve = false;
  app.add_option("--catalog", catalog, "image catalogue with the tiny image: real guests");
  app.add_option("--vms", vms, "warm pool sizes to measure")->delimiter(',');
  app.add_option("--memory-mib", memory_mib, "guest RAM of each VM");
  app.add_option("--leases", leases, "live leases for armhived's cost");
  app.add_option("--idle-s", idle_s, "seconds of each CPU sample");
  app.add_option("--out", out, "JSON result file (default stdout)");
  app.add_option("--state-dir", state_dir);
  app.add_option("--commit", commit, "commit recorded in the JSON");
  app.add_flag("--serve-engine", serve, "internal: the child that runs armhived's stack");
  CLI11_PARSE(app, argc, argv);
  if (serve) return armhive::serve_engine(leases);
  if (vms.size() < 2 && !catalog.empty()) {
    std::cerr << "bench: --vms needs at least two sizes for the fit\n";
    return 2;
  }
  auto engine = armhive::measure_engine(argv[0], leases, idle_s);
  if (!engine.is_ok()) {
    std::cerr << "bench: " << engine.status().to_string() << "\n";
    return 1;
  }
  char hostname[256] = {};
  gethostname(hostname, sizeof hostname - 1);
  std::ostringstream vms_list;
  for (size_t i = 0; i < vms.size(); ++i) vms_list << (i ? "," : "") << vms[i];
  nlohmann::json doc = {
      {"benchmark", "density_and_overhead"},
      {"machine", {{"hostname", hostname}}},
      {"commit", commit},
      {"command", "armhive-bench-density" + (catalog.empty() ? "" : " --catalog " + catalog) +
                      " --vms " + vms_list.str() + " --memory-mib " + std::to_string(memory_mib) +
                      " --leases " + std::to_string(leases)},
      {"armhived", *engine},
      {"qemu_known_overhead_mib", 30}};
  if (!catalog.empty()) {
    auto guests = armhive::measure_guests(catalog, vms, memory_mib, idle_s, state_dir);
    if (!guests.is_ok()) {
      std::cerr << "bench: " << guests.status().to_string() << "\n";
      return 1;
    }
    doc["capacity"] = armhive::summarise(*guests, *engine, memory_mib);
    doc["guests"] = *guests;
  }
  if (out.empty()) {
    std::cout << doc.dump(2) << "\n";
  } else {
    std::ofstream(out) << doc.dump(2) << "\n";
  }
  return 0;
}
