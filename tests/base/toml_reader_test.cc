#include "base/toml_reader.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

TEST_CASE("toml reader: typed values, ranges and unknown keys name the field", "[base]") {
  toml::table t = toml::parse("name = \"ci\"\nvcpus = 300\nttl = \"2h\"\nsize = -1\nextra = 1\n");
  TomlReader r(t, "pools[0].");
  std::string name;
  CHECK(r.str("name", name).is_ok());
  CHECK(name == "ci");
  int64_t vcpus = 1;
  CHECK(r.integer("vcpus", vcpus, 1, 256).field() == "pools[0].vcpus");
  std::chrono::milliseconds ttl{0};
  CHECK(r.duration("ttl", ttl).is_ok());
  CHECK(ttl == std::chrono::hours(2));
  uint64_t size = 0;
  CHECK(r.non_negative("size", size).field() == "pools[0].size");
  CHECK(r.no_unknown_keys().field() == "pools[0].extra");
  CHECK(r.only({"name", "vcpus", "ttl", "size", "extra"}).is_ok());
}

}  // namespace
}  // namespace armhive
