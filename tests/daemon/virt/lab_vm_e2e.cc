// End-to-end with a lab of libvirt hosts (scripts/libvirt-lab): a real aarch64 guest on host 1,
// driven by LibvirtHypervisor over libvirt's remote protocol only. Its base image, kernel and
// initrd are volumes shipped into the host's storage pool, its overlay is made by the host's
// libvirtd in the host's own file system, and its console is read through libvirt's console
// stream: nothing of the VM is on this machine's disk, which is what a real lab's boards need.
#include <libvirt/virterror.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/images/catalog.h"
#include "daemon/virt/connection.h"
#include "daemon/virt/dhcp_reservation.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/image_shipper.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "daemon/virt/network.h"
#include "daemon/virt/storage.h"
#include "tests/support/e2e_guest.h"
#include "tests/support/files.h"
#include "tests/support/lab.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kImagesPool = "armhive-lab-images";
// Paths as host 1 sees them (inside its mount namespace); /var/lib/libvirt is the host's own.
constexpr const char* kImagesDir = "/var/lib/libvirt/images/armhive-lab-images";
constexpr const char* kStateDir = "/var/lib/libvirt/images/armhive-lab-vms";
constexpr const char* kHostUri = "qemu+tcp://10.79.1.2/system";

// Where host 1's overlay of the test VM lies on this machine's disk.
fs::path overlay_on_host_disk(const std::string& overlay) {
  return lab_host_disk(1, std::string(kStateDir) + "/" + overlay);
}

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST_CASE("a guest boots on a lab host with nothing of it on this machine's disk", "[lab][e2e]") {
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  const Image image = e2e_tiny_image();
  REQUIRE(is_remote_uri(kHostUri));

  // The image reaches the host the way armhived ships it: volume upload streams.
  auto conn = Connection::open(kHostUri);
  REQUIRE(conn.is_ok());
  REQUIRE(ensure_dir_pool(*conn, kImagesPool, kImagesDir).is_ok());
  struct ImagesCleanup {
    Connection& c;
    ~ImagesCleanup() { drop_lab_pool(c, kImagesPool, kImagesDir); }
  } images_cleanup{*conn};
  auto ship = [&](const ImageFile& f) {
    auto shipped = ship_file(*conn, kImagesPool, f.path, f.sha256);
    INFO(f.path << ": " << shipped.status().to_string());
    REQUIRE(shipped.is_ok());
    return shipped->path;
  };
  const std::string disk = ship(image.disk);
  const std::string kernel = ship(image.kernel);
  const std::string initrd = ship(image.initrd);

  LibvirtHypervisorOptions opts;
  opts.uri = kHostUri;
  opts.state_dir = kStateDir;
  opts.storage_pool = "armhive-lab-vms";
  auto opened = LibvirtHypervisor::open(opts);
  INFO(opened.status().to_string());
  REQUIRE(opened.is_ok());
  std::unique_ptr<LibvirtHypervisor> hv = std::move(opened).value();
  NetworkSpec net{"armhive-lab-vm", "ahlabvm0",     "10.231.9.1/24",
                  "10.231.9.10",    "10.231.9.100", 1500};
  REQUIRE(ensure_network(hv->connection(), net).is_ok());
  struct NetworkCleanup {
    LibvirtHypervisor& hv;
    std::string name;
    ~NetworkCleanup() { (void)remove_network(hv.connection(), name); }
  } net_cleanup{*hv, net.name};

  VmSpec spec;
  spec.name = "armhive-lab-vm-1";
  spec.vm_id = "vm-lab-1";
  spec.pool = "lab";
  spec.base_disk = disk;
  spec.kernel = kernel;
  spec.initrd = initrd;
  // loglevel=7: the kernel's first line ("Booting Linux ...") reaches the console.
  spec.cmdline = image.cmdline + " loglevel=7 armhive.hostname=lab-vm";
  spec.vcpus = 1;
  spec.memory_mib = 512;
  spec.network = net.name;

  SECTION("bad input leaves nothing on the host") {
    // A base image that is not one of the host's volumes (here: this machine's own copy).
    VmSpec local = spec;
    local.base_disk = image.disk.path;
    Status s = hv->create_vm(local);
    CHECK(s.code() == ErrorCode::kNotFound);
    CHECK(s.field() == "base_disk");
    CHECK(s.message().find(kHostUri) != std::string::npos);
    // UEFI boot would copy its vars file on this machine: refused, naming the field to change.
    VmSpec uefi = spec;
    uefi.kernel.clear();
    uefi.initrd.clear();
    Status u = hv->create_vm(uefi);
    CHECK(u.code() == ErrorCode::kInvalidArgument);
    CHECK(u.field() == "kernel");
    auto files = hv->list_vm_files();
    REQUIRE(files.is_ok());
    CHECK_FALSE(listed(*files, spec.name));
    CHECK(hv->connection().lookup_domain(spec.name).status().code() == ErrorCode::kNotFound);
  }

  SECTION("boots, is listed, shows its console from the first line, and is removed whole") {
    struct VmCleanup {
      LibvirtHypervisor& hv;
      std::string name;
      ~VmCleanup() { (void)hv.destroy_vm(name); }
    } vm_cleanup{*hv, spec.name};
    Status created = hv->create_vm(spec);
    INFO(created.to_string());
    REQUIRE(created.is_ok());

    // The overlay is in the host's own file system, and not in this machine's.
    const std::string overlay = std::string("overlays/") + spec.name + ".qcow2";
    CHECK(fs::exists(overlay_on_host_disk(overlay)));
    CHECK_FALSE(fs::exists(fs::path(kStateDir)));
    CHECK(hv->paths_for(spec.name).console_log.empty());

    bool agent_ok = false;
    std::string log;
    const auto deadline = Clock::now() + std::chrono::seconds(240);
    while (Clock::now() < deadline && !agent_ok) {
      agent_ok = hv->ping_agent(spec.name, std::chrono::seconds(2)).is_ok();
      if (!agent_ok) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    log = hv->console_log(spec.name, 1 << 20).value_or("");
    INFO("console:\n" << (log.size() > 3000 ? log.substr(log.size() - 3000) : log));
    REQUIRE(agent_ok);
    // Captured from the first line: the domain started paused until its console was open.
    CHECK(log.find("Booting Linux") != std::string::npos);
    CHECK(log.find("armhive") != std::string::npos);
    auto uname =
        hv->exec(spec.name, GuestExecRequest{{"/bin/uname", "-m"}, "", std::chrono::seconds(30)});
    REQUIRE(uname.is_ok());
    CHECK(uname->out == "aarch64\n");

    {
      // A restarted daemon (here a second hypervisor on the host) has none of the output before
      // it started, and captures the running VM once it lists it.
      auto restarted = LibvirtHypervisor::open(opts);
      REQUIRE(restarted.is_ok());
      LibvirtHypervisor& again = **restarted;
      CHECK(again.console_log(spec.name, 100).status().code() == ErrorCode::kNotFound);
      REQUIRE(again.list_vms().is_ok());
      std::string seen;
      for (int i = 0; i < 60 && seen.find("armhive-lab-marker") == std::string::npos; ++i) {
        auto echo = again.exec(
            spec.name, GuestExecRequest{{"/bin/sh", "-c", "echo armhive-lab-marker > /dev/console"},
                                        "",
                                        std::chrono::seconds(10)});
        REQUIRE(echo.is_ok());
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        seen = again.console_log(spec.name, 4096).value_or("");
      }
      CHECK(seen.find("armhive-lab-marker") != std::string::npos);
      CHECK(seen.find("Booting Linux") == std::string::npos);
    }

    auto vms = hv->list_vms();
    REQUIRE(vms.is_ok());
    REQUIRE(vms->size() == 1);
    CHECK(vms->front().name == spec.name);
    CHECK(vms->front().running);
    CHECK(vms->front().qemu_pid == 0);  // a pid of another host means nothing here
    auto files = hv->list_vm_files();
    REQUIRE(files.is_ok());
    CHECK(*files == std::vector<std::string>{spec.name});

    REQUIRE(hv->destroy_vm(spec.name).is_ok());
    CHECK(hv->connection().lookup_domain(spec.name).status().code() == ErrorCode::kNotFound);
    auto after = hv->list_vm_files();
    REQUIRE(after.is_ok());
    CHECK(after->empty());
    CHECK_FALSE(fs::exists(overlay_on_host_disk(overlay)));
    CHECK(hv->console_log(spec.name, 100).status().code() == ErrorCode::kNotFound);
    auto reservation = find_dhcp_host(hv->connection(), net.name, spec.name);
    REQUIRE(reservation.is_ok());
    CHECK_FALSE(reservation->has_value());
  }
  drop_lab_pool(hv->connection(), opts.storage_pool, std::string(kStateDir) + "/overlays");
}

}  // namespace
}  // namespace armhive
