// `iperf3 -J` output (the guest's server feeds it). Property: every figure parsed is finite and
// not negative.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "daemon/bench/iperf3_parser.h"
#include "tests/fuzz/fuzz_check.h"

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
// libFuzzer calls this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = armhive::parse_iperf3_json(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!r.is_ok()) return 0;
  auto sane = [](double v) { return std::isfinite(v) && v >= 0; };
  FUZZ_CHECK(sane(r->sent_bits_per_second) && sane(r->received_bits_per_second));
  FUZZ_CHECK(sane(r->duration_s) && r->num_streams >= 0);
  for (const auto& iv : r->intervals) {
    FUZZ_CHECK(sane(iv.start) && sane(iv.end) && sane(iv.sum_bits_per_second));
    for (const auto& s : iv.streams) FUZZ_CHECK(sane(s.bits_per_second));
  }
  for (const auto& s : r->streams) {
    FUZZ_CHECK(sane(s.sender_bits_per_second) && sane(s.receiver_bits_per_second));
  }
  return 0;
}
