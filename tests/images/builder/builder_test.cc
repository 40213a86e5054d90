#include "images/builder/builder.h"

#include <catch2/catch.hpp>
#include <filesystem>

namespace armhive {
namespace {

namespace fs = std::filesystem;

TEST_CASE("guest paths resolve inside the root filesystem, never on the host", "[images]") {
  char tmpl[] = "/tmp/armhive-rootfs-XXXXXX";
  const std::string root = ::mkdtemp(tmpl);
  fs::create_directories(fs::path(root) / "usr/lib");
  fs::create_directories(fs::path(root) / "run");
  fs::create_directories(fs::path(root) / "var");
  fs::create_symlink("/run", fs::path(root) / "var/run");        // absolute, as packages ship it
  fs::create_symlink("usr/lib", fs::path(root) / "lib");         // usrmerge, relative
  fs::create_symlink("/etc/passwd", fs::path(root) / "passwd");  // last component: not followed

  auto at = [&](std::string_view guest) {
    auto r = resolve_in_root(root, guest);
    REQUIRE(r.is_ok());
    return *r;
  };
  CHECK(at("/etc/inittab") == root + "/etc/inittab");
  CHECK(at("/var/run/x.pid") == root + "/run/x.pid");
  CHECK(at("/lib/systemd/system/a.service") == root + "/usr/lib/systemd/system/a.service");
  CHECK(at("/passwd") == root + "/passwd");
  CHECK(at("/../../etc/shadow") == root + "/etc/shadow");

  fs::create_symlink("loop", fs::path(root) / "loop");
  CHECK_FALSE(resolve_in_root(root, "/loop/x").is_ok());
  fs::remove_all(root);
}

}  // namespace
}  // namespace armhive
