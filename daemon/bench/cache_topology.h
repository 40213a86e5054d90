#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace armhive {

// The largest cache a CPU sees, from sysfs (`<sys_root>/devices/system/cpu/cpu*/cache/index*/
// {level,size,type}`): the memory suite's arrays must be well above it. Data and unified
// caches count, instruction caches do not. nullopt when sysfs has no cache information (e.g.
// many arm64 boards and TCG guests). Blocking file reads; any thread.
struct CacheInfo {
  int level = 0;
  uint64_t bytes = 0;
  std::string source;  // the sysfs directory it was read from
};
std::optional<CacheInfo> read_last_level_cache(const std::string& sys_root);

// "32768K" / "8M" / "512" (sysfs "size") -> bytes; nullopt for anything else.
std::optional<uint64_t> parse_cache_size(const std::string& text);

}  // namespace armhive
