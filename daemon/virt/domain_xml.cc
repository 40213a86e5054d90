#include "daemon/virt/domain_xml.h"

#include <arpa/inet.h>

#include <cctype>

#include "base/utf8.h"
#include "daemon/virt/guest_filter.h"
#include "daemon/virt/xml.h"

namespace armhive {

using detail::XmlDoc;
using detail::XmlWriter;

namespace {

bool valid_domain_name(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  if (!std::isalnum(static_cast<unsigned char>(s.front()))) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

// "52:54:00:ab:cd:ef": six lower-case hex pairs; the first octet even (unicast).
bool valid_mac(std::string_view s) {
  if (s.size() != 17) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (i % 3 == 2) {
      if (c != ':') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  int nibble = s[1] <= '9' ? s[1] - '0' : s[1] - 'a' + 10;
  return (nibble & 1) == 0;
}

bool valid_network_name(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return false;
    }
  }
  return true;
}

// U+FFFE and U+FFFF are valid UTF-8 but not XML 1.0 characters: a document holding one does
// not parse (libxml2 refuses it), so the domain could never be read back.
bool has_xml_noncharacter(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const Utf8Char c = decode_utf8(s, i);
    if (c.length == 0) return false;  // not UTF-8: is_valid_utf8 refuses it
    if (c.code_point == 0xFFFE || c.code_point == 0xFFFF) return true;
    i += c.length;
  }
  return false;
}

bool has_control(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

Status check_path(std::string_view field, std::string_view path, bool required) {
  if (path.empty()) {
    if (required) return invalid_argument(std::string(field), "a path is required");
    return Status::ok();
  }
  if (path.front() != '/' || has_control(path) || !is_valid_utf8(path) ||
      has_xml_noncharacter(path)) {
    return invalid_argument(std::string(field),
                            "must be an absolute UTF-8 path without control characters (or "
                            "U+FFFE, U+FFFF)");
  }
  return Status::ok();
}

// Text that may contain anything printable (escaped by the writer) but no control characters
// other than tab, which XML 1.0 cannot carry faithfully anyway.
Status check_text(std::string_view field, std::string_view value) {
  // libxml2 would re-encode invalid bytes: what reads back would not be what was written.
  if (!is_valid_utf8(value)) return invalid_argument(std::string(field), "must be valid UTF-8");
  if (has_xml_noncharacter(value)) {
    return invalid_argument(std::string(field),
                            "must not contain U+FFFE or U+FFFF (not XML characters)");
  }
  for (char c : value) {
    auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) {
      return invalid_argument(std::string(field), "must not contain control characters");
    }
  }
  return Status::ok();
}

void write_metadata(XmlWriter& w, const VmMetadata& m, bool with_namespace) {
  if (with_namespace) {
    w.start_ns(kMetadataKey, "vm", kMetadataUri);
  } else {
    w.start("vm");
  }
  w.element("vm_id", m.vm_id).element("pool", m.pool).element("lease_id", m.lease_id);
  w.start("labels");
  for (const auto& [k, v] : m.labels) w.start("label").attr("key", k).text(v).end();
  w.end();  // labels
  if (!m.instance.empty()) w.element("instance", m.instance);
  w.end();  // vm
}

}  // namespace

