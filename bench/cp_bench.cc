// `armhive cp`'s guest-agent path (daemon/virt/guest_file_transfer.h): where the time of one
// chunk goes, and MiB/s into and out of a guest at two chunk sizes, side by side in one run.
//
//   armhive-bench-cp --catalog DIR [--samples N] [--mib M] [--before-chunk B] [--after-chunk A]
//                    [--out FILE.json] [--uri URI] [--state-dir DIR] [--no-breakdown]
//
// Must run inside the sandbox network namespace (scripts/libvirt-sandbox run --name cp --).
// One 1-vCPU guest of the catalogue's "tiny" image (vCPU on the host's last CPU, QEMU's other
// threads on the first, as armhived places them).
//
// Breakdown, per payload size (0 = guest-ping), each the median of --calls agent calls:
//   ping          {"execute":"guest-ping"}: libvirt's round trip (it sends a guest-sync first)
//                 and qemu-ga's fixed cost;
//   parse_only    guest-ping with one unexpected string argument of the size's base64: the
//                 bytes travel and qemu-ga's JSON parser reads them, then it refuses the
//                 argument (nothing decoded, nothing written);
//   write         guest-file-write of the size (base64 decoded and written to /tmp);
//   read          guest-file-read of the size (the reply carries the base64);
//   host_encode   this process building the write command (base64 + JSON dump), no I/O.
// Throughput: put_guest_file and get_guest_file of an M MiB random file to /root, alternating
// the two chunk sizes (before, after, before, after, ...), each sample timed end to end (the
// transfer's helpers and checksums included).
//
// Every figure is EMULATED when the host has no KVM for aarch64 (the JSON says so). The VM, its
// overlay, the storage pool, the network and the state directory are removed on every exit path.
// Results: bench/results/cp-<date>.json, summarised in BENCHMARKS.md.

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "base/base64.h"
#include "daemon/bench/stats.h"
#include "daemon/images/catalog.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/guest_agent_reply.h"
#include "daemon/virt/guest_file_transfer.h"
#include "daemon/virt/handles.h"
#include "daemon/virt/host_discovery.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "daemon/virt/network.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

volatile std::sig_atomic_t g_interrupted = 0;  // NOLINT: a signal flag must be a global
extern "C" void on_signal(int /*sig*/) { g_interrupted = 1; }

constexpr const char* kVmName = "armhive-bench-cp";

struct Options {
  std::string catalog;
  int samples = 3;
  int mib = 16;
  size_t before_chunk = 48 * 1024;  // main's chunk (both ways) before issue #14's rework
  // Today's defaults: --after-chunk sets both.
  size_t after_write_chunk = FileTransferOptions{}.write_chunk;
  size_t after_read_chunk = FileTransferOptions{}.read_chunk;
  int calls = 5;
  std::vector<size_t> sizes;  // breakdown payloads (--sizes; default 48 KiB)
  int call_timeout_s = 120;   // each raw agent call of the breakdown and the probe
  bool breakdown = true;
  std::vector<size_t> probe_mib;        // --probe-read-mib: one read of each (none: no probe)
  std::vector<size_t> probe_write_kib;  // --probe-write-kib: one write of each, ascending
  std::string out;
  std::string uri = "qemu:///system";
  std::string state_dir = "/tmp/armhive-bench-cp";
  std::vector<std::string> command;  // argv, recorded in the result
};

// Removes the VM, the storage pool, the network and the per-VM files on every path.
class Cleanup {
 public:
  Cleanup(LibvirtHypervisor& hv, std::string network, std::string state_dir)
      : hv_(hv), network_(std::move(network)), state_dir_(std::move(state_dir)) {}
  ~Cleanup() noexcept { run(); }
  Cleanup(const Cleanup&) = delete;
  Cleanup& operator=(const Cleanup&) = delete;
  void run() noexcept {
    if (done_) return;
    done_ = true;
    (void)hv_.destroy_vm(kVmName);
    if (auto conn = hv_.connection().get(); conn.is_ok()) {
      virStoragePoolPtr pool =
          virStoragePoolLookupByName(conn->get(), hv_.options().storage_pool.c_str());
      if (pool != nullptr) {
        StoragePoolHandle owned(pool);
        if (virStoragePoolIsActive(pool) == 1) (void)virStoragePoolDestroy(pool);
      }
      virResetLastError();
    }
    (void)remove_network(hv_.connection(), network_);
    std::error_code ec;
    fs::remove_all(state_dir_, ec);
  }

