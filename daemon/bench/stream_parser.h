#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace armhive {

// Parser of armhive-stream's output (images/recipes/tiny/armhive-stream.c): one "key value"
// per line, e.g. "triad_mb_s 1055.7", ending with "validation ok". Pure, never throws; any
// thread. Every value is range-checked: a missing, repeated, non-numeric, NaN, negative or
// absurd value (above 10^7 MB/s, i.e. 10 TB/s) is kInvalidArgument naming the key; "validation
// failed" (the kernels computed wrong values) is kInternal; no "validation" line means the
// output was cut short (kInvalidArgument).
struct StreamResult {
  std::string version;   // "1"
  std::string compiler;  // "gcc 12.2.0"
  std::string flags;     // "-O2 -static -pthread"
  uint64_t array_elements = 0;
  uint64_t array_bytes = 0;  // per array (there are three)
  int threads = 0;
  int iterations = 0;
  double copy_mb_s = 0;  // best pass, MB = 10^6 bytes
  double scale_mb_s = 0;
  double add_mb_s = 0;
  double triad_mb_s = 0;
};
Result<StreamResult> parse_stream_output(std::string_view output);

// "armhive-stream 1 (gcc 12.2.0, -O2 -static -pthread)" (from --version) -> that line.
Result<std::string> parse_stream_version(std::string_view output);

}  // namespace armhive
