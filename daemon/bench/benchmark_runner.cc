#include "daemon/bench/benchmark_runner.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "daemon/bench/cache_topology.h"
#include "daemon/bench/host_mtu.h"
#include "daemon/bench/host_sampler.h"
#include "daemon/bench/machine_suites.h"
#include "daemon/bench/report.h"
#include "daemon/bench/suites.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string new_run_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "b-";
  uint64_t v = rng();
  for (int i = 0; i < 12; ++i) id += kHex[(v >> (4 * i)) & 0xF];
  return id;
}

// Whether the request runs suite `s`: one it names, or one of the defaults (network and
// compression) when it names none. (It once meant every suite then, so a default request was
// refused for the memory suite's arrays on a host with a large cache.)
bool has_suite(const BenchmarkRequest& r, std::string_view s) {
  if (r.suites.empty()) return s == kSuiteNetwork || s == kSuiteCompression;
  return std::find(r.suites.begin(), r.suites.end(), s) != r.suites.end();
}

json sensors_block(const std::string& sys_root, const char* when, json report_sensors) {
  auto readings = read_sensors(sys_root);
  report_sensors[when] = sensors_json(readings);
  if (readings.empty()) {
    report_sensors["note"] = "no thermal zones or hwmon temperature inputs under " + sys_root +
                             ": the sensors are absent (not zero)";
  }
  return report_sensors;
}

}  // namespace

BenchmarkRunner::BenchmarkRunner(GuestAgent& agent, ProcessRunner& processes,
                                 LeaseTargetResolver resolve, const Clock& clock,
                                 BenchmarkRunnerOptions options)
    : agent_(agent),
      processes_(processes),
      resolve_(std::move(resolve)),
      clock_(clock),
      options_(std::move(options)) {}

BenchmarkRunner::~BenchmarkRunner() {
  std::vector<std::thread> workers;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    for (auto& [vm, q] : queues_) {
      if (q.worker.joinable()) workers.push_back(std::move(q.worker));
    }
  }
  changed_.notify_all();
  for (auto& w : workers) w.join();
}

bool BenchmarkRunner::stopping() const {
  MutexLock lock(mu_);
  return stopping_;
}

Status BenchmarkRunner::save(const BenchmarkRun& run) const {
  std::error_code ec;
  fs::create_directories(options_.runs_dir, ec);
  if (ec)
    return unavailable("cannot create " + options_.runs_dir + ": " + ec.message(),
                       options_.runs_dir);
  fs::path final_path = fs::path(options_.runs_dir) / (run.id + ".json");
  fs::path tmp = final_path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    // Guest text in the report may be invalid UTF-8: stored with U+FFFD, never a throw.
    out << to_json(run).dump(1, ' ', false, json::error_handler_t::replace) << "\n";
    if (!out) return unavailable("cannot write " + tmp.string(), tmp.string());
  }
  fs::rename(tmp, final_path, ec);
  if (ec)
    return unavailable("cannot rename " + tmp.string() + ": " + ec.message(), final_path.string());
  return Status::ok();
}

void BenchmarkRunner::update(const BenchmarkRun& run) {
  // Disk first, outside the lock; a failed write is recorded in the run but does not stop it.
  Status saved = save(run);
  {
    MutexLock lock(mu_);
    BenchmarkRun& stored = runs_[run.id];
    stored = run;
    if (!saved.is_ok()) stored.report["storage_error"] = saved.message();
  }
  changed_.notify_all();
}