Status validate_vm_spec(const VmSpec& spec) {
  if (!valid_domain_name(spec.name)) {
    return invalid_argument("name",
                            "domain name must be 1-63 characters of [a-z0-9-], starting "
                            "with a letter or digit");
  }
  if (spec.vm_id.empty()) return invalid_argument("vm_id", "must not be empty");
  ARMHIVE_RETURN_IF_ERROR(check_text("vm_id", spec.vm_id));
  ARMHIVE_RETURN_IF_ERROR(check_text("pool", spec.pool));
  for (const auto& [k, v] : spec.labels) {
    if (k.empty()) return invalid_argument("labels", "label keys must not be empty");
    ARMHIVE_RETURN_IF_ERROR(check_text("labels", k));
    ARMHIVE_RETURN_IF_ERROR(check_text("labels", v));
  }
  ARMHIVE_RETURN_IF_ERROR(check_path("base_disk", spec.base_disk, true));
  ARMHIVE_RETURN_IF_ERROR(check_path("kernel", spec.kernel, false));
  ARMHIVE_RETURN_IF_ERROR(check_path("initrd", spec.initrd, false));
  if (spec.kernel.empty() && (!spec.initrd.empty() || !spec.cmdline.empty())) {
    return invalid_argument("kernel", "initrd and cmdline need a kernel (direct kernel boot)");
  }
  ARMHIVE_RETURN_IF_ERROR(check_text("cmdline", spec.cmdline));
  if (spec.vcpus < 1 || spec.vcpus > 512) return invalid_argument("vcpus", "must be 1-512");
  if (spec.memory_mib < 64 || spec.memory_mib > (uint64_t{1} << 24)) {
    return invalid_argument("memory_mib", "must be at least 64 MiB");
  }
  if (!valid_network_name(spec.network)) {
    return invalid_argument("network", "network name must be 1-63 characters of [A-Za-z0-9_.-]");
  }
  if (!spec.mac.empty() && !valid_mac(spec.mac)) {
    return invalid_argument("mac",
                            "must be six lower-case hex pairs like 52:54:00:ab:cd:ef (unicast)");
  }
  if (spec.mtu < 68 || spec.mtu > 65535) return invalid_argument("mtu", "must be 68-65535");
  if (spec.net_queues < 1 || spec.net_queues > 256) {
    return invalid_argument("net_queues", "must be 1-256");
  }
  if (!spec.vcpu_pins.empty() && spec.vcpu_pins.size() != static_cast<size_t>(spec.vcpus)) {
    return invalid_argument("vcpu_pins", "needs exactly one host CPU per vCPU");
  }
  for (int c : spec.vcpu_pins) {
    if (c < 0) return invalid_argument("vcpu_pins", "host CPU ids must be >= 0");
  }
  for (int c : spec.emulator_cpus) {
    if (c < 0) return invalid_argument("emulator_cpus", "host CPU ids must be >= 0");
  }
  if (spec.numa_node && *spec.numa_node < 0) {
    return invalid_argument("numa_node", "must be >= 0");
  }
  return Status::ok();
}

Result<std::string> build_metadata_xml(const VmMetadata& metadata, bool with_namespace) {
  XmlWriter w;
  write_metadata(w, metadata, with_namespace);
  return w.finish();
}