 private:
  LibvirtHypervisor& hv_;
  std::string network_;
  std::string state_dir_;
  bool done_ = false;
};

json spread_json(const SampleSpread& s) {
  return {{"n", s.n},       {"median", s.median}, {"min", s.min}, {"max", s.max},
          {"mean", s.mean}, {"stddev", s.stddev}, {"cv", s.cv}};
}

double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

class MemorySource final : public ByteSource {
 public:
  explicit MemorySource(const std::string& data) : data_(data) {}
  Result<std::string> read(size_t max) override {
    const size_t n = std::min(max, data_.size() - at_);
    std::string piece = data_.substr(at_, n);
    at_ += n;
    return piece;
  }

 private:
  const std::string& data_;
  size_t at_ = 0;
};

class MemorySink final : public ByteSink {
 public:
  Status begin(GuestFileKind, uint64_t size, const std::string&) override {
    data.reserve(size);
    return Status::ok();
  }
  Status write(std::string_view d) override {
    data.append(d);
    return Status::ok();
  }
  std::string data;
};

// Median seconds of `calls` runs of `fn` (which returns a Status; errors are returned).
template <typename Fn>
Result<double> median_seconds(int calls, Fn fn) {
  std::vector<double> t;
  for (int i = 0; i < calls && g_interrupted == 0; ++i) {
    const auto t0 = SteadyClock::now();
    ARMHIVE_RETURN_IF_ERROR(fn());
    t.push_back(seconds_since(t0));
  }
  return compute_spread(t).median;
}

