#include "images/builder/corpus.h"

#include <zlib.h>

#include <catch2/catch.hpp>

#include "base/sha256.h"

namespace armhive {
namespace {

double deflate_ratio(const std::string& data) {
  uLongf out_len = compressBound(static_cast<uLong>(data.size()));
  std::string out(out_len, '\0');
  REQUIRE(compress2(reinterpret_cast<Bytef*>(out.data()), &out_len,
                    reinterpret_cast<const Bytef*>(data.data()), static_cast<uLong>(data.size()),
                    1) == Z_OK);
  return static_cast<double>(data.size()) / static_cast<double>(out_len);
}

TEST_CASE("the corpus is deterministic for a seed and differs between seeds", "[images]") {
  std::string a = generate_corpus(kDefaultCorpusSeed, 1 << 20);
  std::string b = generate_corpus(kDefaultCorpusSeed, 1 << 20);
  CHECK(a.size() == (1u << 20));
  CHECK(a == b);
  CHECK(generate_corpus(kDefaultCorpusSeed + 1, 1 << 20) != a);
  // A prefix of a longer corpus is the shorter corpus (blocks are generated in order).
  CHECK(generate_corpus(kDefaultCorpusSeed, 3 << 20).substr(0, 1 << 20) == a);
}

TEST_CASE("the default corpus has a pinned hash (changing the generator changes reports)",
          "[images]") {
  // If this fails, the generator changed: every image's corpus and every zstd report with it.
  // Update deliberately, together with the recipes' versions.
  std::string corpus = generate_corpus(kDefaultCorpusSeed, kDefaultCorpusBytes);
  CHECK(corpus.size() == kDefaultCorpusBytes);
  CHECK(sha256_hex(corpus) == "1a22319f9cd6692c08e109622569a99bb7a3fea7705e19c119d1349aaf851c95");
}

TEST_CASE("the corpus has mixed compressibility", "[images]") {
  std::string corpus = generate_corpus(kDefaultCorpusSeed, 4 << 20);
  double ratio = deflate_ratio(corpus);
  // Neither incompressible (random only) nor trivial (zeros only).
  CHECK(ratio > 1.4);
  CHECK(ratio < 6.0);
}

}  // namespace
}  // namespace armhive
