// End-to-end with a lab of two libvirt hosts (scripts/libvirt-lab): one LeaseEngine drives
// both over libvirt's remote protocol, as armhived will once it builds its hosts from
// [[hosts]]. The pool's image reaches each host through ShippingImageSource, the pool's warm
// VMs are spread over the two hosts, and leases are handed out from both with real aarch64
// guests: keys installed and commands run through each host's guest agent. A host whose
// libvirtd is stopped (SIGSTOP) turns its lease host_unreachable while the other host serves the
// next lease warm; continued, its lease is ready again. Nothing is left on either host afterwards.
#include <libvirt/virterror.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/core/clock.h"
#include "daemon/core/cpu_sets.h"
#include "daemon/core/topology.h"
#include "daemon/engine/lease_engine.h"
#include "daemon/store/database.h"
#include "daemon/store/sqlite_lease_store.h"
#include "daemon/virt/connection.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/host_discovery.h"
#include "daemon/virt/image_shipper.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "daemon/virt/network.h"
#include "daemon/virt/shipping_image_source.h"
#include "daemon/virt/storage.h"
#include "tests/support/e2e_guest.h"
#include "tests/support/lab.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

constexpr const char* kImagesPool = "armhive-fleet-images";
constexpr const char* kImagesDir = "/var/lib/libvirt/images/armhive-fleet-images";
constexpr const char* kVmsPool = "armhive-fleet-vms";
constexpr const char* kStateDir = "/var/lib/libvirt/images/armhive-fleet-vms";
const std::string kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk2b2hDb3JlS2V5Rm9yVGVzdHNPbmx5MTIzNDU2Nzg5 ci@lab";

// One lab host as the engine needs it: its connection (for shipping), hypervisor, network and
// image source. Its destructor removes what the test made on the host.
struct LabHost {
  std::string name;
  std::unique_ptr<Connection> conn;
  std::unique_ptr<LibvirtHypervisor> hv;
  std::unique_ptr<ShippingImageSource> images;
  std::string network = "armhive-fleet";

  LabHost(std::string host_name, const std::string& uri, const ImageResolver& catalogue)
      : name(std::move(host_name)) {
    auto c = Connection::open(uri);
    REQUIRE(c.is_ok());
    conn = std::make_unique<Connection>(std::move(c).value());
    LibvirtHypervisorOptions opts;
    opts.uri = uri;
    opts.state_dir = kStateDir;
    opts.storage_pool = kVmsPool;
    auto opened = LibvirtHypervisor::open(opts);
    INFO(opened.status().to_string());
    REQUIRE(opened.is_ok());
    hv = std::move(opened).value();
    NetworkSpec net{network, "ahfleet0", "10.231.10.1/24", "10.231.10.10", "10.231.10.100", 1500};
    REQUIRE(ensure_network(hv->connection(), net).is_ok());
    images = std::make_unique<ShippingImageSource>(*conn, name, kImagesPool, kImagesDir, catalogue,
                                                   500ms);
  }
  ~LabHost() {
    images.reset();
    if (hv) {
      auto left = hv->list_vms();
      if (left.is_ok()) {
        for (const VmInfo& vm : *left) (void)hv->destroy_vm(vm.name);
      }
      (void)remove_network(hv->connection(), network);
      drop_lab_pool(hv->connection(), kVmsPool, std::string(kStateDir) + "/overlays");
    }
    if (conn) drop_lab_pool(*conn, kImagesPool, kImagesDir);
  }
};

