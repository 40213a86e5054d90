#include "daemon/bench/zstd_parser.h"

#include <regex>
#include <string>

namespace armhive {

Result<ZstdBenchResult> parse_zstd_bench(std::string_view output) {
  std::string text(output);
  static const std::regex kError(R"(Error\s+\d+\s*:\s*([^\r\n]*))");
  static const std::regex kHeader(R"(bench\s+v?([0-9][0-9.]*)\s*:\s*input\s+(\d+)\s+bytes)");
  // Quiet form: "-3      3072896 (2.730) 849.21 MB/s 4686.3 MB/s  FILE"
  static const std::regex kQuiet(
      R"((?:^|\n)\s*-(\d+)\s+(\d+)\s+\(x?([0-9.]+)\)\s+([0-9.]+)\s*MB/s\s+([0-9.]+)\s*MB/s)");
  // Default form: " 3#FILE : 8388608 -> 3072896 (x2.730),  879.6 MB/s, 5369.9 MB/s" or the
  // 1.5.x progress update "|-FILE : 8388608 -> 3072896 (x2.730),  879.6 MB/s, 5369.9 MB/s"
  // followed by "\r 3#".
  static const std::regex kFull(
      R"((\d+)\s*->\s*(\d+)\s+\(x?([0-9.]+)\),\s*([0-9.]+)\s*MB/s\s*,\s*([0-9.]+)\s*MB/s)");
  static const std::regex kLevelMark(R"((?:^|\r|\n)\s*(\d+)#)");

  ZstdBenchResult r;
  std::smatch m;
  if (std::regex_search(text, m, kHeader)) {
    r.version = m[1];
    r.input_bytes = std::stoull(m[2]);
  }
  if (std::regex_search(text, m, kQuiet)) {
    r.level = std::stoi(m[1]);
    r.compressed_bytes = std::stoull(m[2]);
    r.ratio = std::stod(m[3]);
    r.compress_mb_s = std::stod(m[4]);
    r.decompress_mb_s = std::stod(m[5]);
    if (r.input_bytes == 0) {
      return invalid_argument("zstd", "zstd bench output has a result but no input size header");
    }
  } else {
    // The last complete update wins.
    std::smatch last;
    bool found = false;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kFull);
         it != std::sregex_iterator(); ++it) {
      last = *it;
      found = true;
    }
    if (!found) {
      if (std::regex_search(text, m, kError)) return unavailable("zstd: " + m[1].str());
      return invalid_argument("zstd", "no result in zstd bench output (truncated or failed run)");
    }
    r.input_bytes = std::stoull(last[1]);
    r.compressed_bytes = std::stoull(last[2]);
    r.ratio = std::stod(last[3]);
    r.compress_mb_s = std::stod(last[4]);
    r.decompress_mb_s = std::stod(last[5]);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kLevelMark);
         it != std::sregex_iterator(); ++it) {
      r.level = std::stoi((*it)[1]);
    }
  }
  if (r.input_bytes == 0 || r.compressed_bytes == 0 || r.compress_mb_s <= 0 ||
      r.decompress_mb_s <= 0) {
    return invalid_argument("zstd", "zstd bench output has zero sizes or speeds");
  }
  return r;
}

Result<std::string> parse_zstd_version(std::string_view output) {
  static const std::regex kVersion(R"(v(\d+\.\d+\.\d+))");
  std::string text(output);
  std::smatch m;
  if (!std::regex_search(text, m, kVersion)) {
    return invalid_argument("zstd", "no version in `zstd --version` output");
  }
  return m[1].str();
}

}  // namespace armhive
