// End-to-end: one armhived serves a lab of two libvirt hosts (scripts/libvirt-lab, "e2e: lab"),
// each its own libvirtd in its own network and mount namespaces, reached over qemu+tls://
// with the lab's certificates, as a HoneyComb board of a real lab would be. Through the API
// only, as a CI system and an admin see it: the second host joins through POST /v1/hosts (a
// host nobody answers for is refused, 503, naming it); the tiny image is shipped to each host
// through libvirt and is
// the catalogue's byte for byte; a pool spread over both hosts hands out warm VMs from both;
// a drained host takes no new VM, lets its lease finish and is then empty; a host whose
// libvirtd is stopped (SIGSTOP) turns its lease host_unreachable while the other host serves
// the next lease warm, and the lease resumes when the host answers within the grace period;
// stopped for longer, the lease ends as lost (its owner's event stream says so) and its VM is
// destroyed once the host answers. A restart drives the added host again and adopts every VM,
// with one host down as it starts too (driven as unreachable with the topology it had until it
// answers);
// the added host leaves once drained and empty; shipped images nothing uses any more are
// deleted. Nothing is left on either host.
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <string>

#include "base/sha256.h"
#include "daemon/virt/connection.h"
#include "daemon/virt/domain_xml.h"
#include "daemon/virt/handles.h"
#include "tests/support/daemon_process.h"
#include "tests/support/e2e_daemon.h"
#include "tests/support/e2e_guest.h"
#include "tests/support/lab.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr int kPort = 18481;
const std::string kInstance = "armhive-e2e-" + std::to_string(kPort);  // its overlay pool
// On each host's own disk (the lab binds its /var/lib/libvirt).
constexpr const char* kVmDir = "/var/lib/libvirt/armhive-lab/vms";
constexpr const char* kImageDir = "/var/lib/libvirt/armhive-lab/images";
constexpr const char* kImagePool = "armhive-images";

// Lab host k as POST /v1/hosts takes it (the keys of a [[hosts]] table).
HostCreateDto lab_host(int k) {
  HostCreateDto h;
  h.name = "h" + std::to_string(k);
  h.libvirt_uri = lab_host_tls_uri(k);
  h.labels = {{"board", "honeycomb"}};
  h.vm_dir = kVmDir;
  h.image_dir = kImageDir;
  h.network_guard = "host";  // the lab hosts have no guard of their own: a test lab, not a site
  h.housekeeping_cpus = "0";
  h.dedicated_cpus = "1";
  return h;
}

// h1 is configured; h2 is added through the API. h9 is configured too, but this lab has no
// ninth board: it never answers (nothing routes to its address from the controller).
std::string config_toml() {
  std::string toml;
  for (int k : {1, 9}) {
    toml += "\n[[hosts]]\nname = \"h" + std::to_string(k) + "\"\nlibvirt_uri = \"" +
            lab_host_tls_uri(k) + "\"\nlabels = { board = \"honeycomb\" }\nvm_dir = \"" + kVmDir +
            "\"\nimage_dir = \"" + kImageDir +
            "\"\nnetwork_guard = \"host\"\n[hosts.cpus]\nhousekeeping = \"0\"\n"
            "dedicated = \"1\"\n";
  }
  return toml + R"(
[access]
listen = "127.0.0.1"
port_min = 23100
port_max = 23119

[[pools]]
name = "lab"
image = "tiny"
vcpus = 1
memory_mib = 384
network = "armhive"
min_warm = 2
max = 2
max_starting = 1
default_ttl = "30m"
max_ttl = "1h"
host_labels = { board = "honeycomb" }
)";
}

