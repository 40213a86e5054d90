// Integration tests against libvirt's in-process test:/// driver: call flow, events, metadata,
// error conversion. The driver validates little, so XML content is covered by unit tests.
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "daemon/virt/connection.h"
#include "daemon/virt/domain_events.h"
#include "daemon/virt/domain_xml.h"
#include "daemon/virt/error.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/handles.h"
#include "daemon/virt/host_discovery.h"
#include "daemon/virt/libvirt_hypervisor.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

// Collects events delivered on the loop thread; waits (bounded) for a given one.
class EventRecorder {
 public:
  void record(const VmEvent& e) {
    std::lock_guard lock(mu_);
    events_.push_back(e);
    cv_.notify_all();
  }
  bool wait_for(const std::string& name, VmEventKind kind) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] {
      for (const auto& e : events_) {
        if (e.name == name && e.kind == kind) return true;
      }
      return false;
    });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<VmEvent> events_;
};

// A temporary directory removed when the test ends.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag)
      : path(fs::temp_directory_path() /
             ("armhive-virt-" + tag + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A qcow2 header is all the test driver (and our size probe) looks at: 1 GiB virtual size.
void write_qcow2_header(const fs::path& path) {
  unsigned char header[32] = {'Q', 'F', 'I', 0xfb, 0, 0, 0, 3};
  header[24 + 4] = 0x40;
  FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fwrite(header, 1, sizeof header, f);
  std::fclose(f);
}

// A private test:/// state per connection: test:///ABS/PATH.xml needs a node file.
std::string private_test_uri(const fs::path& dir) {
  fs::path node = dir / "node.xml";
  FILE* f = std::fopen(node.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fputs(
      "<node><cpu><nodes>1</nodes><sockets>1</sockets><cores>4</cores><threads>1</threads>"
      "<active>4</active><mhz>2000</mhz><model>aarch64</model></cpu>"
      "<memory>8388608</memory></node>",
      f);
  std::fclose(f);
  return "test://" + node.string();
}

constexpr const char* kDomainXml = R"(<domain type='test'>
  <name>armhive-itest-1</name>
  <metadata><armhive:vm xmlns:armhive='https://armhive.dev/xmlns/domain/1'><vm_id>vm-1</vm_id><pool>p &amp; q</pool><lease_id/><labels/></armhive:vm></metadata>
  <memory unit='MiB'>256</memory>
  <vcpu>2</vcpu>
  <cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/><emulatorpin cpuset='0'/></cputune>
  <os><type>hvm</type></os>
</domain>)";

TEST_CASE("Connection opens test:///default, keepalive unsupported is not fatal",
          "[virt][libvirt]") {
  auto conn = Connection::open("test:///default");
  REQUIRE(conn.is_ok());
  CHECK_FALSE(conn->disconnected());
  CHECK(conn->get().value() != nullptr);
  CHECK(conn->uri() == "test:///default");
  REQUIRE(conn->reconnect().is_ok());
  CHECK_FALSE(conn->disconnected());
  // test:///default always has the domain "test".
  CHECK(conn->lookup_domain("test").is_ok());
}

TEST_CASE("an in-process driver's connection is one for every thread and every user",
          "[virt][libvirt]") {
  // test:///PATH.xml keeps its state per connection: domains defined through one thread's
  // connection must be seen from every other thread and by the event subscription.
  TempDir tmp("itest-shared");
  auto conn = Connection::open(private_test_uri(tmp.path));
  REQUIRE(conn.is_ok());
  ConnectPtr here = conn->get().value();
  ConnectPtr there;
  std::thread([&] { there = conn->get().value(); }).join();
  CHECK(there == here);
  CHECK(conn->open_dedicated().value() == here);
  DomainHandle dom(virDomainDefineXML(here.get(), kDomainXml));
  REQUIRE(dom);
  bool seen = false;  // Catch2 assertions stay on the test's thread
  std::thread([&] { seen = conn->lookup_domain("armhive-itest-1").is_ok(); }).join();
  CHECK(seen);
  REQUIRE(virDomainUndefine(dom.get()) == 0);
}

TEST_CASE("Connection::open of an unreachable URI is kUnavailable", "[virt][libvirt]") {
  auto conn = Connection::open("qemu+unix:///system?socket=/nonexistent/armhive.sock");
  REQUIRE_FALSE(conn.is_ok());
  CHECK(conn.status().code() == ErrorCode::kUnavailable);
}

TEST_CASE("libvirt errors on a missing domain name it and map to kNotFound", "[virt][libvirt]") {
  auto conn = Connection::open("test:///default");
  REQUIRE(conn.is_ok());
  auto dom = conn->lookup_domain("armhive-no-such-vm");
  REQUIRE_FALSE(dom.is_ok());
  CHECK(dom.status().code() == ErrorCode::kNotFound);
  CHECK(dom.status().context() == "armhive-no-such-vm");
  CHECK(dom.status().message().find("look up domain") != std::string::npos);
  CHECK(libvirt_error_code(VIR_ERR_OPERATION_INVALID) == ErrorCode::kConflict);
  CHECK(libvirt_error_code(VIR_ERR_AGENT_UNRESPONSIVE) == ErrorCode::kTimeout);
  CHECK(libvirt_error_code(VIR_ERR_XML_ERROR) == ErrorCode::kInvalidArgument);
  CHECK(libvirt_error_code(VIR_ERR_NO_CONNECT) == ErrorCode::kUnavailable);
}

TEST_CASE("define, start, events, metadata round trip, destroy, undefine", "[virt][libvirt]") {
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  TempDir tmp("itest");
  auto conn = Connection::open(private_test_uri(tmp.path));
  REQUIRE(conn.is_ok());
  EventRecorder rec;  // outlives the subscription
  auto events = DomainEvents::attach(*conn);
  REQUIRE(events.is_ok());
  (*events)->subscribe([&](const VmEvent& e) { rec.record(e); });

  ConnectPtr c = conn->get().value();
  DomainHandle dom(virDomainDefineXML(c.get(), kDomainXml));
  REQUIRE(dom);
  REQUIRE(virDomainCreate(dom.get()) == 0);
  CHECK(rec.wait_for("armhive-itest-1", VmEventKind::kStarted));

  // Metadata set live, read back through the parser.
  VmMetadata m{"vm-1", "p & q", "lease-7", {{"team", "<kernel>"}}};
  auto bare = build_metadata_xml(m, false);
  REQUIRE(bare.is_ok());
  REQUIRE(virDomainSetMetadata(dom.get(), VIR_DOMAIN_METADATA_ELEMENT, bare->c_str(), kMetadataKey,
                               kMetadataUri, VIR_DOMAIN_AFFECT_LIVE) == 0);
  LibvirtString got(virDomainGetMetadata(dom.get(), VIR_DOMAIN_METADATA_ELEMENT, kMetadataUri,
                                         VIR_DOMAIN_AFFECT_LIVE));
  REQUIRE(got);
  auto parsed = parse_metadata_xml(got.get());
  REQUIRE(parsed.is_ok());
  CHECK(*parsed == m);

  LibvirtString xml(virDomainGetXMLDesc(dom.get(), 0));
  REQUIRE(xml);
  auto desc = parse_domain_xml(xml.get());
  REQUIRE(desc.is_ok());
  CHECK(desc->vcpu_pins == std::vector<int>{2, 3});
  CHECK(desc->emulator_cpus == std::vector<int>{0});
  REQUIRE(desc->metadata.has_value());
  CHECK(desc->metadata->lease_id == "lease-7");

  REQUIRE(virDomainDestroy(dom.get()) == 0);
  CHECK(rec.wait_for("armhive-itest-1", VmEventKind::kStopped));
  // Destroying a stopped domain is a state conflict, named after the domain.
  REQUIRE(virDomainDestroy(dom.get()) < 0);
  Status s = libvirt_error("destroy domain", "armhive-itest-1");
  CHECK(s.code() == ErrorCode::kConflict);
  CHECK(s.context() == "armhive-itest-1");
  REQUIRE(virDomainUndefine(dom.get()) == 0);
  CHECK(conn->lookup_domain("armhive-itest-1").status().code() == ErrorCode::kNotFound);
}

TEST_CASE("a storage pool of the same name on another directory is refused at open",
          "[virt][libvirt][hypervisor]") {
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  TempDir a("pool-a");
  TempDir b("pool-b");
  // test:///default is one driver instance per process: both hypervisors see the same pools.
  LibvirtHypervisorOptions opts;
  opts.uri = "test:///default";
  opts.state_dir = (a.path / "vms").string();
  opts.storage_pool = "armhive-itest-clash";
  opts.qemu_runtime_dir.clear();
  auto first = LibvirtHypervisor::open(opts);
  INFO(first.status().to_string());
  REQUIRE(first.is_ok());
  opts.state_dir = (b.path / "vms").string();
  auto second = LibvirtHypervisor::open(opts);
  REQUIRE_FALSE(second.is_ok());
  CHECK(second.status().code() == ErrorCode::kConflict);
  CHECK(second.status().message().find(a.path.string()) != std::string::npos);
  CHECK(second.status().message().find(b.path.string()) != std::string::npos);
  StoragePoolHandle pool(
      virStoragePoolLookupByName(first.value()->connection().get()->get(), "armhive-itest-clash"));
  REQUIRE(pool);
  virStoragePoolDestroy(pool.get());
}

TEST_CASE("LibvirtHypervisor on test:/// creates, lists, leases and destroys a VM",
          "[virt][libvirt][hypervisor]") {
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  TempDir tmp("hv");
  const fs::path& state = tmp.path;
  fs::path base = state / "base.qcow2";
  write_qcow2_header(base);

  LibvirtHypervisorOptions opts;
  opts.uri = private_test_uri(state);
  opts.state_dir = (state / "vms").string();
  opts.qemu_runtime_dir.clear();
  EventRecorder rec;  // outlives the hypervisor: events arrive until it is gone
  auto hv = LibvirtHypervisor::open(opts);
  REQUIRE(hv.is_ok());
  (*hv)->set_event_handler([&](const VmEvent& e) { rec.record(e); });

  VmSpec spec;
  spec.name = "armhive-vm-a1";
  spec.vm_id = "vm-a1";
  spec.pool = "small <&'>";
  spec.base_disk = base.string();
  spec.kernel = "/boot/vmlinuz";
  spec.vcpus = 2;
  spec.vcpu_pins = {1, 2};
  spec.emulator_cpus = {0};
  spec.labels = {{"k", "v"}};
  Status created = (*hv)->create_vm(spec);
  INFO(created.to_string());
  REQUIRE(created.is_ok());
  CHECK(rec.wait_for("armhive-vm-a1", VmEventKind::kStarted));
  CHECK((*hv)->create_vm(spec).code() == ErrorCode::kConflict);

  auto vms = (*hv)->list_vms();
  REQUIRE(vms.is_ok());
  REQUIRE(vms->size() == 1);  // test:///'s own "test" domain has no armhive metadata
  CHECK(vms->at(0).name == "armhive-vm-a1");
  CHECK(vms->at(0).vm_id == "vm-a1");
  CHECK(vms->at(0).pool == "small <&'>");
  CHECK(vms->at(0).running);
  CHECK(vms->at(0).vcpu_pins == std::vector<int>{1, 2});
  CHECK(vms->at(0).emulator_cpus == std::vector<int>{0});

  REQUIRE((*hv)->set_lease("armhive-vm-a1", "lease-9").is_ok());
  CHECK((*hv)->list_vms()->at(0).lease_id == "lease-9");
  REQUIRE((*hv)->set_lease("armhive-vm-a1", "").is_ok());
  CHECK((*hv)->list_vms()->at(0).lease_id.empty());
  CHECK((*hv)->set_lease("armhive-vm-zz", "x").code() == ErrorCode::kNotFound);

  auto files = (*hv)->list_vm_files();
  REQUIRE(files.is_ok());
  CHECK(*files == std::vector<std::string>{"armhive-vm-a1"});
  // Its overlay is found through the storage pool, as on a remote host, without its local
  // directory.
  fs::remove_all(state / "vms" / "domains" / "armhive-vm-a1");
  CHECK(*(*hv)->list_vm_files() == std::vector<std::string>{"armhive-vm-a1"});

  REQUIRE((*hv)->destroy_vm("armhive-vm-a1").is_ok());
  CHECK(rec.wait_for("armhive-vm-a1", VmEventKind::kStopped));
  CHECK((*hv)->list_vms()->empty());
  CHECK((*hv)->list_vm_files()->empty());
  CHECK((*hv)->destroy_vm("armhive-vm-a1").is_ok());  // idempotent
  CHECK((*hv)->destroy_vm("../../etc").code() == ErrorCode::kInvalidArgument);

  // Several VMs created and destroyed from parallel threads share the pool and connection.
  std::vector<std::thread> threads;
  std::vector<Status> results(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      VmSpec s = spec;
      s.name = "armhive-vm-p" + std::to_string(i);
      s.vm_id = "vm-p" + std::to_string(i);
      results[i] = (*hv)->create_vm(s);
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& r : results) CHECK(r.to_string() == Status::ok().to_string());
  CHECK((*hv)->list_vms()->size() == 4);
  CHECK((*hv)->list_vm_files()->size() == 4);
  threads.clear();
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = (*hv)->destroy_vm("armhive-vm-p" + std::to_string(i)); });
  }
  for (auto& t : threads) t.join();
  for (const Status& r : results) CHECK(r.to_string() == Status::ok().to_string());
  CHECK((*hv)->list_vms()->empty());
  CHECK((*hv)->list_vm_files()->empty());
}

