// Host topology inputs: sysfs CPU lists (shared_cpu_list, cluster_cpus_list, the config's
// cpusets) and the libvirt capabilities document. Property: a parsed CPU list is sorted, unique
// and non-negative.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "daemon/core/cpu_sets.h"
#include "daemon/virt/host_discovery.h"
#include "daemon/virt/xml.h"
#include "tests/fuzz/fuzz_check.h"

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
// libFuzzer calls this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto l = armhive::detail::parse_cpu_list(text); l.is_ok()) {
    FUZZ_CHECK(std::is_sorted(l->begin(), l->end()));
    FUZZ_CHECK(std::adjacent_find(l->begin(), l->end()) == l->end());
    FUZZ_CHECK(l->empty() || l->front() >= 0);
  }
  (void)armhive::parse_cpu_list("cpus", text);
  armhive::DiscoveryOptions options;
  options.sysfs_root.clear();
  options.kvm_usable = false;
  (void)armhive::parse_capabilities(text, options);
  return 0;
}
