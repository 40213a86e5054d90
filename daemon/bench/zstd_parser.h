#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace armhive {

// Parsers for `zstd -b<level> ...` and `zstd --version` output (zstd 1.5.x; fixtures in
// tests/fixtures/bench). Both the quiet form (`-q`: "-3  3072896 (2.730) 849.21 MB/s
// 4686.3 MB/s  FILE") and the default progress form (\r-separated updates, the last one
// complete) are understood. Pure functions; any thread.

struct ZstdBenchResult {
  int level = 0;
  uint64_t input_bytes = 0;
  uint64_t compressed_bytes = 0;
  double ratio = 0;          // input / compressed
  double compress_mb_s = 0;  // MB = 1e6 bytes, as zstd prints
  double decompress_mb_s = 0;
  std::string version;  // from the quiet header ("1.5.4"); empty in the default form
};

// kUnavailable with zstd's own message for "Error NN : ..." output, kInvalidArgument when no
// result line is found (truncated output).
Result<ZstdBenchResult> parse_zstd_bench(std::string_view output);

// "*** Zstandard CLI (64-bit) v1.5.4, by Yann Collet ***" -> "1.5.4".
Result<std::string> parse_zstd_version(std::string_view output);

}  // namespace armhive