TEST_CASE("two armhiveds on one libvirtd neither list nor destroy each other's VMs",
          "[virt][libvirt][hypervisor]") {
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  TempDir a("inst-a");
  TempDir b("inst-b");
  fs::path base = a.path / "base.qcow2";
  write_qcow2_header(base);
  // test:///default is one driver instance per process: both daemons see the same domains.
  LibvirtHypervisorOptions opts;
  opts.uri = "test:///default";
  opts.qemu_runtime_dir.clear();
  opts.state_dir = (a.path / "vms").string();
  opts.storage_pool = "armhive-itest-inst-a";
  auto first = LibvirtHypervisor::open(opts);
  REQUIRE(first.is_ok());
  opts.state_dir = (b.path / "vms").string();
  opts.storage_pool = "armhive-itest-inst-b";
  auto second = LibvirtHypervisor::open(opts);
  REQUIRE(second.is_ok());

  VmSpec spec;
  spec.name = "armhive-vm-inst1";
  spec.vm_id = "vm-inst1";
  spec.pool = "ci";
  spec.base_disk = base.string();
  spec.kernel = "/boot/vmlinuz";
  Status created = (*first)->create_vm(spec);
  INFO(created.to_string());
  REQUIRE(created.is_ok());
  auto listed = [](LibvirtHypervisor& hv) {
    auto vms = hv.list_vms();
    INFO(vms.status().to_string());
    REQUIRE(vms.is_ok());
    std::vector<std::string> names;
    for (const VmInfo& v : *vms) names.push_back(v.name);
    return names;
  };
  CHECK(listed(**first) == std::vector<std::string>{"armhive-vm-inst1"});
  CHECK(listed(**second).empty());
  CHECK((*second)->list_vm_files()->empty());
  // The other daemon's destroy of that name is refused and the VM keeps running.
  Status refused = (*second)->destroy_vm("armhive-vm-inst1");
  CHECK(refused.code() == ErrorCode::kConflict);
  CHECK(refused.message().find("armhive-itest-inst-a") != std::string::npos);
  REQUIRE(listed(**first) == std::vector<std::string>{"armhive-vm-inst1"});
  CHECK((*first)->list_vms()->at(0).running);
  REQUIRE((*first)->destroy_vm("armhive-vm-inst1").is_ok());
  CHECK(listed(**first).empty());
  for (const char* name : {"armhive-itest-inst-a", "armhive-itest-inst-b"}) {
    StoragePoolHandle pool(
        virStoragePoolLookupByName(first.value()->connection().get()->get(), name));
    if (pool) virStoragePoolDestroy(pool.get());
  }
}

