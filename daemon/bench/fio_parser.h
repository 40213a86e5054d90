#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive {

// Parser of `fio --output-format=json` (fio 3.x). Pure, never throws; any thread.
//
// Text before the JSON object (fio prints warnings there) is skipped. Each job must have
// error 0 and exactly one direction with I/O (read for read/randread, write for
// write/randwrite); its figures are range-checked (bandwidth up to 10^12 B/s, IOPS up to
// 10^9, runtime 1 ms..10^8 ms) and checked against each other: bw = io_bytes / runtime and
// bw = IOPS x block size within 5 %. Errors: kUnavailable for a job fio reports as failed
// (with fio's errno), kInvalidArgument naming "storage" or "storage.<job>.<member>" otherwise.
struct FioJobResult {
  std::string name;
  std::string rw;         // "read", "write", "randread", "randwrite"
  std::string direction;  // "read" or "write": the side with I/O
  uint64_t block_bytes = 0;
  int iodepth = 1;
  std::string ioengine;
  bool direct = false;
  std::string size;  // as given ("64M")
  uint64_t io_bytes = 0;
  double bw_bytes_per_s = 0;
  double iops = 0;
  double runtime_ms = 0;
  double lat_mean_us = 0;
  std::optional<double> clat_p99_us;  // absent when fio printed no percentiles
};

struct FioResult {
  std::string version;  // "fio-3.33"
  std::vector<FioJobResult> jobs;
};

Result<FioResult> parse_fio_json(std::string_view output);

// "4k" -> 4096, "1M" -> 1048576, "512" -> 512 (fio's binary suffixes k/m/g, either case,
// optional "i"/"b"). nullopt for anything else or above 1 TiB.
std::optional<uint64_t> parse_fio_size(std::string_view text);

}  // namespace armhive
