#include "tests/support/e2e_guest.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "daemon/virt/host_discovery.h"
#include "tests/support/files.h"

namespace armhive {

Image e2e_tiny_image() {
  const std::string dir = env_or("ARMHIVE_E2E_STATE", "/var/lib/armhive/e2e") + "/images";
  auto catalog = ImageCatalog::open(dir);
  INFO("e2e catalogue " << dir << ": " << catalog.status().to_string());
  REQUIRE(catalog.is_ok());
  auto image = catalog->find("tiny");
  INFO(image.status().to_string());
  REQUIRE(image.is_ok());
  Status verified = catalog->verify(*image);
  INFO(verified.to_string());
  REQUIRE(verified.is_ok());
  REQUIRE(image->boot == "kernel");
  return *image;
}

E2eHypervisor open_e2e_hypervisor(const std::string& uri, const std::filesystem::path& state,
                                  const std::string& storage_pool,
                                  const std::optional<NetworkSpec>& network) {
  E2eHypervisor e2e;
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  e2e.loop = std::move(loop).value();
  auto conn = Connection::open(uri);
  REQUIRE(conn.is_ok());
  auto host = discover_host(*conn, {});
  INFO(host.status().to_string());
  REQUIRE(host.is_ok());
  e2e.host = *host;

  std::filesystem::remove_all(state);
  std::filesystem::create_directories(state);
  LibvirtHypervisorOptions opts;
  opts.uri = uri;
  opts.state_dir = (state / "vms").string();
  opts.storage_pool = storage_pool;
  opts.accel = e2e.host.accel;
  auto hv = LibvirtHypervisor::open(opts);
  INFO(hv.status().to_string());
  REQUIRE(hv.is_ok());
  e2e.hv = std::move(hv).value();
  if (network) {
    Status s = ensure_network(e2e.hv->connection(), *network);
    INFO(s.to_string());
    REQUIRE(s.is_ok());
  }
  return e2e;
}

E2eGuest::~E2eGuest() {
  if (!e2e_.hv) return;
  if (created_) (void)e2e_.hv->destroy_vm(spec_.name);
  if (!network_.empty()) (void)remove_network(e2e_.hv->connection(), network_);
}

void E2eGuest::boot(const E2eGuestOptions& o) {
  using namespace std::chrono_literals;
  using SteadyClock = std::chrono::steady_clock;
  image_ = e2e_tiny_image();
  state_ =
      std::filesystem::path(env_or("ARMHIVE_E2E_STATE", "/var/lib/armhive/e2e")) / (o.tag + "-e2e");
  e2e_ = open_e2e_hypervisor(env_or("ARMHIVE_BENCH_E2E_URI", "qemu:///system"), state_,
                             "armhive-" + o.tag + "-e2e", o.net);
  network_ = o.net.name;
  spec_.name = "armhive-" + o.tag + "-e2e-1";
  spec_.vm_id = "vm-" + o.tag + "-e2e-1";
  spec_.pool = o.pool;
  spec_.base_disk = image_.disk.path;
  spec_.kernel = image_.kernel.path;
  spec_.initrd = image_.initrd.path;
  spec_.cmdline = image_.cmdline + " armhive.hostname=" + o.tag + "-e2e";
  spec_.vcpus = o.vcpus;
  spec_.memory_mib = o.memory_mib;
  spec_.network = o.net.name;
  spec_.mtu = o.nic_mtu > 0 ? o.nic_mtu : o.net.mtu;
  Status created = e2e_.hv->create_vm(spec_);
  INFO(created.to_string());
  REQUIRE(created.is_ok());
  created_ = true;

  bool agent = false;
  for (auto deadline = SteadyClock::now() + 240s; SteadyClock::now() < deadline;) {
    if (e2e_.hv->ping_agent(spec_.name, 2s).is_ok()) {
      agent = true;
      break;
    }
    std::this_thread::sleep_for(500ms);
  }
  INFO("console: " << e2e_.hv->console_log(spec_.name, 3000).value_or(""));
  REQUIRE(agent);
  if (!o.wait_address) return;
  Result<std::string> addr = unavailable("no address yet");
  for (int i = 0; i < 120 && !addr.is_ok(); ++i) {
    addr = e2e_.hv->guest_address(spec_.name);
    if (!addr.is_ok()) std::this_thread::sleep_for(500ms);
  }
  INFO(addr.status().to_string());
  REQUIRE(addr.is_ok());
  address_ = *addr;
}

LeaseTarget E2eGuest::target() const {
  LeaseTarget t;
  t.vm_name = spec_.name;
  t.address = address_;
  t.pool = spec_.pool;
  t.host = e2e_.host.hostname;
  t.host_arch = e2e_.host.arch;
  t.guest_arch = "aarch64";
  t.vcpus = spec_.vcpus;
  t.mtu = spec_.mtu;
  t.emulated = e2e_.host.accel != Accel::kKvm;
  if (!image_.corpus_path.empty()) {  // else the default path the image builder uses
    t.corpus_path = image_.corpus_path;
    t.corpus_bytes = image_.corpus_bytes;
    t.corpus_seed = image_.corpus_seed;
    t.corpus_sha256 = image_.corpus_sha256;
  }
  return t;
}

}  // namespace armhive