Result<json> breakdown(LibvirtHypervisor& hv, const Options& opt) {
  auto agent = [&](const std::string& cmd) {
    const auto t0 = SteadyClock::now();
    auto r = hv.agent_command(kVmName, cmd, std::chrono::seconds(opt.call_timeout_s));
    std::cerr << "bench: call " << cmd.substr(0, std::min<size_t>(40, cmd.find(','))) << " "
              << cmd.size() << " bytes, " << seconds_since(t0) << " s"
              << (r.is_ok() ? "" : " failed: " + r.status().to_string()) << "\n";
    return r;
  };
  const std::string open_cmd =
      json{{"execute", "guest-file-open"},
           {"arguments", {{"path", "/tmp/armhive-bench-cp"}, {"mode", "w+"}}}}
          .dump();
  ARMHIVE_ASSIGN_OR_RETURN(std::string opened, agent(open_cmd));
  ARMHIVE_ASSIGN_OR_RETURN(int64_t handle, parse_guest_file_open(opened));
  json rows = json::array();
  std::mt19937 rng(14);
  std::vector<size_t> sizes = {0};
  sizes.insert(sizes.end(), opt.sizes.begin(), opt.sizes.end());
  for (size_t size : sizes) {
    if (g_interrupted != 0) break;
    json row = {{"bytes", size}};
    std::string data(size, '\0');
    for (char& ch : data) ch = static_cast<char>(rng());
    ARMHIVE_ASSIGN_OR_RETURN(row["ping_s"], median_seconds(opt.calls, [&] {
                               return agent(R"({"execute":"guest-ping"})").status();
                             }));
    if (size == 0) {
      rows.push_back(row);
      continue;
    }
    const std::string b64 = base64_encode(data);
    const std::string junk =
        json{{"execute", "guest-ping"}, {"arguments", {{"armhive-bench", b64}}}}.dump();
    ARMHIVE_ASSIGN_OR_RETURN(row["parse_only_s"], median_seconds(opt.calls, [&] {
                               // qemu-ga refuses the argument once it parsed the command.
                               auto r = agent(junk);
                               return r.is_ok() ? internal_error("qemu-ga took the argument")
                                                : Status::ok();
                             }));
    ARMHIVE_ASSIGN_OR_RETURN(
        row["host_encode_s"], median_seconds(opt.calls, [&] {
          std::string cmd =
              json{{"execute", "guest-file-write"},
                   {"arguments", {{"handle", handle}, {"buf-b64", base64_encode(data)}}}}
                  .dump();
          return cmd.empty() ? internal_error("empty") : Status::ok();
        }));
    const std::string write =
        json{{"execute", "guest-file-write"}, {"arguments", {{"handle", handle}, {"buf-b64", b64}}}}
            .dump();
    ARMHIVE_ASSIGN_OR_RETURN(row["write_s"], median_seconds(opt.calls, [&] {
                               ARMHIVE_ASSIGN_OR_RETURN(std::string r, agent(write));
                               return parse_guest_file_write(r, size);
                             }));
    const std::string read =
        json{{"execute", "guest-file-read"}, {"arguments", {{"handle", handle}, {"count", size}}}}
            .dump();
    const std::string rewind =
        json{{"execute", "guest-file-seek"},
             {"arguments", {{"handle", handle}, {"offset", 0}, {"whence", "set"}}}}
            .dump();
    std::vector<double> reads;
    for (int i = 0; i < opt.calls && g_interrupted == 0; ++i) {
      ARMHIVE_RETURN_IF_ERROR(agent(rewind).status());
      const auto t0 = SteadyClock::now();
      ARMHIVE_ASSIGN_OR_RETURN(std::string r, agent(read));
      reads.push_back(seconds_since(t0));
      ARMHIVE_ASSIGN_OR_RETURN(GuestFileChunk c, parse_guest_file_read(r, size));
      if (c.data.size() != size) return internal_error("short read in the breakdown");
    }
    row["read_s"] = compute_spread(reads).median;
    // Back to where the writes append.
    ARMHIVE_RETURN_IF_ERROR(
        agent(json{{"execute", "guest-file-seek"},
                   {"arguments", {{"handle", handle}, {"offset", 0}, {"whence", "end"}}}}
                  .dump())
            .status());
    std::cerr << "bench: breakdown " << row.dump() << "\n";
    rows.push_back(row);
  }
  (void)agent(json{{"execute", "guest-file-close"}, {"arguments", {{"handle", handle}}}}.dump());
  (void)hv.exec(kVmName, {{"rm", "-f", "/tmp/armhive-bench-cp"}, "", std::chrono::seconds(30)});
  return rows;
}

