#include "daemon/bench/cache_topology.h"

#include <filesystem>
#include <fstream>

#include "base/bounded_number.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

std::string read_line(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::optional<uint64_t> parse_cache_size(const std::string& text) {
  if (text.empty()) return std::nullopt;
  uint64_t mult = 1;
  std::string digits = text;
  if (char c = text.back(); c == 'K' || c == 'M' || c == 'G') {
    mult = c == 'K' ? 1ULL << 10 : c == 'M' ? 1ULL << 20 : 1ULL << 30;
    digits.pop_back();
  }
  auto v = parse_bounded_int(digits, 1, int64_t{1} << 32, "cache size");
  if (!v.is_ok()) return std::nullopt;
  uint64_t bytes = static_cast<uint64_t>(*v) * mult;
  if (bytes > (1ULL << 36)) return std::nullopt;  // 64 GiB: not a cache
  return bytes;
}

std::optional<CacheInfo> read_last_level_cache(const std::string& sys_root) {
  std::error_code ec;
  fs::path cpus = fs::path(sys_root) / "devices/system/cpu";
  std::optional<CacheInfo> best;
  for (const auto& cpu : fs::directory_iterator(cpus, ec)) {
    std::string name = cpu.path().filename().string();
    if (name.rfind("cpu", 0) != 0 || name.size() < 4 ||
        name.find_first_not_of("0123456789", 3) != std::string::npos)
      continue;
    std::error_code ec2;
    for (const auto& idx : fs::directory_iterator(cpu.path() / "cache", ec2)) {
      if (idx.path().filename().string().rfind("index", 0) != 0) continue;
      if (read_line(idx.path() / "type") == "Instruction") continue;
      auto level = parse_bounded_int(read_line(idx.path() / "level"), 1, 8, "cache level");
      auto size = parse_cache_size(read_line(idx.path() / "size"));
      if (!level.is_ok() || !size) continue;
      if (!best || *level > best->level || (*level == best->level && *size > best->bytes)) {
        best = CacheInfo{static_cast<int>(*level), *size, idx.path().string()};
      }
    }
  }
  return best;
}

}  // namespace armhive