TEST_CASE("create_vm refuses a base image that is not qcow2 and leaves nothing behind",
          "[virt][libvirt][hypervisor]") {
  TempDir tmp("hv-bad");
  fs::path base = tmp.path / "raw.img";
  {
    FILE* f = std::fopen(base.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs("not a qcow2 image, just bytes......", f);
    std::fclose(f);
  }
  LibvirtHypervisorOptions opts;
  opts.uri = private_test_uri(tmp.path);
  opts.state_dir = (tmp.path / "vms").string();
  auto hv = LibvirtHypervisor::open(opts);
  REQUIRE(hv.is_ok());
  VmSpec spec;
  spec.name = "armhive-vm-bad";
  spec.vm_id = "vm-bad";
  spec.base_disk = base.string();
  spec.kernel = "/boot/vmlinuz";
  Status s = (*hv)->create_vm(spec);
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.field() == "base_disk");
  spec.base_disk = (tmp.path / "missing.qcow2").string();
  CHECK((*hv)->create_vm(spec).code() == ErrorCode::kNotFound);
  CHECK((*hv)->list_vms()->empty());
  CHECK((*hv)->list_vm_files()->empty());
}

TEST_CASE("host discovery on test:///default", "[virt][libvirt]") {
  auto conn = Connection::open("test:///default");
  REQUIRE(conn.is_ok());
  DiscoveryOptions o;
  o.sysfs_root.clear();
  o.kvm_usable = false;
  auto t = discover_host(*conn, o);
  REQUIRE(t.is_ok());
  CHECK_FALSE(t->arch.empty());
  CHECK(t->accel == Accel::kTcg);
  CHECK_FALSE(t->cells.empty());
  CHECK_FALSE(t->cpus.empty());
  CHECK(t->memory_kib > 0);
}

}  // namespace
}  // namespace armhive
