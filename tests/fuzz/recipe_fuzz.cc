// Image recipes (TOML). No base directory: file references are rejected, nothing is read.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "images/builder/recipe.h"

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
// libFuzzer calls this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)armhive::parse_recipe(std::string_view(reinterpret_cast<const char*>(data), size), "");
  return 0;
}
