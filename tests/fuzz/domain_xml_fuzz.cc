// The domain-XML builder with hostile labels, pool, vm_id, kernel command line and paths (a
// lease's labels come from an API client). Properties: whatever it builds parses with libxml2;
// its element/attribute structure is the baseline's whatever the free text is; the armhive
// metadata reads back exactly as written.
#include <fuzzer/FuzzedDataProvider.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "daemon/virt/domain_xml.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace armhive;

VmSpec baseline() {
  VmSpec s;
  s.name = "armhive-vm-3f2a9c";
  s.vm_id = "vm-3f2a9c";
  s.pool = "ci";
  s.base_disk = "/var/lib/armhive/images/tiny/disk.qcow2";
  s.kernel = "/var/lib/armhive/images/tiny/vmlinuz";
  s.initrd = "/var/lib/armhive/images/tiny/initrd.img";
  s.cmdline = "console=ttyAMA0";
  s.vcpus = 2;
  s.vcpu_pins = {4, 5};
  s.emulator_cpus = {0};
  s.numa_node = 0;
  s.labels = {{"a", "x"}, {"b", "y"}};
  return s;
}

DomainPaths paths() {
  DomainPaths p;
  p.overlay = "/var/lib/armhive/vms/overlays/armhive-vm-3f2a9c.qcow2";
  p.console_log = "/var/lib/armhive/vms/domains/armhive-vm-3f2a9c/console.log";
  p.nvram = "/var/lib/armhive/vms/domains/armhive-vm-3f2a9c/VARS.fd";
  return p;
}

// Element names and attribute names, depth-first: the shape, without any text or value.
void shape_of(xmlNodePtr n, std::string& out) {
  for (; n != nullptr; n = n->next) {
    if (n->type != XML_ELEMENT_NODE) continue;
    out += '<';
    out += reinterpret_cast<const char*>(n->name);
    for (xmlAttrPtr a = n->properties; a != nullptr; a = a->next) {
      out += ' ';
      out += reinterpret_cast<const char*>(a->name);
    }
    out += '>';
    shape_of(n->children, out);
    out += "</>";
  }
}

bool shape(const std::string& xml, std::string& out) {
  xmlDocPtr doc = xmlReadMemory(xml.data(), static_cast<int>(xml.size()), "domain.xml", nullptr,
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  if (doc == nullptr) return false;
  shape_of(xmlDocGetRootElement(doc), out);
  xmlFreeDoc(doc);
  return true;
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
// libFuzzer calls this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string kBaseline = [] {
    std::string s;
    auto xml = build_domain_xml(baseline(), paths(), Accel::kTcg);
    FUZZ_CHECK(xml.is_ok() && shape(*xml, s));
    return s;
  }();
  FuzzedDataProvider in(data, size);
  VmSpec spec = baseline();
  spec.labels = {{"a" + in.ConsumeRandomLengthString(64), "x" + in.ConsumeRandomLengthString(256)},
                 {"b" + in.ConsumeRandomLengthString(64), "y" + in.ConsumeRandomLengthString(256)}};
  // Never empty: an absent value may leave its element out, which is no change of structure.
  spec.pool = "p" + in.ConsumeRandomLengthString(64);
  spec.vm_id = "v" + in.ConsumeRandomLengthString(64);
  spec.cmdline = "c" + in.ConsumeRandomLengthString(256);
  spec.base_disk = "/" + in.ConsumeRandomLengthString(128);
  auto xml = build_domain_xml(spec, paths(), Accel::kTcg);
  if (!xml.is_ok()) return 0;  // rejected with a message: fine
  std::string s;
  FUZZ_CHECK(shape(*xml, s));
  FUZZ_CHECK(s == kBaseline);
  auto described = parse_domain_xml(*xml);
  FUZZ_CHECK(described.is_ok() && described->metadata);
  FUZZ_CHECK(described->metadata->vm_id == spec.vm_id);
  FUZZ_CHECK(described->metadata->pool == spec.pool);
  FUZZ_CHECK(described->metadata->labels == spec.labels);
  VmMetadata m{spec.vm_id, spec.pool, "l-1", spec.labels};
  auto bare = build_metadata_xml(m, false);
  FUZZ_CHECK(bare.is_ok());
  auto back = parse_metadata_xml(*bare);
  FUZZ_CHECK(back.is_ok() && *back == m);
  return 0;
}