Status BenchmarkRunner::load() {
  std::error_code ec;
  fs::create_directories(options_.runs_dir, ec);
  if (ec)
    return unavailable("cannot create " + options_.runs_dir + ": " + ec.message(),
                       options_.runs_dir);
  std::vector<BenchmarkRun> interrupted;
  {
    MutexLock lock(mu_);
    for (fs::directory_iterator it(options_.runs_dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      if (it->path().extension() != ".json") continue;
      std::ifstream in(it->path());
      std::stringstream text;
      text << in.rdbuf();
      json j = json::parse(text.str(), nullptr, false);
      if (j.is_discarded()) continue;  // a torn write of a crashed daemon: skip, keep the file
      auto run = benchmark_run_from_json(j);
      if (!run.is_ok()) continue;
      if (run->state == BenchmarkState::kQueued || run->state == BenchmarkState::kRunning) {
        run->state = BenchmarkState::kFailed;
        run->error = "interrupted: the daemon restarted during the run";
        run->finished_at = clock_.now();
        interrupted.push_back(*run);
      }
      runs_[run->id] = std::move(run).value();
    }
  }
  for (const auto& r : interrupted) update(r);
  return Status::ok();
}

Result<BenchmarkRun> BenchmarkRunner::start(const BenchmarkRequest& request) {
  ARMHIVE_RETURN_IF_ERROR(validate_benchmark_request(request));
  auto target = resolve_(request.lease_id);
  if (!target.is_ok()) return target.status();
  if (target->vm_name.empty()) return conflict("the lease has no VM yet", request.lease_id);
  // iperf3's peer, the MTU changes and the host side of the network suite run on this
  // machine, toward the guest's address on its host's network: not for another host's VM.
  const bool network =
      request.suites.empty() ? !target->remote_host : has_suite(request, kSuiteNetwork);
  if (network && target->remote_host) {
    return conflict(
               "the network suite measures the path from armhived's machine to the VM, "
               "and the lease's VM runs on host " +
               target->host +
               ": ask for compression, memory, crypto or storage, which run in the guest")
        .with_field("suites");
  }
  if (network && target->address.empty()) {
    return conflict("the lease's VM has no address yet", request.lease_id);
  }
  // An MTU the VM's NIC or the host side cannot carry is refused before anything changes.
  const int nic_max = target->nic_max_mtu > 0 ? target->nic_max_mtu : target->mtu;
  for (size_t i = 0; network && i < request.network.mtus.size(); ++i) {
    if (request.network.mtus[i] > nic_max) {
      return invalid_argument(
          "network.mtus[" + std::to_string(i) + "]",
          "MTU " + std::to_string(request.network.mtus[i]) +
              ": the VM's virtio NIC carries at most " + std::to_string(nic_max) +
              " (the host MTU its domain advertises, the pool's mtu); raise the pool's mtu");
    }
  }
  if (network && !request.network.mtus.empty() && !target->bridge.empty()) {
    ARMHIVE_ASSIGN_OR_RETURN(
        HostMtuLinks links,
        read_host_mtu_links(processes_, target->bridge, options_.guest_command_timeout));
    ARMHIVE_RETURN_IF_ERROR(check_host_mtus(request.network.mtus, links));
  }
  // Native runs only: see run_memory_suite (an emulated guest's arrays are noted, not refused).
  if (has_suite(request, kSuiteMemory) && !target->emulated) {
    uint64_t llc = target->last_level_cache_bytes;
    if (llc == 0) {
      if (auto c = read_last_level_cache(options_.sys_root)) llc = c->bytes;
    }
    ARMHIVE_RETURN_IF_ERROR(validate_memory_array(request.memory, llc));
  }
  BenchmarkRun run;
  run.lease_id = request.lease_id;
  run.owner = request.owner;
  run.vm_name = target->vm_name;
  run.pool = target->pool;
  run.host = target->host;
  run.state = BenchmarkState::kQueued;
  run.created_at = clock_.now();
  run.request = request;
  if (run.request.suites.empty()) {
    run.request.suites = {std::string(kSuiteNetwork), std::string(kSuiteCompression)};
    if (target->remote_host) run.request.suites = {std::string(kSuiteCompression)};
  }
  run.report = {{"schema", kReportSchema}, {"emulated", target->emulated}};
  {
    MutexLock lock(mu_);
    if (stopping_) return unavailable("the benchmark service is shutting down");
    if (auto q = queues_.find(target->vm_name);
        q != queues_.end() && q->second.jobs.size() >= options_.max_queued_per_vm) {
      return Status(
          ErrorCode::kResourceExhausted,
          std::to_string(q->second.jobs.size()) + " benchmark runs are already queued for this VM",
          target->vm_name);
    }
    do {
      run.id = new_run_id();
    } while (runs_.count(run.id));
    runs_[run.id] = run;
  }
  update(run);
  {
    MutexLock lock(mu_);
    VmQueue& q = queues_[run.vm_name];
    q.jobs.push_back({run.id, std::move(target).value()});
    if (!q.worker_active) {
      if (q.worker.joinable()) q.worker.join();  // finished: it cleared worker_active last
      q.worker_active = true;
      q.worker = std::thread([this, vm = run.vm_name] { worker(vm); });
    }
  }
  return run;
}

void BenchmarkRunner::worker(std::string vm_name) {
  for (;;) {
    Job job;
    bool cancelled = false;
    {
      MutexLock lock(mu_);
      VmQueue& q = queues_[vm_name];
      if (q.jobs.empty()) {
        q.worker_active = false;
        return;
      }
      job = std::move(q.jobs.front());
      q.jobs.pop_front();
      cancelled = stopping_;
    }
    if (cancelled) {
      auto run = get(job.id);
      if (run.is_ok()) {
        run->state = BenchmarkState::kFailed;
        run->error = "cancelled: the daemon shut down before the run started";
        run->finished_at = clock_.now();
        update(*run);
      }
      continue;
    }
    // Nothing a guest prints may take the daemon down: whatever escapes a run (it should be
    // none: parsers return Status) fails that run and the worker goes on.
    std::string escaped;
    try {
      execute(job);
    } catch (const std::exception& e) {
      escaped = e.what();
    } catch (...) {
      escaped = "unknown exception";
    }
    if (!escaped.empty()) fail_escaped(job.id, escaped);
  }
}

void BenchmarkRunner::fail_escaped(const std::string& id, const std::string& what) noexcept {
  try {
    auto run = get(id);
    if (!run.is_ok()) return;
    run->state = BenchmarkState::kFailed;
    run->error = "internal error during the run (" + what.substr(0, 200) + ")";
    run->report["error_code"] = std::string(code_name(ErrorCode::kInternal));
    run->finished_at = clock_.now();
    update(*run);
  } catch (...) {
    // Out of memory or a broken disk: the run stays as it was; the worker goes on.
  }
}

void BenchmarkRunner::execute(const Job& job) {
  auto got = get(job.id);
  if (!got.is_ok()) return;
  BenchmarkRun run = std::move(got).value();
  const LeaseTarget& t = job.target;
  run.state = BenchmarkState::kRunning;
  json& rep = run.report;
  rep["schema"] = kReportSchema;
  rep["emulated"] = t.emulated;
  if (t.emulated) {
    rep["emulation_note"] = "the " + t.guest_arch +
                            " guest runs under QEMU TCG (software emulation) on a " + t.host_arch +
                            " host: every guest figure is EMULATED and says nothing about Arm "
                            "hardware";
  }
  rep["settings"] = {{"host", t.host},
                     {"host_arch", t.host_arch},
                     {"guest_arch", t.guest_arch},
                     {"vm_name", t.vm_name},
                     {"pool", t.pool},
                     {"address", t.address},
                     {"vcpus", t.vcpus},
                     {"pinned_cpus", t.cpus},
                     {"housekeeping_cpus", t.housekeeping_cpus},
                     {"mtu", t.mtu},
                     {"suites", run.request.suites}};
  rep["started_at"] = to_rfc3339(clock_.now());
  rep["sensors"] = sensors_block(options_.sys_root, "before", json::object());
  update(run);

  SuiteContext ctx{agent_, processes_, options_, t, run.id, [this] { return stopping(); }};
  Status failure = Status::ok();
  if (has_suite(run.request, kSuiteNetwork)) {
    json net;
    Status s = run_network_suite(ctx, run.request.network, net);
    rep["network"] = net;
    if (!s.is_ok()) failure = s.annotate("network");
    update(run);
  }
  if (failure.is_ok() && has_suite(run.request, kSuiteCompression)) {
    json comp;
    Status s = run_compression_suite(ctx, run.request.compression, comp);
    rep["compression"] = comp;
    if (!s.is_ok()) failure = s.annotate("compression");
  }
  auto machine_suite = [&](std::string_view name, auto run_suite, const auto& opts) {
    if (!failure.is_ok() || !has_suite(run.request, name)) return;
    update(run);
    json part;
    Status s = run_suite(ctx, opts, part);
    rep[std::string(name)] = part;
    if (!s.is_ok()) failure = s.annotate(std::string(name));
  };
  machine_suite(kSuiteMemory, run_memory_suite, run.request.memory);
  machine_suite(kSuiteCrypto, run_crypto_suite, run.request.crypto);
  machine_suite(kSuiteStorage, run_storage_suite, run.request.storage);
  rep["sensors"] = sensors_block(options_.sys_root, "after", rep["sensors"]);
  rep["finished_at"] = to_rfc3339(clock_.now());
  run.finished_at = clock_.now();
  if (failure.is_ok()) {
    Status consistent = check_benchmark_report(rep);
    if (!consistent.is_ok()) failure = consistent;
  }
  if (failure.is_ok()) {
    run.state = BenchmarkState::kSucceeded;
  } else {
    run.state = BenchmarkState::kFailed;
    run.error = failure.message();
    rep["error_code"] = std::string(code_name(failure.code()));
  }
  update(run);
}

Result<BenchmarkRun> BenchmarkRunner::get(const std::string& id) {
  MutexLock lock(mu_);
  auto it = runs_.find(id);
  if (it == runs_.end()) return not_found("no such benchmark run", id);
  return it->second;
}

std::vector<BenchmarkRun> BenchmarkRunner::list(const BenchmarkFilter& f) {
  std::vector<BenchmarkRun> out;
  {
    MutexLock lock(mu_);
    for (const auto& [id, r] : runs_) {
      if (f.owner && r.owner != *f.owner) continue;
      if (f.lease_id && r.lease_id != *f.lease_id) continue;
      if (f.vm_name && r.vm_name != *f.vm_name) continue;
      if (f.pool && r.pool != *f.pool) continue;
      if (f.host && r.host != *f.host) continue;
      if (f.state && r.state != *f.state) continue;
      out.push_back(r);
    }
  }
  std::sort(out.begin(), out.end(), [](const BenchmarkRun& a, const BenchmarkRun& b) {
    return a.created_at != b.created_at ? a.created_at > b.created_at : a.id > b.id;
  });
  if (out.size() > f.limit) out.resize(f.limit);
  return out;
}

Result<std::vector<BenchmarkRun>> BenchmarkRunner::collect(const std::vector<std::string>& ids) {
  if (ids.empty()) return invalid_argument("ids", "name at least one benchmark run");
  if (ids.size() > 16) return invalid_argument("ids", "at most 16 runs per report");
  std::vector<BenchmarkRun> runs;
  for (const auto& id : ids) {
    ARMHIVE_ASSIGN_OR_RETURN(BenchmarkRun r, get(id));
    runs.push_back(std::move(r));
  }
  return runs;
}

Result<std::string> BenchmarkRunner::report_html(const std::vector<std::string>& ids) {
  ARMHIVE_ASSIGN_OR_RETURN(auto runs, collect(ids));
  return render_benchmark_html(runs);
}

Result<std::string> BenchmarkRunner::report_csv(const std::vector<std::string>& ids) {
  ARMHIVE_ASSIGN_OR_RETURN(auto runs, collect(ids));
  return render_benchmark_csv(runs);
}

Result<nlohmann::json> BenchmarkRunner::compare(const std::vector<std::string>& ids) {
  ARMHIVE_ASSIGN_OR_RETURN(auto runs, collect(ids));
  return compare_benchmark_runs(runs);
}

Result<BenchmarkRun> BenchmarkRunner::wait(const std::string& id,
                                           std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  auto done = [&]() REQUIRES(mu_) {
    auto it = runs_.find(id);
    return it == runs_.end() || it->second.state == BenchmarkState::kSucceeded ||
           it->second.state == BenchmarkState::kFailed;
  };
  changed_.wait_for(lock, timeout, done);
  auto it = runs_.find(id);
  if (it == runs_.end()) return not_found("no such benchmark run", id);
  return it->second;
}

}  // namespace armhive
