// One suite, three implementations: what the engine relies on from a Hypervisor holds for
// LibvirtHypervisor on libvirt's test:/// driver, for the FakeHypervisor the engine tests use
// (so the fake cannot drift from the real adapter), and for the HypervisorSlot armhived hands
// the engine for each host, attached to a LibvirtHypervisor (so it forwards faithfully).
// (Guest-agent calls are not in the test driver; they are covered by the e2e tests.)
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "daemon/fleet/hypervisor_slot.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "tests/support/fake_hypervisor.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

struct LibvirtSubject {
  LibvirtSubject()
      : dir(fs::temp_directory_path() / ("armhive-hv-conf-" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    loop = std::move(EventLoop::start().value());
    fs::path node = dir / "node.xml";
    FILE* f = std::fopen(node.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs(
        "<node><cpu><nodes>1</nodes><sockets>1</sockets><cores>4</cores><threads>1</threads>"
        "<active>4</active><mhz>2000</mhz><model>aarch64</model></cpu>"
        "<memory>8388608</memory></node>",
        f);
    std::fclose(f);
    // A qcow2 header is all the test driver (and the size probe) looks at: 1 GiB virtual.
    unsigned char header[32] = {'Q', 'F', 'I', 0xfb, 0, 0, 0, 3};
    header[24 + 4] = 0x40;
    base = (dir / "base.qcow2").string();
    f = std::fopen(base.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fwrite(header, 1, sizeof header, f);
    std::fclose(f);
    LibvirtHypervisorOptions opts;
    opts.uri = "test://" + node.string();
    opts.state_dir = (dir / "vms").string();
    opts.qemu_runtime_dir.clear();
    hv = std::move(LibvirtHypervisor::open(opts).value());
  }
  ~LibvirtSubject() {
    hv.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  Hypervisor& hypervisor() { return *hv; }
  fs::path dir;
  std::string base;
  std::unique_ptr<EventLoop> loop;
  std::unique_ptr<LibvirtHypervisor> hv;
};

struct FakeSubject {
  Hypervisor& hypervisor() { return hv; }
  std::string base = "/images/tiny/disk.qcow2";
  FakeHypervisor hv;
};

struct SlotSubject {
  SlotSubject() : base(inner.base), slot("hc1", "not yet") {
    REQUIRE(slot.attach(inner.hv.get()).is_ok());
  }
  Hypervisor& hypervisor() { return slot; }
  LibvirtSubject inner;
  std::string base;
  HypervisorSlot slot;
};

VmSpec spec_for(const std::string& base, const std::string& id) {
  VmSpec spec;
  spec.name = "armhive-" + id;
  spec.vm_id = id;
  spec.pool = "small <&'>";
  spec.base_disk = base;
  spec.kernel = "/boot/vmlinuz";
  spec.vcpus = 2;
  spec.vcpu_pins = {1, 2};
  spec.emulator_cpus = {0};
  spec.labels = {{"k", "v"}};
  return spec;
}

TEMPLATE_TEST_CASE("hypervisor: create, list, lease and destroy a VM", "[conformance][hypervisor]",
                   LibvirtSubject, FakeSubject, SlotSubject) {
  TestType subject;
  Hypervisor& hv = subject.hypervisor();
  CHECK(hv.list_vms()->empty());
  CHECK(hv.list_vm_files()->empty());
  VmSpec spec = spec_for(subject.base, "vm-a1");
  Status created = hv.create_vm(spec);
  INFO(created.to_string());
  REQUIRE(created.is_ok());
  CHECK(hv.create_vm(spec).code() == ErrorCode::kConflict);

  auto vms = hv.list_vms();
  REQUIRE(vms.is_ok());
  REQUIRE(vms->size() == 1);
  const VmInfo& vm = vms->at(0);
  CHECK(vm.name == "armhive-vm-a1");
  CHECK(vm.vm_id == "vm-a1");  // the positive mark of an armhive domain
  CHECK(vm.pool == "small <&'>");
  CHECK(vm.running);
  CHECK(vm.lease_id.empty());
  CHECK(vm.vcpu_pins == std::vector<int>{1, 2});
  CHECK(vm.emulator_cpus == std::vector<int>{0});
  CHECK(*hv.list_vm_files() == std::vector<std::string>{"armhive-vm-a1"});

  REQUIRE(hv.set_lease("armhive-vm-a1", "l-000000000009").is_ok());
  CHECK(hv.list_vms()->at(0).lease_id == "l-000000000009");
  REQUIRE(hv.set_lease("armhive-vm-a1", "").is_ok());
  CHECK(hv.list_vms()->at(0).lease_id.empty());
  CHECK(hv.set_lease("armhive-vm-zz", "x").code() == ErrorCode::kNotFound);

  REQUIRE(hv.destroy_vm("armhive-vm-a1").is_ok());
  CHECK(hv.list_vms()->empty());
  CHECK(hv.list_vm_files()->empty());
  CHECK(hv.destroy_vm("armhive-vm-a1").is_ok());  // idempotent
  CHECK(hv.destroy_vm("armhive-vm-never").is_ok());
}

TEMPLATE_TEST_CASE("hypervisor: names that are not armhive domain names are refused",
                   "[conformance][hypervisor]", LibvirtSubject, FakeSubject, SlotSubject) {
  TestType subject;
  Hypervisor& hv = subject.hypervisor();
  CHECK(hv.destroy_vm("../../etc").code() == ErrorCode::kInvalidArgument);
  VmSpec spec = spec_for(subject.base, "vm-a1");
  spec.name = "armhive-VM;rm -rf";
  CHECK(hv.create_vm(spec).code() == ErrorCode::kInvalidArgument);
  CHECK(hv.list_vms()->empty());
  CHECK(hv.list_vm_files()->empty());
}

TEMPLATE_TEST_CASE("hypervisor: agent calls on a VM that does not exist are not found",
                   "[conformance][hypervisor]", LibvirtSubject, FakeSubject, SlotSubject) {
  TestType subject;
  Hypervisor& hv = subject.hypervisor();
  CHECK(hv.ping_agent("armhive-vm-zz", std::chrono::milliseconds(100)).code() ==
        ErrorCode::kNotFound);
  CHECK(hv.set_authorized_keys("armhive-vm-zz", "root", {}).code() == ErrorCode::kNotFound);
  CHECK(hv.exec("armhive-vm-zz", {.argv = {"true"}}).status().code() == ErrorCode::kNotFound);
}

// The usage meter: one call answers for every named running VM; names that are not running
// domains are left out (libvirt's test driver reports no counters, only the records).
TEMPLATE_TEST_CASE("hypervisor: usage counters of the named running VMs in one call",
                   "[conformance][hypervisor][usage]", LibvirtSubject, FakeSubject, SlotSubject) {
  TestType subject;
  Hypervisor& hv = subject.hypervisor();
  REQUIRE(hv.create_vm(spec_for(subject.base, "vm-a1")).is_ok());
  REQUIRE(hv.create_vm(spec_for(subject.base, "vm-a2")).is_ok());
  auto names = [](const std::vector<VmCounters>& counters) {
    std::set<std::string> out;
    for (const VmCounters& c : counters) out.insert(c.name);
    return out;
  };
  auto both = hv.vm_counters({"armhive-vm-a1", "armhive-vm-a2", "armhive-vm-zz"});
  INFO(both.status().to_string());
  REQUIRE(both.is_ok());
  CHECK(names(*both) == std::set<std::string>{"armhive-vm-a1", "armhive-vm-a2"});
  for (const VmCounters& c : *both) CHECK(c.counters.run_id >= 0);
  auto one = hv.vm_counters({"armhive-vm-a2"});
  REQUIRE(one.is_ok());
  CHECK(names(*one) == std::set<std::string>{"armhive-vm-a2"});
  CHECK(hv.vm_counters({})->empty());
  CHECK(hv.vm_counters({"armhive-VM;x"}).status().code() == ErrorCode::kInvalidArgument);

  REQUIRE(hv.destroy_vm("armhive-vm-a1").is_ok());
  auto after = hv.vm_counters({"armhive-vm-a1", "armhive-vm-a2"});
  REQUIRE(after.is_ok());
  CHECK(names(*after) == std::set<std::string>{"armhive-vm-a2"});
  REQUIRE(hv.destroy_vm("armhive-vm-a2").is_ok());
}

}  // namespace
}  // namespace armhive
