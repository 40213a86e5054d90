#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/core/hypervisor.h"
#include "daemon/core/topology.h"

namespace armhive {

// The namespace of armhive's element in a domain's <metadata>; libvirt addresses it by this
// URI with the key (prefix) "armhive".
inline constexpr const char* kMetadataUri = "https://armhive.dev/xmlns/domain/1";
inline constexpr const char* kMetadataKey = "armhive";

// What armhive records in a domain: <armhive:vm><vm_id/><pool/><lease_id/><labels><label
// key="…">value</label></labels><instance/></armhive:vm>. Only the root element is namespaced
// (libvirt's virDomainSetMetadata re-namespaces only the root it is given).
struct VmMetadata {
  std::string vm_id;
  std::string pool;
  std::string lease_id;
  std::map<std::string, std::string> labels;
  // The armhived that made the domain (its storage pool's name, unique per libvirt host): two
  // daemons on one libvirtd must never adopt or destroy each other's VMs. Empty in domains made
  // before it was recorded; those count as any instance's.
  std::string instance;
  bool operator==(const VmMetadata&) const = default;
};

// Files of one VM, all absolute; chosen by LibvirtHypervisor under its state dir.
struct DomainPaths {
  std::string overlay;      // the qcow2 overlay (the VM's vda)
  std::string console_log;  // serial console log; empty: none (read through the console stream)
  std::string nvram;        // per-VM UEFI vars copy; only used for UEFI boot
  std::string uefi_code = "/usr/share/AAVMF/AAVMF_CODE.fd";
  std::string uefi_vars_template = "/usr/share/AAVMF/AAVMF_VARS.fd";
  std::string emulator;  // empty: libvirt's default qemu-system-aarch64
};

// How a VM's interface is kept to its own identity and away from other guests (guest_filter.h):
// the nwfilter bound to its MAC and address, and an isolated bridge port.
struct InterfaceIsolation {
  bool enabled = false;
  // The address reserved for the VM, which the filter allows as its only source; empty: libvirt
  // learns it from the guest's DHCP exchange (bridge mode, the site's DHCP).
  std::string ipv4;
};

// Validates a VmSpec for the builder: name [a-z0-9-] (1-63, starting alnum), network name
// [A-Za-z0-9_.-], absolute paths without control characters, vcpus 1-512, memory >= 64 MiB,
// MTU 68-65535, queues 1-256, MAC empty or six lower-case hex pairs (unicast), one pin per vCPU
// when pinned, CPU ids >= 0. kInvalidArgument naming the field.
Status validate_vm_spec(const VmSpec& spec);

// The transient aarch64 domain for `spec`: machine `virt`; under kKvm <domain type='kvm'> with
// host-passthrough, under kTcg <domain type='qemu'> with cortex-a72 (match exact, fallback
// forbid); direct kernel boot when spec.kernel is set, else UEFI (AAVMF, secure boot off,
// per-VM nvram); virtio disk on the overlay; virtio-net on spec.network with <mtu>, <driver
// queues> and no option ROM; a serial console logged to paths.console_log; the guest agent
// channel; <cputune> pins, <numatune> strict, armhive <metadata>; with `isolation` enabled the
// interface's <filterref> and <port isolated='yes'/> (kInvalidArgument "isolation.ipv4" for an
// address that is not IPv4). Every value is written through libxml2's text writer (escaped). Pure
// function.
Result<std::string> build_domain_xml(const VmSpec& spec, const DomainPaths& paths, Accel accel,
                                     std::string_view instance = {},
                                     const InterfaceIsolation& isolation = {});

// The metadata element alone, as virDomainSetMetadata wants it (`with_namespace` false: a bare
// <vm> that libvirt puts into kMetadataUri) or as it appears inside <metadata> (true).
Result<std::string> build_metadata_xml(const VmMetadata& metadata, bool with_namespace);

// Parses the element returned by virDomainGetMetadata(…, kMetadataUri, …).
Result<VmMetadata> parse_metadata_xml(std::string_view xml);

// What recovery needs from a live domain's XML.
struct DomainDescription {
  std::string name;
  std::optional<VmMetadata> metadata;  // absent: not an armhive domain
  std::vector<int> vcpu_pins;          // index = vCPU; -1 for an unpinned vCPU; empty if none
  std::vector<int> emulator_cpus;
  std::string overlay;  // source file of the first disk
  std::string console_log;
  std::string nvram;
  std::string network;  // libvirt network of the first network interface
  std::string mac;      // its MAC
};
Result<DomainDescription> parse_domain_xml(std::string_view xml);

}  // namespace armhive