// What the agent path accepts: one guest-file-write of each size and one guest-file-read of
// each count against a file at least that long, recording success (and the seconds) or the
// error libvirt or qemu-ga gave. Limits found by trying, as documented nowhere on the host.
Result<json> probe_limits(LibvirtHypervisor& hv, const Options& opt, bool writes) {
  auto agent = [&](const std::string& cmd) {
    const auto t0 = SteadyClock::now();
    auto r = hv.agent_command(kVmName, cmd, std::chrono::seconds(opt.call_timeout_s));
    std::cerr << "bench: call " << cmd.substr(0, std::min<size_t>(40, cmd.find(','))) << " "
              << cmd.size() << " bytes, " << seconds_since(t0) << " s"
              << (r.is_ok() ? "" : " failed: " + r.status().to_string()) << "\n";
    return r;
  };
  ARMHIVE_ASSIGN_OR_RETURN(
      std::string opened,
      agent(json{{"execute", "guest-file-open"},
                 {"arguments", {{"path", "/tmp/armhive-bench-cp-probe"}, {"mode", "w+"}}}}
                .dump()));
  ARMHIVE_ASSIGN_OR_RETURN(int64_t handle, parse_guest_file_open(opened));
  json rows = json::array();
  std::mt19937 rng(15);
  const size_t largest = opt.probe_mib.empty() || writes
                             ? 0
                             : *std::max_element(opt.probe_mib.begin(), opt.probe_mib.end()) << 20;
  auto made = hv.exec(
      kVmName, {{"/bin/sh", "-c", "head -c \"$1\" /dev/urandom > /tmp/armhive-bench-cp-probe", "sh",
                 std::to_string(largest)},
                "",
                std::chrono::seconds(300)});
  if (!made.is_ok()) return made.status();
  for (size_t mib : writes ? std::vector<size_t>{} : opt.probe_mib) {
    if (g_interrupted != 0) break;
    const size_t size = mib << 20;
    ARMHIVE_RETURN_IF_ERROR(
        agent(json{{"execute", "guest-file-seek"},
                   {"arguments", {{"handle", handle}, {"offset", 0}, {"whence", "set"}}}}
                  .dump())
            .status());
    auto t0 = SteadyClock::now();
    auto r = agent(
        json{{"execute", "guest-file-read"}, {"arguments", {{"handle", handle}, {"count", size}}}}
            .dump());
    json row = {{"op", "read"}, {"bytes", size}, {"seconds", seconds_since(t0)}};
    Status s = r.status();
    if (r.is_ok()) {
      row["reply_bytes"] = r->size();
      auto c = parse_guest_file_read(*r, size);
      s = c.status();
      if (c.is_ok() && c->data.size() != size) s = internal_error("short read");
    }
    row["ok"] = s.is_ok();
    if (!s.is_ok()) row["error"] = s.to_string();
    std::cerr << "bench: probe " << row.dump() << "\n";
    rows.push_back(row);
    if (!s.is_ok()) return rows;  // the agent may be unusable now
  }
  for (size_t kib : writes ? opt.probe_write_kib : std::vector<size_t>{}) {
    if (g_interrupted != 0) break;
    const size_t size = kib << 10;
    std::string data(size, '\0');
    for (char& ch : data) ch = static_cast<char>(rng());
    const std::string cmd =
        json{{"execute", "guest-file-write"},
             {"arguments", {{"handle", handle}, {"buf-b64", base64_encode(data)}}}}
            .dump();
    auto t0 = SteadyClock::now();
    auto r = agent(cmd);
    json row = {{"op", "write"},
                {"bytes", size},
                {"command_bytes", cmd.size()},
                {"seconds", seconds_since(t0)}};
    Status s = r.is_ok() ? parse_guest_file_write(*r, size) : r.status();
    row["ok"] = s.is_ok();
    if (!s.is_ok()) row["error"] = s.to_string();
    std::cerr << "bench: probe " << row.dump() << "\n";
    rows.push_back(row);
    if (!s.is_ok()) return rows;  // the agent is unusable after an undelivered command
  }
  (void)agent(json{{"execute", "guest-file-close"}, {"arguments", {{"handle", handle}}}}.dump());
  (void)hv.exec(kVmName,
                {{"rm", "-f", "/tmp/armhive-bench-cp-probe"}, "", std::chrono::seconds(30)});
  return rows;
}