// This test's domains on lab host k (their metadata names its instance), through the lab's
// plain connection (the test's own view, not armhived's).
std::set<std::string> domains_on(int k) {
  std::set<std::string> out;
  ConnectHandle conn(virConnectOpen(lab_host_uri(k).c_str()));
  if (!conn) {
    virResetLastError();
    return out;
  }
  virDomainPtr* doms = nullptr;
  int n = virConnectListAllDomains(conn.get(), &doms, 0);
  for (int i = 0; i < n; ++i) {
    DomainHandle dom(doms[i]);
    LibvirtString meta(
        virDomainGetMetadata(dom.get(), VIR_DOMAIN_METADATA_ELEMENT, kMetadataUri, 0));
    virResetLastError();
    if (!meta) continue;
    auto parsed = parse_metadata_xml(meta.get());
    if (parsed.is_ok() && parsed->instance == kInstance) out.insert(virDomainGetName(dom.get()));
  }
  std::free(doms);
  virResetLastError();
  return out;
}

// Removes what the test made on both hosts, whatever happened: its domains, the overlay and
// image pools and their volumes, the guest network.
struct LabCleanup {
  ~LabCleanup() {
    for (int k = 1; k <= 2; ++k) {
      auto conn = Connection::open(lab_host_uri(k));
      if (!conn.is_ok()) continue;
      for (const std::string& name : domains_on(k)) {
        auto dom = conn->lookup_domain(name);
        if (dom.is_ok()) virDomainDestroy(dom->get());
        virResetLastError();
      }
      drop_lab_pool(*conn, kInstance, std::string(kVmDir) + "/overlays");
      drop_lab_pool(*conn, kImagePool, kImageDir);
      NetworkHandle net(virNetworkLookupByName(conn->get()->get(), "armhive"));
      if (net) virNetworkDestroy(net.get());
      virResetLastError();
    }
  }
};

// The API's view of one host, by name.
HostDto host_view(Client& api, const std::string& name) {
  auto hosts = api.hosts();
  REQUIRE(hosts.is_ok());
  for (const HostDto& h : *hosts) {
    if (h.hostname == name) return h;
  }
  FAIL("no host " << name);
  return {};
}

std::string lease_state(Client& api, const std::string& id) {
  auto l = api.get_lease(id);
  return l.is_ok() ? l->state : "error: " + l.status().to_string();
}

int warm_vms(Client& api) {
  auto pools = api.pools();
  return pools.is_ok() && !pools->empty() ? pools->front().warm : -1;
}

