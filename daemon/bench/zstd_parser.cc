#include "daemon/bench/zstd_parser.h"

#include <cmath>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "base/bounded_number.h"

namespace armhive {
namespace {

// The guest prints this text: it is bounded before any regex sees it (libstdc++'s regex
// recurses per character, so an unbounded line could exhaust the stack).
constexpr size_t kMaxOutputBytes = 4 << 20;
constexpr size_t kMaxSegmentBytes = 1024;

// Plausible ranges: a corpus of at most 1 TiB, speeds below 10 TB/s, levels zstd accepts.
constexpr uint64_t kMaxBytes = uint64_t{1} << 40;
constexpr double kMaxMbPerSecond = 1e7;
constexpr double kMaxRatio = 1e6;

// Lines split on '\n' and '\r' (the progress form rewrites one line with '\r').
std::vector<std::string> segments(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n' || text[i] == '\r') {
      if (i > start && i - start <= kMaxSegmentBytes)
        out.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

struct Figures {
  std::string input, compressed, ratio, compress, decompress;
};

Result<ZstdBenchResult> checked(ZstdBenchResult r, const Figures& f) {
  auto field = [](const char* name) { return std::string("zstd ") + name; };
  if (!f.input.empty()) {
    ARMHIVE_ASSIGN_OR_RETURN(r.input_bytes,
                             parse_bounded_uint(f.input, 1, kMaxBytes, field("input size")));
  }
  ARMHIVE_ASSIGN_OR_RETURN(
      r.compressed_bytes, parse_bounded_uint(f.compressed, 1, kMaxBytes, field("compressed size")));
  ARMHIVE_ASSIGN_OR_RETURN(r.ratio, parse_bounded_double(f.ratio, 1e-6, kMaxRatio, field("ratio")));
  ARMHIVE_ASSIGN_OR_RETURN(r.compress_mb_s, parse_bounded_double(f.compress, 1e-6, kMaxMbPerSecond,
                                                                 field("compression speed")));
  ARMHIVE_ASSIGN_OR_RETURN(
      r.decompress_mb_s,
      parse_bounded_double(f.decompress, 1e-6, kMaxMbPerSecond, field("decompression speed")));
  // zstd prints the ratio with three decimals: one that disagrees with the sizes is a lie.
  double expected = static_cast<double>(r.input_bytes) / static_cast<double>(r.compressed_bytes);
  if (std::fabs(expected - r.ratio) > 0.01 * expected + 0.001) {
    return invalid_argument("zstd ratio", "zstd bench output is inconsistent: ratio " + f.ratio +
                                              " but " + std::to_string(r.input_bytes) + " -> " +
                                              std::to_string(r.compressed_bytes) + " bytes");
  }
  return r;
}

}  // namespace

Result<ZstdBenchResult> parse_zstd_bench(std::string_view output) {
  if (output.size() > kMaxOutputBytes) {
    return invalid_argument("zstd", "zstd bench output is implausibly long (" +
                                        std::to_string(output.size()) + " bytes)");
  }
  static const std::regex kError(R"(Error\s+\d+\s*:\s*(.*))");
  static const std::regex kHeader(R"(bench\s+v?([0-9][0-9.]*)\s*:\s*input\s+(\d+)\s+bytes)");
  // Quiet form: "-3      3072896 (2.730) 849.21 MB/s 4686.3 MB/s  FILE"
  static const std::regex kQuiet(
      R"(^\s*-(\d+)\s+(\d+)\s+\(x?([0-9.]+)\)\s+([0-9.]+)\s*MB/s\s+([0-9.]+)\s*MB/s)");
  // Default form: " 3#FILE : 8388608 -> 3072896 (x2.730),  879.6 MB/s, 5369.9 MB/s" or the
  // 1.5.x progress update "|-FILE : 8388608 -> 3072896 (x2.730),  879.6 MB/s, 5369.9 MB/s"
  // followed by "\r 3#".
  static const std::regex kFull(
      R"((\d+)\s*->\s*(\d+)\s+\(x?([0-9.]+)\),\s*([0-9.]+)\s*MB/s\s*,\s*([0-9.]+)\s*MB/s)");
  static const std::regex kLevelMark(R"(^\s*(\d+)#)");

  ZstdBenchResult r;
  Figures f;
  std::optional<std::string> header_input, quiet_level, level_mark, error;
  bool quiet = false, full = false;
  std::smatch m;
  for (const std::string& s : segments(output)) {
    if (!header_input && std::regex_search(s, m, kHeader)) {
      r.version = m[1];
      header_input = m[2];
    }
    if (!quiet && std::regex_search(s, m, kQuiet)) {
      quiet = true;
      quiet_level = m[1];
      f.compressed = m[2];
      f.ratio = m[3];
      f.compress = m[4];
      f.decompress = m[5];
    }
    if (!quiet && std::regex_search(s, m, kFull)) {  // the last complete update wins
      full = true;
      f.input = m[1];
      f.compressed = m[2];
      f.ratio = m[3];
      f.compress = m[4];
      f.decompress = m[5];
    }
    if (std::regex_search(s, m, kLevelMark)) level_mark = m[1];
    if (!error && std::regex_search(s, m, kError)) error = m[1].str().substr(0, 200);
  }
  if (quiet) {
    if (!header_input) {
      return invalid_argument("zstd", "zstd bench output has a result but no input size header");
    }
    f.input = *header_input;
  } else if (!full) {
    if (error) return unavailable("zstd: " + *error);
    return invalid_argument("zstd", "no result in zstd bench output (truncated or failed run)");
  }
  std::optional<std::string> level = quiet ? quiet_level : level_mark;
  if (level) {
    ARMHIVE_ASSIGN_OR_RETURN(int64_t lv, parse_bounded_int(*level, 0, 22, "zstd level"));
    r.level = static_cast<int>(lv);
  }
  auto result = checked(std::move(r), f);
  if (!result.is_ok()) {
    return Status(result.status().code(),
                  "zstd bench output rejected: " + result.status().message(), {},
                  result.status().field());
  }
  return result;
}

Result<std::string> parse_zstd_version(std::string_view output) {
  if (output.size() > kMaxOutputBytes) {
    return invalid_argument("zstd", "`zstd --version` output is implausibly long");
  }
  static const std::regex kVersion(R"(v(\d{1,4}\.\d{1,4}\.\d{1,4}))");
  for (const std::string& s : segments(output)) {
    std::smatch m;
    if (std::regex_search(s, m, kVersion)) return m[1].str();
  }
  return invalid_argument("zstd", "no version in `zstd --version` output");
}

}  // namespace armhive
