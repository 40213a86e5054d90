#include "images/builder/corpus.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace armhive {
namespace {

// splitmix64: tiny, fully specified, identical everywhere (no <random> distributions, whose
// algorithms differ between standard libraries).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t state_;
};

constexpr std::array<std::string_view, 48> kWords = {
    "lease",   "virtual", "machine", "aarch64", "kernel",   "network", "storage", "cluster",
    "pinning", "host",    "guest",   "agent",   "boot",     "image",   "qcow2",   "overlay",
    "the",     "a",       "of",      "to",      "and",      "in",      "is",      "for",
    "cpu",     "core",    "numa",    "memory",  "page",     "cache",   "latency", "throughput",
    "packet",  "stream",  "iperf3",  "zstd",    "compress", "level",   "thread",  "queue",
    "expire",  "renew",   "release", "pool",    "warm",     "cold",    "start",   "stop"};

constexpr uint64_t kBlock = 64 * 1024;

void random_block(SplitMix64& rng, std::string& out, uint64_t n) {
  for (uint64_t i = 0; i < n; i += 8) {
    uint64_t v = rng.next();
    for (uint64_t j = 0; j < 8 && i + j < n; ++j) out.push_back(static_cast<char>(v >> (8 * j)));
  }
}

void text_block(SplitMix64& rng, std::string& out, uint64_t n) {
  size_t start = out.size();
  uint64_t line = 0;
  while (out.size() - start < n) {
    out.append(kWords[rng.below(kWords.size())]);
    out.push_back(++line % 12 == 0 ? '\n' : ' ');
  }
  out.resize(start + n);
}

void hex_block(SplitMix64& rng, std::string& out, uint64_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  size_t start = out.size();
  while (out.size() - start < n) {
    uint64_t v = rng.next();
    for (int j = 0; j < 16; ++j) out.push_back(kHex[(v >> (4 * j)) & 0xf]);
    out.push_back(rng.below(4) == 0 ? '\n' : ' ');
  }
  out.resize(start + n);
}

void log_block(SplitMix64& rng, std::string& out, uint64_t n) {
  size_t start = out.size();
  static constexpr std::array<std::string_view, 4> kLevels = {"INFO", "WARN", "DEBUG", "ERROR"};
  while (out.size() - start < n) {
    out.append("2026-01-30T12:");
    out.append(std::to_string(10 + rng.below(50)));
    out.append(":00Z ");
    out.append(kLevels[rng.below(kLevels.size())]);
    out.append(" lease=l-");
    out.append(std::to_string(rng.below(64)));
    out.append(" vm=armhive-vm-");
    out.append(std::to_string(rng.below(16)));
    out.append(" state=running\n");
  }
  out.resize(start + n);
}

}  // namespace

std::string generate_corpus(uint64_t seed, uint64_t bytes) {
  SplitMix64 rng(seed);
  std::string out;
  out.reserve(bytes);
  while (out.size() < bytes) {
    uint64_t n = std::min<uint64_t>(kBlock, bytes - out.size());
    switch (rng.below(8)) {
      case 0:
      case 1:
        random_block(rng, out, n);
        break;
      case 2:
      case 3:
        text_block(rng, out, n);
        break;
      case 4:
      case 5:
        hex_block(rng, out, n);
        break;
      case 6:
        log_block(rng, out, n);
        break;
      default:
        out.append(n, '\0');
        break;
    }
  }
  return out;
}

}  // namespace armhive
