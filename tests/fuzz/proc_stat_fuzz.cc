// /proc/stat as the host CPU sampler reads it, and the split between two snapshots. Property:
// each core's split is finite and within 0..100 %.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "daemon/bench/host_sampler.h"
#include "tests/fuzz/fuzz_check.h"

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
// libFuzzer calls this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t cut = text.find("\n\n");
  auto before = armhive::parse_proc_stat(text.substr(0, cut), "fuzz/stat");
  if (!before.is_ok() || cut == std::string_view::npos) return 0;
  auto after = armhive::parse_proc_stat(text.substr(cut + 2), "fuzz/stat");
  if (!after.is_ok()) return 0;
  for (const auto& s : armhive::cpu_split(*before, *after)) {
    for (double v : {s.user, s.system, s.irq, s.softirq, s.idle, s.other}) {
      FUZZ_CHECK(std::isfinite(v) && v >= 0 && v <= 100.0001);
    }
  }
  return 0;
}