int run(const Options& opt) {
  auto fail = [](const Status& s) {
    std::cerr << "bench: " << s.to_string() << "\n";
    return 1;
  };
  auto catalog = ImageCatalog::open(opt.catalog);
  if (!catalog.is_ok()) return fail(catalog.status());
  auto image = catalog->find("tiny");
  if (!image.is_ok()) return fail(image.status());
  if (Status v = catalog->verify(*image); !v.is_ok()) return fail(v);

  auto loop = EventLoop::start();
  if (!loop.is_ok()) return fail(loop.status());
  auto probe = Connection::open(opt.uri);
  if (!probe.is_ok()) return fail(probe.status());
  auto host = discover_host(*probe, {});
  if (!host.is_ok()) return fail(host.status());
  if (host->cpus.size() < 2) return fail(unavailable("needs at least 2 host CPUs"));

  LibvirtHypervisorOptions hv_opts;
  hv_opts.uri = opt.uri;
  hv_opts.state_dir = (fs::path(opt.state_dir) / "vms").string();
  hv_opts.storage_pool = "armhive-bench-cp";
  hv_opts.accel = host->accel;
  auto hv = LibvirtHypervisor::open(hv_opts);
  if (!hv.is_ok()) return fail(hv.status());
  const NetworkSpec net{"armhive-bench-cp", "ahbcp0",      "10.81.0.1/24",
                        "10.81.0.10",       "10.81.0.100", 1500};
  Cleanup cleanup(**hv, net.name, opt.state_dir);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  auto cleanup_fail = [&](const Status& s) {
    cleanup.run();
    return fail(s);
  };
  if (Status s = ensure_network((*hv)->connection(), net); !s.is_ok()) return cleanup_fail(s);

  VmSpec spec;
  spec.name = kVmName;
  spec.vm_id = "vm-bench-cp";
  spec.pool = "bench-cp";
  spec.base_disk = image->disk.path;
  spec.kernel = image->kernel.path;
  spec.initrd = image->initrd.path;
  spec.cmdline = image->cmdline;
  spec.vcpus = 1;
  spec.memory_mib = 512;
  spec.network = net.name;
  spec.vcpu_pins = {host->cpus.back().id};
  spec.emulator_cpus = {host->cpus.front().id};
  if (Status s = (*hv)->create_vm(spec); !s.is_ok()) return cleanup_fail(s);
  bool up = false;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(240);
  while (SteadyClock::now() < deadline && g_interrupted == 0) {
    if ((*hv)->ping_agent(kVmName, std::chrono::seconds(2)).is_ok()) {
      up = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (!up) return cleanup_fail(unavailable("the guest agent did not come up", kVmName));

  json result = {{"benchmark", "armhive cp through the guest agent"},
                 {"emulated", host->accel != Accel::kKvm},
                 {"guest", {{"image", "tiny"}, {"vcpus", 1}, {"memory_mib", 512}}},
                 {"file_mib", opt.mib},
                 {"chunks",
                  {{"before", opt.before_chunk},
                   {"after_write", opt.after_write_chunk},
                   {"after_read", opt.after_read_chunk}}}};
  if (opt.breakdown) {
    auto rows = breakdown(**hv, opt);
    if (!rows.is_ok()) return cleanup_fail(rows.status());
    result["breakdown"] = *rows;
    result["breakdown_calls"] = opt.calls;
  }
  if (!opt.probe_mib.empty()) {
    auto rows = probe_limits(**hv, opt, false);
    if (!rows.is_ok()) return cleanup_fail(rows.status());
    result["probe_reads"] = *rows;
  }

  std::string data(static_cast<size_t>(opt.mib) << 20, '\0');
  std::mt19937_64 rng(20261201);
  for (size_t i = 0; i + 8 <= data.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(data.data() + i, &v, 8);
  }
  AgentCall agent = [&](const std::string& cmd, std::chrono::milliseconds timeout) {
    return (*hv)->agent_command(kVmName, cmd, timeout);
  };
  std::map<std::string, std::vector<double>> mibs;
  json samples = json::array();
  const double mib = static_cast<double>(data.size()) / (1 << 20);
  for (int i = 0; i < opt.samples && g_interrupted == 0; ++i) {
    for (const char* which : {"before", "after"}) {
      FileTransferOptions fo;
      const bool before = std::string(which) == "before";
      fo.write_chunk = before ? opt.before_chunk : opt.after_write_chunk;
      fo.read_chunk = before ? opt.before_chunk : opt.after_read_chunk;
      MemorySource source(data);
      GuestFilePut put{"/root/armhive-bench-cp.bin", GuestFileKind::kFile, data.size(), ""};
      auto t0 = SteadyClock::now();
      auto in = put_guest_file(agent, put, source, fo);
      const double in_s = seconds_since(t0);
      if (!in.is_ok()) return cleanup_fail(in.status());
      MemorySink sink;
      t0 = SteadyClock::now();
      auto out = get_guest_file(agent, put.path, sink, fo);
      const double out_s = seconds_since(t0);
      if (!out.is_ok()) return cleanup_fail(out.status());
      if (sink.data != data) return cleanup_fail(internal_error("the round trip changed bytes"));
      mibs[std::string(which) + "_in"].push_back(mib / in_s);
      mibs[std::string(which) + "_out"].push_back(mib / out_s);
      samples.push_back({{"sample", i},
                         {"chunk", which},
                         {"write_chunk_bytes", fo.write_chunk},
                         {"read_chunk_bytes", fo.read_chunk},
                         {"in_s", in_s},
                         {"out_s", out_s},
                         {"in_mib_s", mib / in_s},
                         {"out_mib_s", mib / out_s}});
      std::cerr << "bench: " << samples.back().dump() << "\n";
    }
  }
  (void)(*hv)->exec(kVmName,
                    {{"rm", "-f", "/root/armhive-bench-cp.bin"}, "", std::chrono::seconds(30)});
  // Last: a write libvirt cannot deliver leaves the agent unusable.
  if (!opt.probe_write_kib.empty()) {
    auto rows = probe_limits(**hv, opt, true);
    if (!rows.is_ok()) return cleanup_fail(rows.status());
    result["probe_writes"] = *rows;
  }
  if (g_interrupted != 0) return cleanup_fail(unavailable("interrupted"));
  result["samples"] = samples;
  for (const auto& [key, v] : mibs) result["spread_mib_s"][key] = spread_json(compute_spread(v));
  for (const char* dir : {"_in", "_out"}) {
    if (mibs.empty()) break;  // --samples 0: the breakdown and the probe only
    const double b = compute_spread(mibs[std::string("before") + dir]).median;
    const double a = compute_spread(mibs[std::string("after") + dir]).median;
    result[std::string("ratio_after_over_before") + dir] = b > 0 ? a / b : 0;
  }
  result["command"] = opt.command;
  result["host"] = {{"cpus", host->cpus.size()},
                    {"accel", host->accel == Accel::kKvm ? "kvm" : "tcg"}};
  std::ifstream loadavg("/proc/loadavg");
  std::string load;
  std::getline(loadavg, load);
  result["loadavg_at_end"] = load;
  cleanup.run();
  const std::string text = result.dump(2) + "\n";
  if (opt.out.empty()) {
    std::cout << text;
    std::cout.flush();
    return std::cout ? 0 : fail(unavailable("cannot write the result to stdout"));
  }
  // Written beside and renamed into place, so a failed run never leaves half a result file.
  const std::string tmp = opt.out + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return fail(unavailable("cannot write the result", opt.out));
    }
  }
  std::error_code ec;
  fs::rename(tmp, opt.out, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return fail(unavailable("cannot write the result: " + ec.message(), opt.out));
  }
  return 0;
}

}  // namespace
}  // namespace armhive

