// iperf3 through the access forward (daemon/access) against direct access to the guest, side by
// side in one run.
//
//   armhive-bench-forward --catalog DIR [--samples N] [--seconds S] [--out FILE.json]
//                         [--uri URI] [--state-dir DIR]
//
// Must run inside the sandbox network namespace (scripts/libvirt-sandbox run --name fwd --).
// One 1-vCPU guest of the catalogue's "tiny" image (vCPU on the host's last CPU, QEMU's other
// threads on the first, as armhived places them) on an isolated network; `iperf3 -s -D` in the
// guest; a ForwardTable forward from 127.0.0.1 to the guest's iperf3 port. Samples alternate
// direct / forward, in both directions (host → guest, and -R guest → host): `iperf3 -c … -t S -J`
// run on the host, parsed with parse_iperf3_json (the receiver's bits per second).
// Every figure is EMULATED when the host has no KVM for aarch64 (the JSON says so). The VM, its
// overlay, the storage pool, the network and the state directory are removed on every exit path.
// Results: bench/results/forward-<date>.json, summarised in BENCHMARKS.md.

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/process_runner.h"
#include "daemon/access/forward_table.h"
#include "daemon/bench/iperf3_parser.h"
#include "daemon/bench/stats.h"
#include "daemon/images/catalog.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/handles.h"
#include "daemon/virt/host_discovery.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "daemon/virt/network.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

volatile std::sig_atomic_t g_interrupted = 0;  // NOLINT: a signal flag must be a global
extern "C" void on_signal(int /*sig*/) { g_interrupted = 1; }

constexpr int kIperfPort = 5201;
constexpr const char* kVmName = "armhive-bench-fwd";