TEST_CASE("one armhived serves a lab of two libvirt hosts over qemu+tls", "[lab][e2e][fleet]") {
  LabCleanup cleanup;  // last: after the daemon is gone
  const Image image = e2e_tiny_image();
  DaemonProcess daemon(e2e_state() + "/lab-armhived", e2e_state() + "/images", kPort,
                       config_toml());
  // Probed every second, unreachable after 3 s without an answer, lost after 45 s.
  daemon.set_engine_keys(
      "host_probe_period = \"1s\"\nhost_probe_timeout = \"3s\"\nunreachable_grace = \"45s\"\n"
      "image_gc_period = \"2s\"\n");
  daemon.set_host_keys("libvirt_timeout = \"8s\"\n");  // a host down at start costs this once
  Status started = daemon.start(180s);
  INFO(daemon.log());
  REQUIRE(started.is_ok());
  auto api = daemon.client();
  REQUIRE(api);

  // h1 serves alone until h2 joins through the API (an admin's POST /v1/hosts). A host libvirt
  // cannot reach is refused naming it and libvirt's error, and nothing of it stays.
  REQUIRE(eventually([&] { return warm_vms(*api) == 1; }, 600s, 1s));
  // h9 never answered: listed all the same, unreachable with libvirt's error and no CPUs.
  HostDto never = host_view(*api, "h9");
  CHECK(never.state == "unreachable");
  CHECK(never.accel == "unknown");
  CHECK(never.cores.empty());
  CHECK(never.uri == lab_host_tls_uri(9));
  CHECK_THAT(never.last_error, Catch::Contains("Network is unreachable"));  // libvirt's words
  HostCreateDto nowhere = lab_host(3);  // no third host in this lab: nothing answers there
  auto refused = api->add_host(nowhere);
  CHECK(refused.status().code() == ErrorCode::kUnavailable);  // 503
  CHECK_THAT(refused.status().message(), Catch::Contains("host h3 (" + nowhere.libvirt_uri));
  CHECK(api->hosts()->size() == 2);  // h1, and h9 never reached
  auto joined = api->add_host(lab_host(2));
  INFO(joined.status().to_string());
  REQUIRE(joined.is_ok());
  CHECK(joined->hostname == "h2");
  CHECK(api->add_host(lab_host(2)).status().code() == ErrorCode::kConflict);

  // Both hosts, each with its own topology discovered through libvirt.
  for (const std::string name : {"h1", "h2"}) {
    HostDto h = host_view(*api, name);
    CHECK(h.uri.rfind("qemu+tls://", 0) == 0);
    CHECK(h.labels.at("board") == "honeycomb");
    CHECK(h.state == "ok");
    CHECK(h.arch == "x86_64");
    CHECK(h.accel == "tcg");  // this machine's KVM has no say: the host's capabilities do
  }

  // The image reaches each host through libvirt, the catalogue's bytes exactly; then each host
  // boots a warm VM (spread: one each).
  REQUIRE(eventually([&] { return warm_vms(*api) == 2; }, 600s, 1s));
  for (int k = 1; k <= 2; ++k) {
    std::set<std::string> shipped;
    for (const auto& f : fs::directory_iterator(lab_host_disk(k, kImageDir))) {
      shipped.insert(sha256_file(f.path().string()).value());
    }
    INFO("host " << k);
    CHECK(shipped.count(image.disk.sha256) == 1);
    CHECK(shipped.count(image.kernel.sha256) == 1);
    CHECK(shipped.count(image.initrd.sha256) == 1);
    CHECK(domains_on(k).size() == 1);
  }

  // Shipped images no pool or VM uses go: a stale copy (as an image rebuilt since would leave)
  // is deleted from h1's pool, the current one and a volume not armhive's stay.
  {
    ConnectHandle conn(virConnectOpen(lab_host_uri(1).c_str()));
    REQUIRE(conn);
    StoragePoolHandle pool(virStoragePoolLookupByName(conn.get(), kImagePool));
    REQUIRE(pool);
    for (const char* name : {"armhive-img-0123456789abcdef-disk.qcow2", "site-notes.raw"}) {
      const std::string xml = std::string("<volume><name>") + name +
                              "</name><capacity unit='bytes'>65536</capacity><target><format "
                              "type='raw'/></target></volume>";
      StorageVolHandle vol(virStorageVolCreateXML(pool.get(), xml.c_str(), 0));
      REQUIRE(vol);
    }
    const fs::path dir = lab_host_disk(1, kImageDir);
    CHECK(eventually([&] { return !fs::exists(dir / "armhive-img-0123456789abcdef-disk.qcow2"); },
                     60s));
    CHECK(fs::exists(dir / "site-notes.raw"));
    std::set<std::string> kept;
    for (const auto& f : fs::directory_iterator(dir)) {
      kept.insert(sha256_file(f.path().string()).value());
    }
    CHECK(kept.count(image.disk.sha256) == 1);
    CHECK(kept.count(image.kernel.sha256) == 1);
    StorageVolHandle notes(virStorageVolLookupByName(pool.get(), "site-notes.raw"));
    if (notes) virStorageVolDelete(notes.get(), 0);
    virResetLastError();
  }

  const std::string key = make_ssh_key(daemon.state_dir());
  auto lease = [&](const std::string& want_host) {
    LeaseCreateRequest req;
    req.pool = "lab";
    req.ssh_keys = {key};
    auto l = api->create_lease(req);
    REQUIRE(l.is_ok());
    INFO(l->reason);
    REQUIRE(l->state == "ready");  // warm: handed out in the request itself
    CHECK(l->warm_handout);
    REQUIRE(l->vm);
    if (!want_host.empty()) CHECK(l->vm->host == want_host);
    return *l;
  };
  auto uname = [&](const std::string& id) {
    ExecRequestDto run;
    run.argv = {"/bin/uname", "-m"};
    auto r = api->exec(id, run);
    return r.is_ok() ? r->out : r.status().to_string();
  };

  // Hand-outs come from both hosts, and commands reach each VM through its own host.
  LeaseDto a = lease("");
  LeaseDto b = lease(a.vm->host == "h1" ? "h2" : "h1");
  CHECK(uname(a.id) == "aarch64\n");
  CHECK(uname(b.id) == "aarch64\n");
  // Behind each lab host's own isolated network: no forward from here, so no ssh block (its
  // address there may be another guest's here); the agent serves them all the same.
  CHECK_FALSE(a.ssh.has_value());
  CHECK_FALSE(api->get_lease(b.id)->ssh.has_value());
  const LeaseDto& on_h1 = a.vm->host == "h1" ? a : b;
  const LeaseDto& on_h2 = a.vm->host == "h1" ? b : a;

  // Drain h2: its lease runs on, no new VM goes there; once the lease ends h2 is empty.
  auto drained = api->set_host_admin("h2", "drain");
  REQUIRE(drained.is_ok());
  CHECK(drained->state == "draining");
  REQUIRE(api->release_lease(on_h1.id).is_ok());
  REQUIRE(eventually([&] { return warm_vms(*api) == 1; }, 300s, 1s));  // the refill, on h1
  LeaseDto c = lease("h1");
  CHECK(lease_state(*api, on_h2.id) == "ready");
  CHECK(uname(on_h2.id) == "aarch64\n");
  REQUIRE(api->release_lease(on_h2.id).is_ok());
  CHECK(eventually([&] { return domains_on(2).empty(); }, 120s));
  CHECK(warm_vms(*api) == 0);  // nothing refilled on the drained host
  REQUIRE(api->set_host_admin("h2", "undrain").is_ok());
  REQUIRE(eventually([&] { return warm_vms(*api) == 1; }, 300s, 1s));  // h2 serves again

  // h1's libvirtd stops answering (its guest runs on): its lease shows host_unreachable, and
  // the next lease is served at once, warm, by h2.
  {
    LabHostStop stop(1);
    CHECK(eventually([&] { return lease_state(*api, c.id) == "host_unreachable"; }, 60s));
    auto held = api->get_lease(c.id);
    REQUIRE(held.is_ok());
    CHECK_THAT(held->reason, Catch::Contains("host h1 unreachable"));
    CHECK(host_view(*api, "h1").state == "unreachable");
    LeaseDto d = lease("h2");
    CHECK(uname(d.id) == "aarch64\n");
    REQUIRE(api->release_lease(d.id).is_ok());
    stop.resume();
    // Back well within the grace period: the lease is ready again, its guest untouched.
    CHECK(eventually([&] { return lease_state(*api, c.id) == "ready"; }, 60s));
    CHECK(uname(c.id) == "aarch64\n");
    CHECK(api->get_lease(c.id)->expires_at == c.expires_at);
  }

  // Stopped for longer than the grace period: the lease ends as lost, its owner is told, and
  // its VM is destroyed once h1 answers again.
  {
    LabHostStop stop(1);
    CHECK(eventually([&] { return lease_state(*api, c.id) == "host_unreachable"; }, 60s));
    CHECK(eventually([&] { return lease_state(*api, c.id) == "lost"; }, 120s, 1s));
    CHECK_THAT(api->get_lease(c.id)->reason, Catch::Contains("longer than the grace of 45s"));
    bool told = false;
    REQUIRE(api->stream_events(0, false,
                               [&](const EventDto& e) {
                                 told = told || (e.lease_id == c.id && e.type == "lease.lost");
                                 return true;
                               })
                .is_ok());
    CHECK(told);
    stop.resume();
  }
  const fs::path overlay =
      lab_host_disk(1, std::string(kVmDir) + "/overlays/" + c.vm->name + ".qcow2");
  CHECK(eventually([&] { return domains_on(1).count(c.vm->name) == 0 && !fs::exists(overlay); },
                   120s));
  CHECK(eventually([&] { return host_view(*api, "h1").state == "ok"; }, 60s));

  // A restart drives h2 again (the API's hosts are kept) and adopts both hosts' VMs, even
  // with one host down as it starts: armhived serves from the other, drives the one down as
  // unreachable with the topology it had (its lease host_unreachable, nothing of it destroyed)
  // and takes it back, lease and all, once it answers.
  auto all_domains = [] {
    std::set<std::string> out = domains_on(1);
    for (const std::string& d : domains_on(2)) out.insert(d);
    return out;
  };
  REQUIRE(eventually([&] { return warm_vms(*api) == 2; }, 300s, 1s));
  LeaseDto e = lease("");
  const int down = e.vm->host == "h1" ? 1 : 2;
  REQUIRE(eventually([&] { return all_domains().size() == 2; }, 60s));  // at the pool's max
  const std::set<std::string> before_restart = all_domains();
  daemon.kill(SIGTERM);
  {
    LabHostStop stop(down);
    started = daemon.start(180s);
    INFO(daemon.log());
    REQUIRE(started.is_ok());
    api = daemon.client();
    // Refused twice in a row by its slot (1 s probes): unreachable.
    CHECK(eventually([&] { return host_view(*api, e.vm->host).state == "unreachable"; }, 60s));
    HostDto away = host_view(*api, e.vm->host);
    CHECK_THAT(away.last_error, Catch::Contains("host " + e.vm->host + " is not connected"));
    CHECK_FALSE(away.cores.empty());  // its topology from the last run
    CHECK(lease_state(*api, e.id) == "host_unreachable");
    CHECK(host_view(*api, down == 1 ? "h2" : "h1").state == "ok");
    stop.resume();
  }
  CHECK(eventually([&] { return lease_state(*api, e.id) == "ready"; }, 180s, 1s));
  CHECK(uname(e.id) == "aarch64\n");
  CHECK(host_view(*api, e.vm->host).state == "ok");
  CHECK(host_view(*api, "h2").uri == lab_host_tls_uri(2));
  CHECK(all_domains() == before_restart);  // adopted, not booted again
  REQUIRE(api->release_lease(e.id).is_ok());
  CHECK(eventually([&] { return warm_vms(*api) == 2; }, 300s, 1s));

  // h2 leaves: refused while it holds a VM; drained, it empties and goes.
  Status busy = api->remove_host("h2");
  CHECK(busy.code() == ErrorCode::kConflict);
  CHECK_THAT(busy.message(), Catch::Contains("drain it first"));
  CHECK(api->remove_host("h1").code() == ErrorCode::kConflict);  // the configuration's
  REQUIRE(api->set_host_admin("h2", "drain").is_ok());
  // Empty as armhived sees it: no core of h2 holds a VM (its destroy has finished).
  CHECK(eventually(
      [&] {
        for (const CoreDto& core : host_view(*api, "h2").cores) {
          if (!core.vm.empty()) return false;
        }
        return domains_on(2).empty();
      },
      120s));
  Status removed = api->remove_host("h2");
  INFO(removed.to_string());
  CHECK(removed.is_ok());
  CHECK(api->hosts()->size() == 2);  // h1, and h9 never reached

  // No lease is left, and every domain left on the hosts is a VM the pool knows (warm, or
  // booting to refill h1).
  LeaseQuery active;
  active.active = true;
  auto live = api->list_leases(active);
  REQUIRE(live.is_ok());
  CHECK(live->items.empty());
  CHECK(eventually(
      [&] {
        auto pools = api->pools();
        return pools.is_ok() &&
               static_cast<size_t>(pools->front().warm + pools->front().starting) ==
                   domains_on(1).size() + domains_on(2).size();
      },
      60s));
  daemon.kill(SIGTERM);
}

}  // namespace
}  // namespace armhive
