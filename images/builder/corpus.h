#pragma once

#include <cstdint>
#include <string>

namespace armhive {

// The benchmark corpus baked into images (the zstd benchmark compresses it). Deterministic:
// the same (seed, bytes) gives the same bytes on every host and compiler, so a report can name
// the corpus by seed and sha256. Mixed compressibility: the output is a sequence of 64 KiB
// blocks, each of one kind chosen by the PRNG — random bytes (incompressible), word text
// (~3:1 at zstd -3), hex dumps (~2:1), structured log records (~8:1) and zero runs.
// Pure function; any thread.
inline constexpr uint64_t kDefaultCorpusSeed = 20260130;
inline constexpr uint64_t kDefaultCorpusBytes = 8ull << 20;

std::string generate_corpus(uint64_t seed, uint64_t bytes);

}  // namespace armhive