TEST_CASE("one engine hands out real guests from two lab hosts", "[lab][e2e][fleet]") {
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  const Image image = e2e_tiny_image();
  BootImage local{
      "tiny",        image.version,   image.disk.path, image.kernel.path, image.initrd.path,
      image.cmdline, image.login_user};
  ImageResolver catalogue = [&](const std::string& name) -> Result<BootImage> {
    if (name != "tiny") return not_found("no image \"" + name + "\"");
    return local;
  };
  LabHost h1("h1", lab_host_uri(1), catalogue);
  LabHost h2("h2", lab_host_uri(2), catalogue);

  auto db = Database::open(":memory:");
  REQUIRE(db.is_ok());
  auto store = SqliteLeaseStore::open(**db);
  REQUIRE(store.is_ok());
  SystemClock clock;

  PoolConfig pool;
  pool.name = "lab";
  pool.image = "tiny";
  pool.vcpus = 1;
  pool.memory_mib = 512;
  pool.network = "armhive-fleet";
  pool.min_warm = 2;
  pool.max = 3;
  pool.max_starting = 1;
  pool.default_ttl = 1800s;
  pool.max_ttl = 3600s;
  EngineOptions options;
  options.pools = {pool};
  options.threads = 2;
  options.boot_timeout = 300s;
  options.schedule_period = 200ms;
  options.reconcile_period = 3600s;
  options.host_probe_period = 0ms;  // the test probes (probe_hosts) when it wants to know
  options.host_probe_timeout = 5s;

  // Each host's topology as armhived discovers a remote host: from its libvirt capabilities
  // (no sysfs of ours, no /dev/kvm probe). Pins must name CPUs the host has.
  std::vector<EngineHost> hosts;
  for (LabHost* h : {&h1, &h2}) {
    DiscoveryOptions discovery;
    discovery.sysfs_root.clear();
    discovery.kvm_usable = false;
    auto t = discover_host(*h->conn, discovery);
    INFO(t.status().to_string());
    REQUIRE(t.is_ok());
    auto cores = CoreAllocator::create(*t, default_cpu_sets(*t));
    REQUIRE(cores.is_ok());
    ShippingImageSource* source = h->images.get();
    hosts.push_back({h->name,
                     h->hv.get(),
                     std::move(cores).value(),
                     [source](const std::string& name) { return source->resolve(name); },
                     {{"board", "honeycomb"}}});
  }
  LeaseEngine engine(options, std::move(hosts), **store, clock, nullptr);
  REQUIRE(engine.start().is_ok());

  // Both hosts get a warm VM (one each: spread), once the image has reached them.
  auto warm_on_both = [&] {
    auto a = h1.hv->list_vms();
    auto b = h2.hv->list_vms();
    auto pools = engine.pools();
    return a.is_ok() && b.is_ok() && a->size() == 1 && b->size() == 1 && pools[0].warm == 2;
  };
  const auto deadline = std::chrono::steady_clock::now() + 600s;
  while (!warm_on_both() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(500ms);
  }
  for (const HostView& v : engine.hosts()) INFO(v.topology.hostname << ": " << v.last_error);
  REQUIRE(warm_on_both());

  // A lease takes one warm VM; the other stays warm on the other host (each lab host has room
  // for one VM: one dedicated CPU).
  auto lease = [&] {
    LeaseRequest req;
    req.pool = "lab";
    req.owner = "ci";
    req.ssh_keys = {kKey};
    auto created = engine.create_lease(req);
    REQUIRE(created.is_ok());
    auto ready = engine.wait_lease(created->id, 120s);
    REQUIRE(ready.is_ok());
    INFO(ready->reason);
    REQUIRE(ready->state == LeaseState::kReady);
    CHECK(ready->warm_handout);
    return *ready;
  };
  const Lease first = lease();
  const std::string other_host = first.host == "h1" ? "h2" : "h1";

  // The first lease's host hangs: its libvirtd is stopped (SIGSTOP), its guest runs on. Its
  // probe misses the deadline, the lease shows host_unreachable, and the next lease is served
  // at once, warm, by the other host.
  LabHostStop stop(first.host == "h1" ? 1 : 2);
  CHECK(engine.probe_hosts() == std::vector<std::string>{first.host});
  auto held = engine.get_lease(first.id);
  REQUIRE(held.is_ok());
  CHECK(held->state == LeaseState::kHostUnreachable);
  CHECK(held->reason.find("host " + first.host + " unreachable") != std::string::npos);
  const Lease second = lease();
  CHECK(second.host == other_host);

  // The host answers again, well within the grace period: its lease is ready again, the guest
  // having run on meanwhile.
  stop.resume();
  std::vector<std::string> still = engine.probe_hosts();
  for (int i = 0; i < 60 && !still.empty(); ++i) {  // the stopped call returns first
    std::this_thread::sleep_for(1s);
    still = engine.probe_hosts();
  }
  CHECK(still.empty());
  auto resumed = engine.get_lease(first.id);
  REQUIRE(resumed.is_ok());
  CHECK(resumed->state == LeaseState::kReady);

  std::vector<std::string> ids{first.id, second.id};
  std::set<std::string> served_by;
  std::vector<std::pair<LabHost*, std::string>> vms;  // each lease's host and domain
  for (const Lease& l : {first, second}) {
    served_by.insert(l.host);
    // The guest is the one on that host: its agent answers there, and it runs aarch64.
    auto uname = engine.exec(l.id, GuestExecRequest{{"/bin/uname", "-m"}, "", 60s});
    REQUIRE(uname.is_ok());
    CHECK(uname->out == "aarch64\n");
    auto keys =
        engine.exec(l.id, GuestExecRequest{{"/bin/cat", "/root/.ssh/authorized_keys"}, "", 60s});
    REQUIRE(keys.is_ok());
    CHECK(keys->out.find(kKey) != std::string::npos);
    LabHost& host = l.host == "h1" ? h1 : h2;
    CHECK(host.hv->connection().lookup_domain(l.vm_name).is_ok());
    vms.emplace_back(&host, l.vm_name);
  }
  CHECK(served_by == std::set<std::string>{"h1", "h2"});

  // Released: each VM is destroyed on its own host.
  for (const std::string& id : ids) REQUIRE(engine.release_lease(id).is_ok());
  for (const std::string& id : ids) {
    auto ended = engine.wait_lease(id, 60s);
    REQUIRE(ended.is_ok());
    CHECK(ended->state == LeaseState::kReleased);
  }
  for (const auto& [host, vm] : vms) {
    INFO(host->name << ": " << vm);
    CHECK(host->hv->connection().lookup_domain(vm).status().code() == ErrorCode::kNotFound);
    auto files = host->hv->list_vm_files();
    REQUIRE(files.is_ok());
    CHECK(std::find(files->begin(), files->end(), vm) == files->end());
  }
  engine.stop();
}

}  // namespace
}  // namespace armhive
