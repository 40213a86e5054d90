// Pinned vs unpinned run-to-run spread of the in-guest zstd benchmark.
//
//   armhive-bench-pinning --catalog DIR [--samples N] [--out FILE.json] [--uri URI]
//                         [--state-dir DIR] [--no-noise] [--noise-seed S]
//
// Must run inside the sandbox network namespace (scripts/libvirt-sandbox run --name pinning --).
// In one run, side by side, two 1-vCPU guests of the catalogue's "tiny" image stay booted for
// the whole run:
//   A "pinned":   the armhive way, vCPU 0 on a dedicated host CPU (the last one), QEMU's emulator
//                 threads on the housekeeping CPU (the first one);
//   B "unpinned": no <vcpupin>, no <emulatorpin>: QEMU may run anywhere.
// Samples are interleaved A, B, A, B, ...: each is `zstd -b3 -T1 -i1 CORPUS` run in the guest
// through the guest agent and parsed with parse_zstd_bench. One unrecorded warm-up run per VM
// first (it pulls the corpus into the guest's page cache).
//
// Host noise: while samples are taken, a thread of this process pinned (sched_setaffinity) to
// the housekeeping CPU does bursts of busy work: every 100 ms period it spins for a duty cycle
// drawn uniformly from [10 %, 90 %] (mt19937, --noise-seed) and sleeps for the rest. That is
// the host housekeeping work armhive confines to the housekeeping set. The rest of this process
// (libvirt client, event loop) is confined to the housekeeping CPU too, as armhived would be.
//
// Diagnostics per sample, read from the host: the vCPU thread's run-queue wait
// (/proc/PID/task/TID/schedstat, second field: time runnable but not running) and which host
// CPUs it was seen on (sampled every 20 ms from /proc/PID/task/TID/stat, field 39).
//
// Every figure is EMULATED when the host has no KVM for aarch64 (QEMU TCG, cortex-a72): the JSON
// says so. Both VMs, their overlays and per-VM files, the storage pool, the network and the state
// directory are removed on every exit path (errors, SIGINT/SIGTERM between samples included).
// Results: bench/results/pinning-<date>.json, summarised in BENCHMARKS.md.
//
// One file of ~750 lines, on purpose: it is one experiment read top to bottom, and its /proc
// probes, noise generator and sampler serve no other program (daemon/bench owns the reusable
// parsers and statistics it calls).

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <sched.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/utc_time.h"
#include "daemon/bench/stats.h"
#include "daemon/bench/zstd_parser.h"
#include "daemon/images/catalog.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/host_discovery.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "daemon/virt/network.h"
#include "daemon/virt/xml.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// Set by SIGINT/SIGTERM; checked between samples so that cleanup still runs.
volatile std::sig_atomic_t g_interrupted = 0;  // NOLINT: a signal flag must be a global
extern "C" void on_signal(int /*sig*/) { g_interrupted = 1; }

constexpr int kZstdLevel = 3;
constexpr std::chrono::milliseconds kNoisePeriod{100};
constexpr double kNoiseMinDuty = 0.10;
constexpr double kNoiseMaxDuty = 0.90;
constexpr std::chrono::milliseconds kCpuSamplePeriod{20};

struct Options {
  std::string catalog;
  int samples = 10;
  std::string out;
  std::string uri = "qemu:///system";
  std::string state_dir = (fs::temp_directory_path() / "armhive-bench-pinning").string();
  bool noise = true;
  uint32_t noise_seed = 20260130;
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// tid 0: the calling thread.
Status pin_thread_to(int cpu, pid_t tid = 0) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(tid, sizeof set, &set) != 0) {
    return unavailable("sched_setaffinity", "CPU " + std::to_string(cpu));
  }
  return Status::ok();
}

