#include "daemon/virt/domain_xml.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "daemon/virt/xml.h"

namespace armhive {
namespace {

using detail::XmlDoc;

VmSpec direct_boot_spec() {
  VmSpec s;
  s.name = "armhive-vm-3f2a9c";
  s.vm_id = "vm-3f2a9c";
  s.pool = "ci-small";
  s.base_disk = "/var/lib/armhive/images/tiny/disk.qcow2";
  s.kernel = "/var/lib/armhive/images/tiny/vmlinuz";
  s.initrd = "/var/lib/armhive/images/tiny/initrd.img";
  s.cmdline = "console=ttyAMA0 quiet";
  s.vcpus = 2;
  s.memory_mib = 1024;
  s.network = "armhive-net";
  s.mtu = 9000;
  s.net_queues = 2;
  s.vcpu_pins = {4, 5};
  s.emulator_cpus = {0, 1};
  s.numa_node = 1;
  s.labels = {{"team", "kernel"}, {"arch", "arm64"}};
  return s;
}

DomainPaths paths() {
  DomainPaths p;
  p.overlay = "/var/lib/armhive/vms/overlays/armhive-vm-3f2a9c.qcow2";
  p.console_log = "/var/lib/armhive/vms/domains/armhive-vm-3f2a9c/console.log";
  p.nvram = "/var/lib/armhive/vms/domains/armhive-vm-3f2a9c/VARS.fd";
  return p;
}

// The labels parse_domain_xml reads back from the domain XML written for `s`.
std::map<std::string, std::string> labels_read_back(const VmSpec& s) {
  auto xml = build_domain_xml(s, paths(), Accel::kTcg);
  REQUIRE(xml.is_ok());
  auto back = parse_domain_xml(*xml);
  REQUIRE(back.is_ok());
  REQUIRE(back->metadata);
  return back->metadata->labels;
}

XmlDoc parse(const std::string& xml) {
  auto doc = XmlDoc::parse(xml);
  REQUIRE(doc.is_ok());
  doc->register_ns("ah", kMetadataUri);
  return std::move(doc).value();
}

TEST_CASE("domain XML under TCG: qemu type, virt machine, cortex-a72, direct kernel boot",
          "[virt][domain_xml]") {
  auto xml = build_domain_xml(direct_boot_spec(), paths(), Accel::kTcg);
  REQUIRE(xml.is_ok());
  XmlDoc d = parse(*xml);
  CHECK(d.str("string(/domain/@type)") == "qemu");
  CHECK(d.str("string(/domain/name)") == "armhive-vm-3f2a9c");
  CHECK(d.str("string(/domain/os/type/@arch)") == "aarch64");
  CHECK(d.str("string(/domain/os/type/@machine)") == "virt");
  CHECK(d.str("string(/domain/cpu/@mode)") == "custom");
  CHECK(d.str("string(/domain/cpu/@match)") == "exact");
  CHECK(d.str("string(/domain/cpu/model)") == "cortex-a72");
  CHECK(d.str("string(/domain/cpu/model/@fallback)") == "forbid");
  CHECK(d.str("string(/domain/os/kernel)") == "/var/lib/armhive/images/tiny/vmlinuz");
  CHECK(d.str("string(/domain/os/initrd)") == "/var/lib/armhive/images/tiny/initrd.img");
  CHECK(d.str("string(/domain/os/cmdline)") == "console=ttyAMA0 quiet");
  CHECK(d.node("/domain/os/loader") == nullptr);
  CHECK(d.node("/domain/os/nvram") == nullptr);
  CHECK(d.str("string(/domain/memory)") == "1024");
  CHECK(d.str("string(/domain/memory/@unit)") == "MiB");
  CHECK(d.str("string(/domain/vcpu)") == "2");
}

TEST_CASE("domain XML under KVM: kvm type and host-passthrough", "[virt][domain_xml]") {
  auto xml = build_domain_xml(direct_boot_spec(), paths(), Accel::kKvm);
  REQUIRE(xml.is_ok());
  XmlDoc d = parse(*xml);
  CHECK(d.str("string(/domain/@type)") == "kvm");
  CHECK(d.str("string(/domain/cpu/@mode)") == "host-passthrough");
  CHECK(d.node("/domain/cpu/model") == nullptr);
  CHECK(d.str("string(/domain/os/type/@arch)") == "aarch64");
}

TEST_CASE("domain XML devices: overlay disk, network, console log, agent channel",
          "[virt][domain_xml]") {
  auto xml = build_domain_xml(direct_boot_spec(), paths(), Accel::kTcg);
  REQUIRE(xml.is_ok());
  XmlDoc d = parse(*xml);
  CHECK(d.nodes("/domain/devices/disk").size() == 1);
  CHECK(d.str("string(/domain/devices/disk/source/@file)") == paths().overlay);
  CHECK(d.str("string(/domain/devices/disk/driver/@type)") == "qcow2");
  CHECK(d.str("string(/domain/devices/disk/target/@bus)") == "virtio");
  CHECK(d.str("string(/domain/devices/interface/@type)") == "network");
  CHECK(d.str("string(/domain/devices/interface/source/@network)") == "armhive-net");
  CHECK(d.str("string(/domain/devices/interface/model/@type)") == "virtio");
  CHECK(d.str("string(/domain/devices/interface/mtu/@size)") == "9000");
  CHECK(d.str("string(/domain/devices/interface/driver/@queues)") == "2");
  CHECK(d.str("string(/domain/devices/interface/rom/@enabled)") == "no");
  CHECK(d.str("string(/domain/devices/serial/log/@file)") == paths().console_log);
  CHECK(d.str("string(/domain/devices/channel[@type='unix']/target/@name)") ==
        "org.qemu.guest_agent.0");
  CHECK(d.str("string(/domain/devices/channel/target/@type)") == "virtio");
}

TEST_CASE(
    "an isolated guest's interface carries the filter bound to its reserved address and an "
    "isolated port, without an address the filter learns it from DHCP",
    "[virt][domain_xml]") {
  XmlDoc plain = parse(*build_domain_xml(direct_boot_spec(), paths(), Accel::kTcg));
  CHECK(plain.nodes("/domain/devices/interface/filterref").empty());
  CHECK(plain.nodes("/domain/devices/interface/port").empty());

  InterfaceIsolation bound{true, "10.77.0.23"};
  auto xml = build_domain_xml(direct_boot_spec(), paths(), Accel::kTcg, {}, bound);
  REQUIRE(xml.is_ok());
  XmlDoc d = parse(*xml);
  CHECK(d.str("string(/domain/devices/interface/filterref/@filter)") == "armhive-guest");
  CHECK(d.str("string(/domain/devices/interface/filterref/parameter[@name='IP']/@value)") ==
        "10.77.0.23");
  CHECK(d.str("string(/domain/devices/interface/port/@isolated)") == "yes");

  InterfaceIsolation learned{true, ""};
  XmlDoc l = parse(*build_domain_xml(direct_boot_spec(), paths(), Accel::kTcg, {}, learned));
  CHECK(l.str("string(/domain/devices/interface/filterref/parameter[@name='CTRL_IP_LEARNING']/"
              "@value)") == "dhcp");
  CHECK(l.nodes("/domain/devices/interface/filterref/parameter[@name='IP']").empty());

  InterfaceIsolation bad{true, "10.77.0.23'/><x"};
  auto refused = build_domain_xml(direct_boot_spec(), paths(), Accel::kTcg, {}, bad);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().field() == "isolation.ipv4");
}

TEST_CASE("a domain whose console is streamed has a serial console and no log file",
          "[virt][domain_xml]") {
  DomainPaths p = paths();
  p.console_log.clear();  // ConsoleMode::kStream: a remote host's disk is not ours to name
  auto xml = build_domain_xml(direct_boot_spec(), p, Accel::kTcg);
  REQUIRE(xml.is_ok());
  XmlDoc d = parse(*xml);
  CHECK(d.str("string(/domain/devices/serial/@type)") == "pty");
  CHECK(d.nodes("/domain/devices/serial/log").empty());
  CHECK(d.str("string(/domain/devices/console/target/@type)") == "serial");
  auto desc = parse_domain_xml(*xml);
  REQUIRE(desc.is_ok());
  CHECK(desc->console_log.empty());
}

TEST_CASE("domain XML tuning: vcpupin per vCPU, emulatorpin, numatune", "[virt][domain_xml]") {
  auto xml = build_domain_xml(direct_boot_spec(), paths(), Accel::kTcg);
  REQUIRE(xml.is_ok());
  XmlDoc d = parse(*xml);
  REQUIRE(d.nodes("/domain/cputune/vcpupin").size() == 2);
  CHECK(d.str("string(/domain/cputune/vcpupin[@vcpu='0']/@cpuset)") == "4");
  CHECK(d.str("string(/domain/cputune/vcpupin[@vcpu='1']/@cpuset)") == "5");
  CHECK(d.str("string(/domain/cputune/emulatorpin/@cpuset)") == "0-1");
  CHECK(d.str("string(/domain/numatune/memory/@mode)") == "strict");
  CHECK(d.str("string(/domain/numatune/memory/@nodeset)") == "1");

  VmSpec plain = direct_boot_spec();
  plain.vcpu_pins.clear();
  plain.emulator_cpus.clear();
  plain.numa_node.reset();
  auto xml2 = build_domain_xml(plain, paths(), Accel::kTcg);
  REQUIRE(xml2.is_ok());
  XmlDoc d2 = parse(*xml2);
  CHECK(d2.node("/domain/cputune") == nullptr);
  CHECK(d2.node("/domain/numatune") == nullptr);
  CHECK(d2.node("/domain/memoryBacking") == nullptr);
}

TEST_CASE(
    "domain XML with UEFI boot: AAVMF code, per-VM nvram from the vars template, no "
    "secure boot",
    "[virt][domain_xml]") {
  VmSpec s = direct_boot_spec();
  s.kernel.clear();
  s.initrd.clear();
  s.cmdline.clear();
  auto xml = build_domain_xml(s, paths(), Accel::kTcg);
  REQUIRE(xml.is_ok());
  XmlDoc d = parse(*xml);
  CHECK(d.node("/domain/os/kernel") == nullptr);
  CHECK(d.str("string(/domain/os/loader)") == "/usr/share/AAVMF/AAVMF_CODE.fd");
  CHECK(d.str("string(/domain/os/loader/@type)") == "pflash");
  CHECK(d.str("string(/domain/os/loader/@secure)") == "no");
  CHECK(d.str("string(/domain/os/nvram)") == paths().nvram);
  CHECK(d.str("string(/domain/os/nvram/@template)") == "/usr/share/AAVMF/AAVMF_VARS.fd");
}

TEST_CASE("domain metadata carries vm_id, pool and labels in the armhive namespace",
          "[virt][domain_xml]") {
  auto xml = build_domain_xml(direct_boot_spec(), paths(), Accel::kTcg);
  REQUIRE(xml.is_ok());
  XmlDoc d = parse(*xml);
  REQUIRE(d.nodes("/domain/metadata/ah:vm").size() == 1);
  CHECK(d.str("string(/domain/metadata/ah:vm/vm_id)") == "vm-3f2a9c");
  CHECK(d.str("string(/domain/metadata/ah:vm/pool)") == "ci-small");
  CHECK(d.str("string(/domain/metadata/ah:vm/lease_id)") == "");
  CHECK(d.str("string(/domain/metadata/ah:vm/labels/label[@key='team'])") == "kernel");

  auto desc = parse_domain_xml(*xml);
  REQUIRE(desc.is_ok());
  REQUIRE(desc->metadata.has_value());
  CHECK(desc->metadata->vm_id == "vm-3f2a9c");
  CHECK(desc->metadata->labels.at("arch") == "arm64");
  CHECK(desc->metadata->instance.empty());

  // The instance marker names the armhived that made it (its storage pool).
  auto marked = build_domain_xml(direct_boot_spec(), paths(), Accel::kTcg, "armhive-lab1");
  REQUIRE(marked.is_ok());
  CHECK(parse(*marked).str("string(/domain/metadata/ah:vm/instance)") == "armhive-lab1");
  CHECK(parse_domain_xml(*marked)->metadata->instance == "armhive-lab1");
  CHECK(build_domain_xml(direct_boot_spec(), paths(), Accel::kTcg, "a\nb").status().field() ==
        "instance");
  CHECK(desc->vcpu_pins == std::vector<int>{4, 5});
  CHECK(desc->emulator_cpus == std::vector<int>{0, 1});
  CHECK(desc->overlay == paths().overlay);
  CHECK(desc->console_log == paths().console_log);
}

TEST_CASE("hostile pool names and labels stay text", "[virt][domain_xml]") {
  VmSpec s = direct_boot_spec();
  const std::string hostile = "x</pool><name>evil</name>' & ]]> <!-- \"";
  s.pool = hostile;
  s.labels = {{"k'<&]]>", hostile}};
  s.cmdline = "console=ttyAMA0 init=/bin/sh ]]> <evil/>";
  auto xml = build_domain_xml(s, paths(), Accel::kTcg);
  REQUIRE(xml.is_ok());
  XmlDoc d = parse(*xml);
  CHECK(d.nodes("/domain/name").size() == 1);
  CHECK(d.str("string(/domain/name)") == "armhive-vm-3f2a9c");
  CHECK(d.nodes("//evil").empty());
  CHECK(d.nodes("/domain/metadata/ah:vm/pool").size() == 1);
  CHECK(d.str("string(/domain/metadata/ah:vm/pool)") == hostile);
  CHECK(d.nodes("/domain/metadata/ah:vm/labels/label").size() == 1);
  CHECK(d.str("string(/domain/metadata/ah:vm/labels/label/@key)") == "k'<&]]>");
  CHECK(d.str("string(/domain/os/cmdline)") == s.cmdline);

  auto desc = parse_domain_xml(*xml);
  REQUIRE(desc.is_ok());
  CHECK(desc->metadata->pool == hostile);
  CHECK(desc->metadata->labels.at("k'<&]]>") == hostile);
}

TEST_CASE("metadata round trip through the bare element libvirt stores", "[virt][domain_xml]") {
  VmMetadata m{"vm-1", "pool <&>", "lease-42", {{"a", "b]]>"}}, "armhive-overlays"};
  auto bare = build_metadata_xml(m, false);
  REQUIRE(bare.is_ok());
  auto back = parse_metadata_xml(*bare);
  REQUIRE(back.is_ok());
  CHECK(*back == m);
  auto namespaced = build_metadata_xml(m, true);
  REQUIRE(namespaced.is_ok());
  CHECK(namespaced->find(kMetadataUri) != std::string::npos);
  CHECK(parse_metadata_xml(*namespaced).value() == m);
  CHECK(parse_metadata_xml("<other/>").status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("invalid specs are refused naming the field", "[virt][domain_xml]") {
  auto field_of = [](const VmSpec& s) {
    return build_domain_xml(s, paths(), Accel::kTcg).status().field();
  };
  VmSpec s = direct_boot_spec();
  s.name = "Evil'name";
  CHECK(field_of(s) == "name");
  s = direct_boot_spec();
  s.name = "../etc";
  CHECK(field_of(s) == "name");
  s = direct_boot_spec();
  s.vcpu_pins = {1};
  CHECK(field_of(s) == "vcpu_pins");
  s = direct_boot_spec();
  s.kernel = "relative/vmlinuz";
  CHECK(field_of(s) == "kernel");
  s = direct_boot_spec();
  s.network = "net'work";
  CHECK(field_of(s) == "network");
  s = direct_boot_spec();
  s.mtu = 20;
  CHECK(field_of(s) == "mtu");
  s = direct_boot_spec();
  s.pool = "line\nbreak";
  CHECK(field_of(s) == "pool");
  s = direct_boot_spec();
  s.kernel.clear();
  CHECK(field_of(s) == "kernel");  // initrd/cmdline without a kernel
}

// Found by tests/fuzz/domain_xml_fuzz.cc: a label with an invalid UTF-8 byte was written, but
// libxml2 re-encoded it, so the metadata read back differed from what was written.
TEST_CASE("labels, pool and paths that are not UTF-8 are refused", "[virt][domain_xml][hostile]") {
  auto field_of = [](const VmSpec& s) {
    return build_domain_xml(s, paths(), Accel::kTcg).status().field();
  };
  VmSpec s = direct_boot_spec();
  s.labels = {{"team",
               "kernel<&ra;rcm\xb6"
               "3"}};
  CHECK(field_of(s) == "labels");
  s = direct_boot_spec();
  s.pool = "ci\xff";
  CHECK(field_of(s) == "pool");
  s = direct_boot_spec();
  s.base_disk = "/images/\xc3(disk.qcow2";
  CHECK(field_of(s) == "base_disk");
  s = direct_boot_spec();
  s.labels = {{"team", "kernel<&ra;rcm\xc3\xa9"}};  // valid UTF-8 with markup round-trips
  CHECK(labels_read_back(s) == s.labels);
}

// Found by tests/fuzz/domain_xml_fuzz.cc (a label key "a@\xEF\xBF\xBF"): U+FFFF is valid UTF-8
// but no XML character, so the domain XML written with it did not parse.
TEST_CASE("labels, pool and paths with U+FFFE or U+FFFF are refused naming the field",
          "[virt][domain_xml][hostile]") {
  auto status_of = [](const VmSpec& s) {
    return build_domain_xml(s, paths(), Accel::kTcg).status();
  };
  VmSpec s = direct_boot_spec();
  s.labels = {{"a@\xEF\xBF\xBF", "x"}};
  CHECK(status_of(s).field() == "labels");
  CHECK(status_of(s).message().find("U+FFFF") != std::string::npos);
  s = direct_boot_spec();
  s.pool = "ci\xEF\xBF\xBE";
  CHECK(status_of(s).field() == "pool");
  s = direct_boot_spec();
  s.base_disk =
      "/images/\xEF\xBF\xBF"
      "disk.qcow2";
  CHECK(status_of(s).field() == "base_disk");
  s = direct_boot_spec();
  s.labels = {{"team", "\xEF\xBF\xBD\xEF\xBF\xBC"}};  // U+FFFD and U+FFFC are characters
  CHECK(labels_read_back(s) == s.labels);
}

TEST_CASE("CPU lists parse and format like libvirt's", "[virt][domain_xml]") {
  CHECK(detail::parse_cpu_list("0-3,8,10-11").value() == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(detail::parse_cpu_list("0-7,^3").value() == std::vector<int>{0, 1, 2, 4, 5, 6, 7});
  CHECK(detail::parse_cpu_list("5\n").value() == std::vector<int>{5});
  CHECK(detail::parse_cpu_list("\t0-1\n").value() == std::vector<int>{0, 1});
  CHECK_FALSE(detail::parse_cpu_list("3-1").is_ok());
  CHECK_FALSE(detail::parse_cpu_list("a").is_ok());
  CHECK(detail::format_cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
}

}  // namespace
}  // namespace armhive