Result<std::string> build_domain_xml(const VmSpec& spec, const DomainPaths& paths, Accel accel,
                                     std::string_view instance,
                                     const InterfaceIsolation& isolation) {
  ARMHIVE_RETURN_IF_ERROR(validate_vm_spec(spec));
  if (in_addr a{}; !isolation.ipv4.empty() && inet_pton(AF_INET, isolation.ipv4.c_str(), &a) != 1) {
    return invalid_argument("isolation.ipv4", "not an IPv4 address: " + isolation.ipv4);
  }
  ARMHIVE_RETURN_IF_ERROR(check_path("overlay", paths.overlay, true));
  ARMHIVE_RETURN_IF_ERROR(check_path("console_log", paths.console_log, false));
  ARMHIVE_RETURN_IF_ERROR(check_path("emulator", paths.emulator, false));
  const bool uefi = spec.kernel.empty();
  if (uefi) {
    ARMHIVE_RETURN_IF_ERROR(check_path("nvram", paths.nvram, true));
    ARMHIVE_RETURN_IF_ERROR(check_path("uefi_code", paths.uefi_code, true));
    ARMHIVE_RETURN_IF_ERROR(check_path("uefi_vars_template", paths.uefi_vars_template, true));
  }
  ARMHIVE_RETURN_IF_ERROR(check_text("instance", instance));
  const bool kvm = accel == Accel::kKvm;

  XmlWriter w;
  w.start("domain").attr("type", kvm ? "kvm" : "qemu");
  w.element("name", spec.name);
  w.start("metadata");
  write_metadata(w, VmMetadata{spec.vm_id, spec.pool, "", spec.labels, std::string(instance)},
                 true);
  w.end();
  w.start("memory").attr("unit", "MiB").text(std::to_string(spec.memory_mib)).end();
  w.start("vcpu").attr("placement", "static").text(std::to_string(spec.vcpus)).end();
  if (!spec.vcpu_pins.empty() || !spec.emulator_cpus.empty()) {
    w.start("cputune");
    for (size_t i = 0; i < spec.vcpu_pins.size(); ++i) {
      w.start("vcpupin")
          .attr("vcpu", static_cast<long long>(i))
          .attr("cpuset", std::to_string(spec.vcpu_pins[i]))
          .end();
    }
    if (!spec.emulator_cpus.empty()) {
      w.start("emulatorpin").attr("cpuset", detail::format_cpu_list(spec.emulator_cpus)).end();
    }
    w.end();
  }
  if (spec.numa_node) {
    w.start("numatune")
        .start("memory")
        .attr("mode", "strict")
        .attr("nodeset", std::to_string(*spec.numa_node))
        .end()
        .end();
  }

  w.start("os");
  w.start("type").attr("arch", "aarch64").attr("machine", "virt").text("hvm").end();
  if (uefi) {
    w.start("loader")
        .attr("readonly", "yes")
        .attr("secure", "no")
        .attr("type", "pflash")
        .text(paths.uefi_code)
        .end();
    w.start("nvram").attr("template", paths.uefi_vars_template).text(paths.nvram).end();
  } else {
    w.element("kernel", spec.kernel);
    if (!spec.initrd.empty()) w.element("initrd", spec.initrd);
    if (!spec.cmdline.empty()) w.element("cmdline", spec.cmdline);
  }
  w.end();  // os

  w.start("features");
  if (uefi) w.start("acpi").end();  // libvirt accepts ACPI on aarch64 only with UEFI
  w.start("gic").attr("version", kvm ? "host" : "3").end();
  w.end();

  if (kvm) {
    w.start("cpu").attr("mode", "host-passthrough").attr("check", "none").end();
  } else {
    w.start("cpu").attr("mode", "custom").attr("match", "exact").attr("check", "none");
    w.start("model").attr("fallback", "forbid").text("cortex-a72").end();
    w.end();
  }
  w.start("clock").attr("offset", "utc").end();
  w.element("on_poweroff", "destroy");
  w.element("on_reboot", "restart");
  w.element("on_crash", "destroy");

  w.start("devices");
  if (!paths.emulator.empty()) w.element("emulator", paths.emulator);
  w.start("disk").attr("type", "file").attr("device", "disk");
  w.start("driver").attr("name", "qemu").attr("type", "qcow2").attr("discard", "unmap").end();
  w.start("source").attr("file", paths.overlay).end();
  w.start("target").attr("dev", "vda").attr("bus", "virtio").end();
  w.end();  // disk

  w.start("interface").attr("type", "network");
  if (!spec.mac.empty()) w.start("mac").attr("address", spec.mac).end();
  w.start("source").attr("network", spec.network).end();
  w.start("model").attr("type", "virtio").end();
  w.start("driver").attr("queues", spec.net_queues).end();
  w.start("mtu").attr("size", spec.mtu).end();
  w.start("rom").attr("enabled", "no").end();
  if (isolation.enabled) {
    w.start("filterref").attr("filter", kGuestFilterName);
    if (isolation.ipv4.empty()) {
      w.start("parameter").attr("name", "CTRL_IP_LEARNING").attr("value", "dhcp").end();
    } else {
      w.start("parameter").attr("name", "IP").attr("value", isolation.ipv4).end();
    }
    w.end();
    w.start("port").attr("isolated", "yes").end();
  }
  w.end();  // interface

  w.start("serial").attr("type", "pty");
  // No log file: the console is read through libvirt's console stream (console_capture.h).
  if (!paths.console_log.empty()) {
    w.start("log").attr("file", paths.console_log).attr("append", "off").end();
  }
  w.start("target").attr("port", 0LL).end();
  w.end();
  w.start("console").attr("type", "pty");
  w.start("target").attr("type", "serial").attr("port", 0LL).end();
  w.end();

  w.start("channel").attr("type", "unix");
  w.start("target").attr("type", "virtio").attr("name", "org.qemu.guest_agent.0").end();
  w.end();

  w.start("rng").attr("model", "virtio");
  w.start("backend").attr("model", "random").text("/dev/urandom").end();
  w.end();
  w.start("memballoon").attr("model", "none").end();
  w.end();  // devices
  w.end();  // domain
  return w.finish();
}

