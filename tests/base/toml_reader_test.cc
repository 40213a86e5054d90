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

TEST_CASE("toml reader: a duration too long to keep is refused, not overflowed", "[base]") {
  // Found by the daemon_config fuzz target: seconds whose milliseconds overflow int64.
  toml::table t =
      toml::parse("a = \"4987736587312824312\"\nb = 4987736587312824312\nc = \"3650d\"\n");
  TomlReader r(t, "engine.");
  std::chrono::milliseconds d{0};
  CHECK(r.duration("a", d).field() == "engine.a");
  CHECK(r.duration("b", d).field() == "engine.b");
  CHECK(r.duration("c", d).is_ok());
  CHECK(d == std::chrono::hours(24 * 3650));
}

}  // namespace
}  // namespace armhive
