#include "tests/support/instance_domains.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <cstdlib>
#include <vector>

#include "daemon/virt/domain_xml.h"
#include "daemon/virt/handles.h"

namespace armhive {

namespace {

// Calls f(domain, metadata) for every domain with armhive metadata.
template <typename F>
void for_each_armhive_domain(F&& f) noexcept {
  ConnectHandle conn(virConnectOpen("qemu:///system"));
  if (!conn) {
    virResetLastError();
    return;
  }
  virDomainPtr* doms = nullptr;
  int n = virConnectListAllDomains(conn.get(), &doms, 0);
  if (n < 0) {
    virResetLastError();
    return;
  }
  std::vector<DomainHandle> handles;
  handles.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) handles.emplace_back(doms[i]);
  std::free(doms);
  for (DomainHandle& dom : handles) {
    LibvirtString meta(
        virDomainGetMetadata(dom.get(), VIR_DOMAIN_METADATA_ELEMENT, kMetadataUri, 0));
    virResetLastError();
    if (!meta) continue;
    auto parsed = parse_metadata_xml(meta.get());
    if (parsed.is_ok()) f(dom.get(), *parsed);
  }
}

}  // namespace

int destroy_instance_domains(const std::string& instance) noexcept {
  if (instance.empty()) return 0;
  int destroyed = 0;
  for_each_armhive_domain([&](virDomainPtr dom, const VmMetadata& meta) {
    if (meta.instance != instance) return;
    if (virDomainIsActive(dom) == 1) virDomainDestroy(dom);
    if (virDomainIsPersistent(dom) == 1) virDomainUndefineFlags(dom, VIR_DOMAIN_UNDEFINE_NVRAM);
    virResetLastError();
    ++destroyed;
  });
  return destroyed;
}

std::vector<std::string> instance_domains(const std::string& prefix) noexcept {
  std::vector<std::string> out;
  for_each_armhive_domain([&](virDomainPtr dom, const VmMetadata& meta) {
    if (meta.instance.compare(0, prefix.size(), prefix) != 0) return;
    const char* name = virDomainGetName(dom);
    out.push_back(std::string(name ? name : "?") + " (" + meta.instance + ")");
  });
  return out;
}

}  // namespace armhive