struct Options {
  std::string catalog;
  int samples = 5;
  int seconds = 5;
  std::string out;
  std::string uri = "qemu:///system";
  std::string state_dir = "/tmp/armhive-bench-forward";
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
    {
      ConnectPtr conn = hv_.connection().get();
      virStoragePoolPtr pool =
          virStoragePoolLookupByName(conn.get(), hv_.options().storage_pool.c_str());
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

Result<IperfResult> iperf3(const std::string& host, int port, int seconds, bool reverse) {
  std::vector<std::string> argv = {
      "iperf3", "-c", host, "-p", std::to_string(port), "-t", std::to_string(seconds), "-J"};
  if (reverse) argv.push_back("-R");
  SubprocessRunner run;
  auto r = run.run({.argv = argv, .timeout = std::chrono::seconds(seconds + 30)});
  if (!r.is_ok()) return r.status();
  auto parsed = parse_iperf3_json(r->out);
  if (!parsed.is_ok()) return parsed.status().annotate("iperf3 to " + host + ": " + r->err);
  return parsed;
}

json spread_json(const SampleSpread& s) {
  return {{"n", s.n},       {"median", s.median}, {"min", s.min}, {"max", s.max},
          {"mean", s.mean}, {"stddev", s.stddev}, {"cv", s.cv}};
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
  hv_opts.storage_pool = "armhive-bench-forward";
  hv_opts.accel = host->accel;
  auto hv = LibvirtHypervisor::open(hv_opts);
  if (!hv.is_ok()) return fail(hv.status());
  const NetworkSpec net{"armhive-bench-fwd", "ahbrf0",      "10.80.0.1/24",
                        "10.80.0.10",        "10.80.0.100", 1500};
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
  spec.vm_id = "vm-bench-fwd";
  spec.pool = "bench-forward";
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

  std::string address;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (std::chrono::steady_clock::now() < deadline && g_interrupted == 0) {
    if ((*hv)->ping_agent(kVmName, std::chrono::seconds(2)).is_ok()) {
      auto a = (*hv)->guest_address(kVmName);
      if (a.is_ok()) {
        address = *a;
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (address.empty()) return cleanup_fail(unavailable("the guest did not come up", kVmName));
  auto server = (*hv)->exec(
      kVmName,
      {{"iperf3", "-s", "-D", "-p", std::to_string(kIperfPort)}, "", std::chrono::seconds(30)});
  if (!server.is_ok()) return cleanup_fail(server.status());
  if (server->exit_code != 0) return cleanup_fail(unavailable("iperf3 -s: " + server->err));
  std::this_thread::sleep_for(std::chrono::seconds(1));

  AccessOptions access;
  access.listen_address = "127.0.0.1";
  access.port_min = 23000;
  access.port_max = 23009;
  auto table = ForwardTable::start(access, {});
  if (!table.is_ok()) return cleanup_fail(table.status());
  auto fwd = (*table)->open("bench", address, {kIperfPort});
  if (!fwd.is_ok()) return cleanup_fail(fwd.status());
  const int fwd_port = (*fwd)[0].port;

  // direct/forward × to-guest/from-guest, interleaved so both see the same machine.
  std::map<std::string, std::vector<double>> gbps;
  json samples = json::array();
  for (int i = 0; i < opt.samples && g_interrupted == 0; ++i) {
    for (bool reverse : {false, true}) {
      for (bool through : {false, true}) {
        auto r = through ? iperf3("127.0.0.1", fwd_port, opt.seconds, reverse)
                         : iperf3(address, kIperfPort, opt.seconds, reverse);
        if (!r.is_ok()) return cleanup_fail(r.status());
        const std::string key =
            std::string(through ? "forward" : "direct") + (reverse ? "_from_guest" : "_to_guest");
        double g = r->received_bits_per_second / 1e9;
        gbps[key].push_back(g);
        samples.push_back({{"sample", i}, {"path", key}, {"gbit_s", g}});
        std::cerr << "bench: " << key << " " << g << " Gbit/s\n";
      }
    }
  }
  (*table)->stop();
  if (g_interrupted != 0) return cleanup_fail(unavailable("interrupted"));

  json result = {{"benchmark", "forward-vs-direct iperf3"},
                 {"emulated", host->accel != Accel::kKvm},
                 {"guest", {{"image", "tiny"}, {"vcpus", 1}, {"memory_mib", 512}}},
                 {"iperf3_seconds", opt.seconds},
                 {"samples", samples}};
  for (const char* dir : {"_to_guest", "_from_guest"}) {
    SampleSpread d = compute_spread(gbps["direct" + std::string(dir)]);
    SampleSpread f = compute_spread(gbps["forward" + std::string(dir)]);
    result["spread"]["direct" + std::string(dir)] = spread_json(d);
    result["spread"]["forward" + std::string(dir)] = spread_json(f);
    result["ratio_forward_over_direct" + std::string(dir)] = d.median > 0 ? f.median / d.median : 0;
  }
  result["command"] = opt.command;
  result["host"] = {{"cpus", host->cpus.size()},
                    {"accel", host->accel == Accel::kKvm ? "kvm" : "tcg"}};
  cleanup.run();
  const std::string text = result.dump(2) + "\n";
  if (opt.out.empty()) {
    std::cout << text;
    std::cout.flush();
    if (!std::cout) return fail(unavailable("cannot write the result to stdout"));
    return 0;
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
  CLI::App app{"iperf3 through the access forward vs direct to the guest, side by side"};
  app.add_option("--catalog", opt.catalog, "image catalogue with the tiny image")->required();
  app.add_option("--samples", opt.samples, "samples per path and direction");
  app.add_option("--seconds", opt.seconds, "iperf3 -t");
  app.add_option("--out", opt.out, "JSON result file (default stdout)");
  app.add_option("--uri", opt.uri, "libvirt URI");
  app.add_option("--state-dir", opt.state_dir, "per-VM files (removed afterwards)");
  CLI11_PARSE(app, argc, argv);
  opt.command.assign(argv, argv + argc);
  return armhive::run(opt);
}