int main(int argc, char** argv) {
  armhive::Options opt;
  CLI::App app{"armhive cp through the guest agent: per-chunk costs and MiB/s at two chunk sizes"};
  app.add_option("--catalog", opt.catalog, "image catalogue with the tiny image")->required();
  app.add_option("--samples", opt.samples, "round trips per chunk size");
  app.add_option("--mib", opt.mib, "file size of the round trips, MiB");
  app.add_option("--before-chunk", opt.before_chunk, "bytes per agent call, 'before'");
  app.add_option("--after-write-chunk", opt.after_write_chunk, "bytes per write, 'after'");
  app.add_option("--after-read-chunk", opt.after_read_chunk, "bytes per read, 'after'");
  app.add_option("--sizes", opt.sizes, "breakdown payload sizes, bytes");
  app.add_option("--call-timeout", opt.call_timeout_s, "seconds per raw agent call");
  app.add_option("--calls", opt.calls, "agent calls per breakdown figure (median)");
  app.add_flag("!--no-breakdown", opt.breakdown, "skip the per-call breakdown");
  app.add_option("--probe-read-mib", opt.probe_mib, "MiB sizes of single reads to try");
  app.add_option("--probe-write-kib", opt.probe_write_kib,
                 "KiB sizes of single writes to try, ascending, after the reads");
  app.add_option("--out", opt.out, "JSON result file (default stdout)");
  app.add_option("--uri", opt.uri, "libvirt URI");
  app.add_option("--state-dir", opt.state_dir, "per-VM files (removed afterwards)");
  CLI11_PARSE(app, argc, argv);
  if (opt.sizes.empty()) opt.sizes = {48 * 1024};
  opt.command.assign(argv, argv + argc);
  return armhive::run(opt);
}