// Every thread this process has now (the libvirt event loop included); later threads inherit.
Status pin_process_to(int cpu) {
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/self/task", ec)) {
    pid_t tid = static_cast<pid_t>(std::stol(task.path().filename().string()));
    ARMHIVE_RETURN_IF_ERROR(pin_thread_to(cpu, tid));
  }
  if (ec) return unavailable("cannot list /proc/self/task: " + ec.message());
  return Status::ok();
}

std::string cpus_allowed(const fs::path& task) {
  std::istringstream in(read_text(task / "status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      std::string v = line.substr(line.find(':') + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return "";
}

// Field 39 of /proc/.../stat: the CPU the task last ran on; -1 if unreadable.
int last_cpu(const fs::path& task) {
  std::string stat = read_text(task / "stat");
  size_t close = stat.rfind(')');  // comm may contain spaces: fields start after ')'
  if (close == std::string::npos) return -1;
  std::istringstream in(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 39; ++i) {  // the state is field 3
    if (!(in >> field)) return -1;
  }
  try {
    return std::stoi(field);
  } catch (const std::exception&) {
    return -1;
  }
}

// {run time ns, run-queue wait ns} from schedstat; zeros if unavailable.
std::pair<uint64_t, uint64_t> schedstat(const fs::path& task) {
  std::istringstream in(read_text(task / "schedstat"));
  uint64_t run = 0, wait = 0;
  in >> run >> wait;
  return {run, wait};
}

// Per-CPU jiffies from /proc/stat: {cpu id -> {busy, idle (incl. iowait), steal}}.
struct CpuTimes {
  uint64_t busy = 0, idle = 0, steal = 0;
};
std::map<int, CpuTimes> read_cpu_times() {
  std::map<int, CpuTimes> out;
  std::istringstream in(read_text("/proc/stat"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream f(line.substr(3));
    int id = -1;
    uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    f >> id >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    out[id] = {user + nice + system + irq + softirq, idle + iowait, steal};
  }
  return out;
}

// Share of each host CPU's time between two /proc/stat readings, in percent.
json cpu_usage_json(const std::map<int, CpuTimes>& a, const std::map<int, CpuTimes>& b) {
  json out = json::object();
  for (const auto& [id, end] : b) {
    auto it = a.find(id);
    if (it == a.end()) continue;
    const double busy = static_cast<double>(end.busy - it->second.busy);
    const double idle = static_cast<double>(end.idle - it->second.idle);
    const double steal = static_cast<double>(end.steal - it->second.steal);
    const double total = busy + idle + steal;
    if (total <= 0) continue;
    out[std::to_string(id)] = {{"busy_pct", 100 * busy / total},
                               {"idle_pct", 100 * idle / total},
                               {"steal_pct", 100 * steal / total}};
  }
  return out;
}

// The QEMU threads of one VM, found from its pid.
struct QemuThreads {
  int64_t pid = 0;
  fs::path vcpu;  // /proc/PID/task/TID of "CPU 0/TCG" (or /KVM)
  fs::path main;  // the emulator's main thread
};

Result<QemuThreads> find_threads(int64_t pid) {
  QemuThreads t;
  t.pid = pid;
  t.main = fs::path("/proc") / std::to_string(pid) / "task" / std::to_string(pid);
  std::error_code ec;
  for (const auto& task :
       fs::directory_iterator(fs::path("/proc") / std::to_string(pid) / "task", ec)) {
    if (read_text(task.path() / "comm").rfind("CPU 0/", 0) == 0) t.vcpu = task.path();
  }
  if (ec) return unavailable("cannot list QEMU threads: " + ec.message(), std::to_string(pid));
  if (t.vcpu.empty()) return not_found("vCPU thread of QEMU", std::to_string(pid));
  return t;
}

// Housekeeping noise: one thread pinned to `cpu`, bursts of spinning with a varying duty cycle.
class NoiseGenerator {
 public:
  NoiseGenerator(int cpu, uint32_t seed) : cpu_(cpu), seed_(seed) {}
  ~NoiseGenerator() noexcept { stop(); }
  NoiseGenerator(const NoiseGenerator&) = delete;
  NoiseGenerator& operator=(const NoiseGenerator&) = delete;

  void start() {
    thread_ = std::thread([this] { run(); });
  }
  void stop() noexcept {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  json summary() const {
    std::lock_guard lock(mu_);
    double wall = busy_s_ + idle_s_;
    return {{"cpu", cpu_},
            {"pinned", pinned_},
            {"period_ms", kNoisePeriod.count()},
            {"duty_min", kNoiseMinDuty},
            {"duty_max", kNoiseMaxDuty},
            {"seed", seed_},
            {"periods", periods_},
            {"busy_s", busy_s_},
            {"achieved_busy_fraction", wall > 0 ? busy_s_ / wall : 0.0}};
  }

 private:
  void run() {
    bool pinned = pin_thread_to(cpu_).is_ok();
    std::mt19937 rng(seed_);
    std::uniform_real_distribution<double> duty(kNoiseMinDuty, kNoiseMaxDuty);
    volatile uint64_t sink = 0;
    std::unique_lock lock(mu_);
    pinned_ = pinned;
    while (!stopping_) {
      lock.unlock();
      const auto t0 = SteadyClock::now();
      const auto busy_until =
          t0 + std::chrono::duration_cast<SteadyClock::duration>(kNoisePeriod * duty(rng));
      uint64_t x = 88172645463325252ULL;
      while (SteadyClock::now() < busy_until) {
        for (int i = 0; i < 4096; ++i) {  // xorshift: keeps the core's ALUs busy
          x ^= x << 13;
          x ^= x >> 7;
          x ^= x << 17;
        }
        sink = sink + x;
      }
      const auto t1 = SteadyClock::now();
      lock.lock();
      cv_.wait_until(lock, t0 + kNoisePeriod, [this] { return stopping_; });
      busy_s_ += std::chrono::duration<double>(t1 - t0).count();
      idle_s_ += std::chrono::duration<double>(SteadyClock::now() - t1).count();
      ++periods_;
    }
  }

  const int cpu_;
  const uint32_t seed_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool pinned_ = false;
  double busy_s_ = 0;
  double idle_s_ = 0;
  int64_t periods_ = 0;
  std::thread thread_;
};

// Counts the host CPUs a vCPU thread is seen on while one sample runs.
class CpuSampler {
 public:
  explicit CpuSampler(fs::path task) : task_(std::move(task)) {
    thread_ = std::thread([this] {
      std::unique_lock lock(mu_);
      while (!stopping_) {
        lock.unlock();
        int cpu = last_cpu(task_);
        lock.lock();
        if (cpu >= 0) ++seen_[cpu];
        cv_.wait_for(lock, kCpuSamplePeriod, [this] { return stopping_; });
      }
    });
  }
  ~CpuSampler() noexcept { finish(); }
  CpuSampler(const CpuSampler&) = delete;
  CpuSampler& operator=(const CpuSampler&) = delete;

  std::map<int, int> finish() noexcept {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return seen_;
  }

 private:
  fs::path task_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<int, int> seen_;
  std::thread thread_;
};

struct Vm {
  std::string label;  // "pinned" / "unpinned"
  VmSpec spec;
  QemuThreads threads;
  std::string observed_vcpu_cpus;
  std::string observed_emulator_cpus;
  std::vector<double> compress, decompress;
  json samples = json::array();
  std::map<int, int> cpu_seen;  // over all samples
  uint64_t wait_ns = 0, run_ns = 0;
};

// Removes everything the run made, whatever state it is in. Destruction order matters: it
// must run before the hypervisor and the event loop go away.
class Cleanup {
 public:
  Cleanup(LibvirtHypervisor& hv, std::string network, std::string state_dir, bool own_state_dir)
      : hv_(hv),
        network_(std::move(network)),
        state_dir_(std::move(state_dir)),
        own_state_dir_(own_state_dir) {}
  ~Cleanup() noexcept { run(); }
  Cleanup(const Cleanup&) = delete;
  Cleanup& operator=(const Cleanup&) = delete;

  void add_vm(const std::string& name) { vms_.push_back(name); }
  void set_network_created() { network_created_ = true; }

  void run() noexcept {
    if (done_) return;
    done_ = true;
    for (const auto& name : vms_) {
      Status s = hv_.destroy_vm(name);
      if (!s.is_ok()) std::cerr << "bench: destroying " << name << ": " << s.to_string() << "\n";
    }
    if (auto conn = hv_.connection().get(); conn.is_ok()) {
      virStoragePoolPtr pool =
          virStoragePoolLookupByName(conn->get(), hv_.options().storage_pool.c_str());
      if (pool != nullptr) {
        StoragePoolHandle owned(pool);
        if (virStoragePoolIsActive(pool) == 1) (void)virStoragePoolDestroy(pool);
        if (virStoragePoolIsPersistent(pool) == 1) (void)virStoragePoolUndefine(pool);
      }
      virResetLastError();
    }
    if (network_created_) {
      Status s = remove_network(hv_.connection(), network_);
      if (!s.is_ok()) std::cerr << "bench: removing network: " << s.to_string() << "\n";
    }
    std::error_code ec;
    fs::remove_all(fs::path(state_dir_) / "vms", ec);
    if (own_state_dir_) fs::remove(state_dir_, ec);  // only if empty
    if (ec) std::cerr << "bench: removing " << state_dir_ << ": " << ec.message() << "\n";
  }

 private:
  LibvirtHypervisor& hv_;
  std::string network_;
  std::string state_dir_;
  bool own_state_dir_;
  std::vector<std::string> vms_;
  bool network_created_ = false;
  bool done_ = false;
};

Result<GuestExecResult> guest(LibvirtHypervisor& hv, const Vm& vm, std::vector<std::string> argv,
                              std::chrono::seconds timeout) {
  std::string what = vm.label + " VM: " + argv.front();
  auto r = hv.exec(vm.spec.name, GuestExecRequest{std::move(argv), "", timeout});
  if (!r.is_ok()) return r.status().annotate(what);
  if (r->timed_out) return Status(ErrorCode::kTimeout, what + " timed out");
  if (r->exit_code != 0) {
    return unavailable("exit " + std::to_string(r->exit_code) + ": " + r->err, what);
  }
  return r;
}

Status wait_for_agent(LibvirtHypervisor& hv, const Vm& vm, std::chrono::seconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  Status last = unavailable("not yet", vm.spec.name);
  while (SteadyClock::now() < deadline && g_interrupted == 0) {
    last = hv.ping_agent(vm.spec.name, std::chrono::seconds(2));
    if (last.is_ok()) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  auto log = hv.console_log(vm.spec.name, 2000);
  return last.annotate("guest agent of the " + vm.label + " VM did not answer; console tail:\n" +
                       log.value_or(""));
}

json spread_json(const SampleSpread& s) {
  return {{"n", s.n},       {"median", s.median}, {"min", s.min}, {"max", s.max},
          {"mean", s.mean}, {"stddev", s.stddev}, {"cv", s.cv}};
}

// One sample of `vm`: zstd in the guest, with the host-side diagnostics.
Status take_sample(LibvirtHypervisor& hv, Vm& vm, const std::string& corpus, int index,
                   bool record) {
  const std::vector<std::string> argv = {"zstd", "-b" + std::to_string(kZstdLevel), "-T1", "-i1",
                                         corpus};
  auto before = schedstat(vm.threads.vcpu);
  std::optional<CpuSampler> sampler;
  if (record) sampler.emplace(vm.threads.vcpu);
  const auto t0 = SteadyClock::now();
  auto r = guest(hv, vm, argv, std::chrono::seconds(300));
  const double wall_s = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  std::map<int, int> seen = sampler ? sampler->finish() : std::map<int, int>{};
  auto after = schedstat(vm.threads.vcpu);
  if (!r.is_ok()) return r.status();
  auto parsed = parse_zstd_bench(r->err + "\n" + r->out);
  if (!parsed.is_ok()) {
    return parsed.status().annotate(vm.label + " VM sample " + std::to_string(index));
  }
  if (!record) return Status::ok();
  const uint64_t wait_ns = after.second - before.second;
  const uint64_t run_ns = after.first - before.first;
  vm.wait_ns += wait_ns;
  vm.run_ns += run_ns;
  json seen_json = json::object();
  for (auto [cpu, n] : seen) {
    seen_json[std::to_string(cpu)] = n;
    vm.cpu_seen[cpu] += n;
  }
  vm.compress.push_back(parsed->compress_mb_s);
  vm.decompress.push_back(parsed->decompress_mb_s);
  vm.samples.push_back({{"index", index},
                        {"compress_mb_s", parsed->compress_mb_s},
                        {"decompress_mb_s", parsed->decompress_mb_s},
                        {"ratio", parsed->ratio},
                        {"input_bytes", parsed->input_bytes},
                        {"wall_s", wall_s},
                        {"vcpu_runqueue_wait_ms", static_cast<double>(wait_ns) / 1e6},
                        {"vcpu_run_ms", static_cast<double>(run_ns) / 1e6},
                        {"vcpu_seen_on_cpu", seen_json}});
  std::fprintf(stderr,
               "bench: %-8s #%d  compress %7.2f MB/s  decompress %7.2f MB/s  wait %6.0f ms\n",
               vm.label.c_str(), index, parsed->compress_mb_s, parsed->decompress_mb_s,
               static_cast<double>(wait_ns) / 1e6);
  return Status::ok();
}

int run(const Options& opt) {
  if (opt.samples < 2) {
    std::cerr << "bench: --samples must be at least 2 (a spread needs two points)\n";
    return 2;
  }
  auto catalog = ImageCatalog::open(opt.catalog);
  if (!catalog.is_ok()) {
    std::cerr << "bench: " << catalog.status().to_string() << "\n";
    return 1;
  }
  auto image = catalog->find("tiny");
  if (!image.is_ok()) {
    std::cerr << "bench: " << image.status().to_string() << "\n";
    return 1;
  }
  if (Status v = catalog->verify(*image); !v.is_ok()) {
    std::cerr << "bench: " << v.to_string() << "\n";
    return 1;
  }
  if (image->corpus_path.empty() || image->kernel.path.empty()) {
    std::cerr << "bench: the tiny image needs a corpus and direct kernel boot\n";
    return 1;
  }

  auto loop = EventLoop::start();
  if (!loop.is_ok()) {
    std::cerr << "bench: " << loop.status().to_string() << "\n";
    return 1;
  }
  auto probe = Connection::open(opt.uri);
  if (!probe.is_ok()) {
    std::cerr << "bench: " << probe.status().to_string() << "\n";
    return 1;
  }
  auto host = discover_host(*probe, {});
  if (!host.is_ok()) {
    std::cerr << "bench: " << host.status().to_string() << "\n";
    return 1;
  }
  if (host->cpus.size() < 2) {
    std::cerr << "bench: needs at least 2 host CPUs (housekeeping + dedicated)\n";
    return 1;
  }
  const int housekeeping = host->cpus.front().id;
  const int dedicated = host->cpus.back().id;
  // This process (libvirt client, event loop, noise) belongs to the housekeeping set.
  if (Status s = pin_process_to(housekeeping); !s.is_ok()) {
    std::cerr << "bench: " << s.to_string() << "\n";
    return 1;
  }

  std::error_code ec;
  const bool own_state_dir = !fs::exists(opt.state_dir, ec);
  LibvirtHypervisorOptions hv_opts;
  hv_opts.uri = opt.uri;
  hv_opts.state_dir = (fs::path(opt.state_dir) / "vms").string();
  hv_opts.storage_pool = "armhive-bench-pinning";
  hv_opts.accel = host->accel;
  auto hv = LibvirtHypervisor::open(hv_opts);
  if (!hv.is_ok()) {
    std::cerr << "bench: " << hv.status().to_string() << "\n";
    return 1;
  }
  const NetworkSpec net{"armhive-bench", "ahbrb0",      "10.78.0.1/24",
                        "10.78.0.10",    "10.78.0.100", 1500};
  Cleanup cleanup(**hv, net.name, opt.state_dir, own_state_dir);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  auto fail = [&](const Status& s) {
    std::cerr << "bench: " << s.to_string() << "\n";
    cleanup.run();
    return 1;
  };

  if (Status s = ensure_network((*hv)->connection(), net); !s.is_ok()) return fail(s);
  cleanup.set_network_created();

  Vm pinned, unpinned;
  pinned.label = "pinned";
  unpinned.label = "unpinned";
  for (Vm* vm : {&pinned, &unpinned}) {
    VmSpec& s = vm->spec;
    s.name = "armhive-bench-pin-" + std::string(vm == &pinned ? "a" : "b");
    s.vm_id = "vm-bench-pin-" + std::string(vm == &pinned ? "a" : "b");
    s.pool = "bench-pinning";
    s.base_disk = image->disk.path;
    s.kernel = image->kernel.path;
    s.initrd = image->initrd.path;
    s.cmdline = image->cmdline;
    s.vcpus = 1;
    s.memory_mib = 512;
    s.network = net.name;
    s.labels = {{"bench", "pinning"}, {"mode", vm->label}};
  }
  pinned.spec.vcpu_pins = {dedicated};
  pinned.spec.emulator_cpus = {housekeeping};

  for (Vm* vm : {&pinned, &unpinned}) {
    cleanup.add_vm(vm->spec.name);
    if (Status s = (*hv)->create_vm(vm->spec); !s.is_ok()) return fail(s);
  }
  for (Vm* vm : {&pinned, &unpinned}) {
    if (Status s = wait_for_agent(**hv, *vm, std::chrono::seconds(240)); !s.is_ok()) return fail(s);
  }
  if (g_interrupted != 0) return fail(unavailable("interrupted"));

  // Where QEMU's threads are allowed to run, as the host sees it.
  auto vms = (*hv)->list_vms();
  if (!vms.is_ok()) return fail(vms.status());
  for (Vm* vm : {&pinned, &unpinned}) {
    int64_t pid = 0;
    for (const auto& info : *vms) {
      if (info.name == vm->spec.name) pid = info.qemu_pid;
    }
    if (pid <= 0) return fail(not_found("QEMU pid", vm->spec.name));
    auto threads = find_threads(pid);
    if (!threads.is_ok()) return fail(threads.status());
    vm->threads = *threads;
    vm->observed_vcpu_cpus = cpus_allowed(vm->threads.vcpu);
    vm->observed_emulator_cpus = cpus_allowed(vm->threads.main);
  }
  if (pinned.observed_vcpu_cpus != std::to_string(dedicated) ||
      pinned.observed_emulator_cpus != std::to_string(housekeeping)) {
    return fail(
        internal_error("the pinned VM's QEMU threads are not where its "
                       "domain says: vCPU " +
                       pinned.observed_vcpu_cpus + ", emulator " + pinned.observed_emulator_cpus));
  }

  // zstd version and the corpus as the guest sees it.
  auto version_out = guest(**hv, pinned, {"zstd", "--version"}, std::chrono::seconds(60));
  if (!version_out.is_ok()) return fail(version_out.status());
  auto version = parse_zstd_version(version_out->out + version_out->err);
  if (!version.is_ok()) return fail(version.status());
  auto sum = guest(**hv, pinned, {"sha256sum", image->corpus_path}, std::chrono::seconds(120));
  if (!sum.is_ok()) return fail(sum.status());
  const std::string guest_sha = sum->out.substr(0, sum->out.find(' '));
  if (!image->corpus_sha256.empty() && guest_sha != image->corpus_sha256) {
    return fail(Status(ErrorCode::kUnprocessable, "corpus in the guest has sha256 " + guest_sha +
                                                      ", manifest says " + image->corpus_sha256));
  }

  // Warm-up (not recorded): the corpus into each guest's page cache.
  for (Vm* vm : {&pinned, &unpinned}) {
    if (Status s = take_sample(**hv, *vm, image->corpus_path, 0, false); !s.is_ok()) return fail(s);
  }

  NoiseGenerator noise(housekeeping, opt.noise_seed);
  if (opt.noise) noise.start();
  const std::string started_at = utc_now();
  const std::string loadavg_at_start = read_text("/proc/loadavg");
  const auto cpu_before = read_cpu_times();
  Status sampling = Status::ok();
  for (int i = 1; i <= opt.samples && sampling.is_ok(); ++i) {
    for (Vm* vm : {&pinned, &unpinned}) {  // A, B, A, B, ...
      if (g_interrupted != 0) sampling = unavailable("interrupted");
      if (!sampling.is_ok()) break;
      sampling = take_sample(**hv, *vm, image->corpus_path, i, true);
    }
  }
  const auto cpu_after = read_cpu_times();
  noise.stop();
  const std::string finished_at = utc_now();
  if (!sampling.is_ok()) return fail(sampling);

  json vms_json = json::object();
  SampleSpread cp[2], dp[2];
  int k = 0;
  for (Vm* vm : {&pinned, &unpinned}) {
    cp[k] = compute_spread(vm->compress);
    dp[k] = compute_spread(vm->decompress);
    json seen = json::object();
    for (auto [cpu, n] : vm->cpu_seen) seen[std::to_string(cpu)] = n;
    vms_json[vm->label] = {
        {"domain", vm->spec.name},
        {"vcpus", vm->spec.vcpus},
        {"memory_mib", vm->spec.memory_mib},
        {"vcpu_pins", vm->spec.vcpu_pins},
        {"emulator_cpus", vm->spec.emulator_cpus},
        {"observed_vcpu_thread_cpus_allowed", vm->observed_vcpu_cpus},
        {"observed_emulator_thread_cpus_allowed", vm->observed_emulator_cpus},
        {"compress_mb_s", spread_json(cp[k])},
        {"decompress_mb_s", spread_json(dp[k])},
        {"vcpu_runqueue_wait_ms_total", static_cast<double>(vm->wait_ns) / 1e6},
        {"vcpu_run_ms_total", static_cast<double>(vm->run_ns) / 1e6},
        {"vcpu_runqueue_wait_share",
         vm->run_ns + vm->wait_ns > 0
             ? static_cast<double>(vm->wait_ns) / static_cast<double>(vm->run_ns + vm->wait_ns)
             : 0.0},
        {"vcpu_seen_on_cpu", seen},
        {"samples", vm->samples}};
    ++k;
  }
  auto ratio = [](double unpinned_cv, double pinned_cv) -> json {
    if (pinned_cv <= 0) return nullptr;
    return unpinned_cv / pinned_cv;
  };
  const bool goal_compress = cp[0].cv <= 0.5 * cp[1].cv;
  const bool goal_decompress = dp[0].cv <= 0.5 * dp[1].cv;
  const bool emulated = host->accel != Accel::kKvm;

  json out = {
      {"benchmark", "pinning"},
      {"description",
       "run-to-run spread of in-guest zstd, pinned vs unpinned 1-vCPU VMs, side by side, "
       "interleaved"},
      {"emulated", emulated},
      {"accel", emulated ? "tcg" : "kvm"},
      {"guest_cpu_model", emulated ? "cortex-a72 (QEMU TCG)" : "host"},
      {"started_at", started_at},
      {"finished_at", finished_at},
      {"command", {"zstd", "-b" + std::to_string(kZstdLevel), "-T1", "-i1", image->corpus_path}},
      {"samples_per_vm", opt.samples},
      {"order", "interleaved pinned, unpinned, pinned, ...; one unrecorded warm-up per VM"},
      {"zstd_version", *version},
      {"corpus",
       {{"path", image->corpus_path},
        {"bytes", image->corpus_bytes},
        {"seed", image->corpus_seed},
        {"sha256", image->corpus_sha256},
        {"sha256_in_guest", guest_sha}}},
      {"image", {{"name", image->name}, {"version", image->version}}},
      {"host",
       {{"hostname", host->hostname},
        {"arch", host->arch},
        {"cpu_model", host->cpu_model},
        {"cpus", host->cpus.size()},
        {"housekeeping_cpus", {housekeeping}},
        {"dedicated_cpus", {dedicated}},
        {"loadavg_at_start", loadavg_at_start},
        {"loadavg_at_end", read_text("/proc/loadavg")},
        {"cpu_usage_during_samples", cpu_usage_json(cpu_before, cpu_after)}}},
      {"noise", opt.noise ? noise.summary() : json{{"enabled", false}}},
      {"vms", vms_json},
      {"cv_ratio_unpinned_over_pinned",
       {{"compress", ratio(cp[1].cv, cp[0].cv)}, {"decompress", ratio(dp[1].cv, dp[0].cv)}}},
      {"goal",
       {{"statement", "pinned CV <= half the unpinned CV"},
        {"met_compress", goal_compress},
        {"met_decompress", goal_decompress}}},
  };
  if (opt.noise) out["noise"]["enabled"] = true;

  cleanup.run();  // before reporting: a result is only written for a clean run
  std::fprintf(stderr, "%s zstd -b%d -T1 -i1 (%s, zstd %s), %d samples per VM, noise %s\n",
               emulated ? "EMULATED (TCG)" : "KVM", kZstdLevel, image->corpus_path.c_str(),
               version->c_str(), opt.samples, opt.noise ? "on the housekeeping CPU" : "off");
  std::fprintf(stderr, "%-9s %12s %8s %12s %8s\n", "vm", "comp MB/s", "CV", "decomp MB/s", "CV");
  for (int i = 0; i < 2; ++i) {
    std::fprintf(stderr, "%-9s %12.2f %7.2f%% %12.2f %7.2f%%\n", i == 0 ? "pinned" : "unpinned",
                 cp[i].median, cp[i].cv * 100, dp[i].median, dp[i].cv * 100);
  }
  std::fprintf(stderr,
               "CV unpinned / pinned: compress %s, decompress %s; goal (pinned CV <= half): "
               "compress %s, decompress %s\n",
               out["cv_ratio_unpinned_over_pinned"]["compress"].dump().c_str(),
               out["cv_ratio_unpinned_over_pinned"]["decompress"].dump().c_str(),
               goal_compress ? "met" : "NOT met", goal_decompress ? "met" : "NOT met");

  const std::string text = out.dump(2) + "\n";
  if (opt.out.empty()) {
    std::cout << text;
  } else {
    std::ofstream f(opt.out);
    f << text;
    if (!f) {
      std::cerr << "bench: cannot write " << opt.out << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace armhive

int main(int argc, char** argv) {
  armhive::Options opt;
  CLI::App app{"armhive-bench-pinning: pinned vs unpinned spread of in-guest zstd"};
  app.add_option("--catalog", opt.catalog, "image catalogue with the tiny image")->required();
  app.add_option("--samples", opt.samples, "samples per VM")->capture_default_str();
  app.add_option("--out", opt.out, "write the JSON result here (default: stdout)");
  app.add_option("--uri", opt.uri, "libvirt URI")->capture_default_str();
  app.add_option("--state-dir", opt.state_dir, "overlays and per-VM files (removed at the end)")
      ->capture_default_str();
  app.add_flag("!--no-noise", opt.noise, "no housekeeping noise generator");
  app.add_option("--noise-seed", opt.noise_seed, "seed of the noise duty cycles")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return armhive::run(opt);
}