namespace {

VmMetadata metadata_from(const XmlDoc& doc, xmlNodePtr vm) {
  VmMetadata m;
  m.vm_id = doc.str("string(*[local-name()='vm_id'])", vm);
  m.pool = doc.str("string(*[local-name()='pool'])", vm);
  m.lease_id = doc.str("string(*[local-name()='lease_id'])", vm);
  m.instance = doc.str("string(*[local-name()='instance'])", vm);
  for (xmlNodePtr l : doc.nodes("*[local-name()='labels']/*[local-name()='label']", vm)) {
    m.labels[detail::attr_of(l, "key")] = detail::text_of(l);
  }
  return m;
}

}  // namespace

Result<VmMetadata> parse_metadata_xml(std::string_view xml) {
  ARMHIVE_ASSIGN_OR_RETURN(XmlDoc doc, XmlDoc::parse(xml));
  xmlNodePtr root = xmlDocGetRootElement(doc.get());
  if (root == nullptr || std::string_view(reinterpret_cast<const char*>(root->name)) != "vm") {
    return Status(ErrorCode::kInvalidArgument, "armhive metadata must be a <vm> element");
  }
  return metadata_from(doc, root);
}

Result<DomainDescription> parse_domain_xml(std::string_view xml) {
  ARMHIVE_ASSIGN_OR_RETURN(XmlDoc doc, XmlDoc::parse(xml));
  doc.register_ns("ah", kMetadataUri);
  DomainDescription d;
  d.name = doc.str("string(/domain/name)");
  if (d.name.empty()) return Status(ErrorCode::kInvalidArgument, "domain XML without a <name>");
  if (xmlNodePtr vm = doc.node("/domain/metadata/ah:vm")) d.metadata = metadata_from(doc, vm);
  for (xmlNodePtr pin : doc.nodes("/domain/cputune/vcpupin")) {
    int vcpu = std::atoi(detail::attr_of(pin, "vcpu").c_str());
    auto cpus = detail::parse_cpu_list(detail::attr_of(pin, "cpuset"));
    if (!cpus.is_ok()) return cpus.status().annotate("vcpupin of " + d.name);
    if (vcpu < 0 || vcpu > 4096) continue;
    if (d.vcpu_pins.size() <= static_cast<size_t>(vcpu)) d.vcpu_pins.resize(vcpu + 1, -1);
    d.vcpu_pins[vcpu] = cpus->empty() ? -1 : cpus->front();
  }
  if (xmlNodePtr e = doc.node("/domain/cputune/emulatorpin")) {
    auto cpus = detail::parse_cpu_list(detail::attr_of(e, "cpuset"));
    if (!cpus.is_ok()) return cpus.status().annotate("emulatorpin of " + d.name);
    d.emulator_cpus = *cpus;
  }
  d.overlay = doc.str("string(/domain/devices/disk[@device='disk'][1]/source/@file)");
  d.console_log = doc.str("string(/domain/devices/serial[1]/log/@file)");
  d.nvram = doc.str("string(/domain/os/nvram)");
  d.network = doc.str("string(/domain/devices/interface[@type='network'][1]/source/@network)");
  d.mac = doc.str("string(/domain/devices/interface[@type='network'][1]/mac/@address)");
  return d;
}

}  // namespace armhive
