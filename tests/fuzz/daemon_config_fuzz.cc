// The daemon's TOML configuration (an operator's file, but it is parsed before anything else
// and must fail with a message, never a crash).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "daemon/config/daemon_config.h"

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
// libFuzzer calls this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)armhive::parse_daemon_config(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
