// The image builder's cpio (newc) reader, and writer -> reader round trips of what it read.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "images/builder/cpio.h"
#include "tests/fuzz/fuzz_check.h"

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
// libFuzzer calls this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto entries = armhive::parse_cpio(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!entries.is_ok()) return 0;
  armhive::CpioWriter w;
  size_t files = 0;
  for (const auto& e : *entries) {
    if ((e.mode & 0170000) == 0100000 && !e.path.empty()) {
      w.add_file(e.path, e.data, e.mode & 07777);
      ++files;
    }
  }
  auto again = armhive::parse_cpio(w.finish());
  FUZZ_CHECK(again.is_ok());
  FUZZ_CHECK(again->size() == files);
  return 0;
}
