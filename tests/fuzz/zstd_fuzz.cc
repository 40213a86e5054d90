// `zstd -b` and `zstd --version` output from the guest. Property: a parsed result has positive,
// finite, bounded figures.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "daemon/bench/zstd_parser.h"
#include "tests/fuzz/fuzz_check.h"

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
// libFuzzer calls this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)armhive::parse_zstd_version(text);
  auto r = armhive::parse_zstd_bench(text);
  if (!r.is_ok()) return 0;
  FUZZ_CHECK(r->input_bytes > 0 && r->compressed_bytes > 0);
  FUZZ_CHECK(std::isfinite(r->ratio) && r->ratio > 0);
  FUZZ_CHECK(std::isfinite(r->compress_mb_s) && r->compress_mb_s > 0 && r->compress_mb_s <= 1e7);
  FUZZ_CHECK(std::isfinite(r->decompress_mb_s) && r->decompress_mb_s > 0);
  FUZZ_CHECK(r->level >= 0 && r->level <= 22);
  return 0;
}
