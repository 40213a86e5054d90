// The image builder's Debian package metadata readers: control stanzas (apt-cache show,
// dpkg status) and dependency fields (Depends, Pre-Depends, Provides).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "images/builder/package_index.h"

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
// libFuzzer calls this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& p : armhive::parse_control_stanzas(text)) {
    (void)armhive::parse_dependency_field(p.depends);
    (void)armhive::parse_dependency_field(p.pre_depends);
    (void)armhive::parse_dependency_field(p.provides);
  }
  (void)armhive::parse_dependency_field(text);
  return 0;
}
