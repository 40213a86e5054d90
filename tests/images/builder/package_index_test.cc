#include "images/builder/package_index.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

namespace armhive {
namespace {

// apt's cache as a map, for resolver tests without apt.
class FakeIndex final : public PackageIndex {
 public:
  void add(std::string name, std::string version, std::string depends = {},
           std::string provides = {}, std::string arch = "arm64") {
    packages_[name] = {
        .name = name, .version = version, .arch = arch, .depends = depends, .provides = provides};
  }
  Result<PackageInfo> show(std::string_view name, std::string_view) override {
    ++calls;
    auto it = packages_.find(std::string(name));
    if (it == packages_.end()) return not_found("no package", std::string(name));
    return it->second;
  }
  int calls = 0;

 private:
  std::map<std::string, PackageInfo> packages_;
};

Recipe recipe_with(std::vector<std::string> packages, std::vector<std::string> exclude = {}) {
  Recipe r;
  r.name = "t";
  r.arch = "arm64";
  r.kind = RecipeKind::kDebs;
  r.kernel = "linux-image-arm64";
  r.packages = std::move(packages);
  r.exclude = std::move(exclude);
  return r;
}

void add_kernel(FakeIndex& idx) {
  idx.add("linux-image-arm64", "6.1.192-3", "linux-image-6.1.0-57-arm64 (= 6.1.192-3)");
  idx.add("linux-image-6.1.0-57-arm64", "6.1.192-3", "kmod, linux-base (>= 4.3~), initramfs-tools");
}

std::vector<std::string> names(const ResolvedPackages& r) {
  std::vector<std::string> out;
  for (const auto& p : r.packages) out.push_back(p.name);
  return out;
}

TEST_CASE("dependency fields parse into groups of alternatives", "[images]") {
  auto g = parse_dependency_field(
      "libc6 (>= 2.34), debconf (>= 0.5) | debconf-2.0, perl:any, libfoo [arm64] <!nocheck>");
  REQUIRE(g.size() == 4);
  CHECK(g[0] == std::vector<std::string>{"libc6"});
  CHECK(g[1] == std::vector<std::string>{"debconf", "debconf-2.0"});
  CHECK(g[2] == std::vector<std::string>{"perl"});
  CHECK(g[3] == std::vector<std::string>{"libfoo"});
  CHECK(parse_dependency_field("").empty());
}

TEST_CASE("control stanzas from apt-cache show parse (captured fixture)", "[images]") {
  std::ifstream in(std::string(ARMHIVE_FIXTURES_DIR) + "/images/apt-cache-show.txt");
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  auto pkgs = parse_control_stanzas(ss.str());
  REQUIRE(pkgs.size() == 2);
  CHECK(pkgs[0].name == "qemu-guest-agent");
  CHECK(pkgs[0].version == "1:7.2+dfsg-7+deb12u18+b3");
  CHECK(pkgs[0].arch == "arm64");
  CHECK(pkgs[0].pre_depends == "init-system-helpers (>= 1.54~)");
  CHECK(pkgs[0].depends.find("libglib2.0-0 (>= 2.63.3)") != std::string::npos);
  CHECK(pkgs[1].name == "linux-image-arm64");
  CHECK(pkgs[1].depends.starts_with("linux-image-6.1.0-57-arm64"));
}

TEST_CASE("the resolver computes the closure, honours exclusions and follows the kernel",
          "[images]") {
  FakeIndex idx;
  add_kernel(idx);
  idx.add("qemu-guest-agent", "1:7.2", "libc6 (>= 2.34), libglib2.0-0");
  idx.add("libglib2.0-0", "2.74", "libc6, libffi8, libmount1");
  idx.add("libc6", "2.36", "libgcc-s1");
  idx.add("libgcc-s1", "12.2", "gcc-12-base, libc6");
  idx.add("gcc-12-base", "12.2");
  idx.add("libffi8", "3.4");
  idx.add("libmount1", "2.38", "libblkid1, debconf (>= 0.5) | debconf-2.0");
  idx.add("libblkid1", "2.38", "libc6");
  idx.add("debconf", "1.5");
  idx.add("busybox-static", "1:1.35");

  auto r =
      resolve_packages(recipe_with({"qemu-guest-agent", "busybox-static"}, {"debconf-2.0"}), idx);
  REQUIRE(r.is_ok());
  CHECK(names(*r) == std::vector<std::string>{"busybox-static", "gcc-12-base", "libblkid1", "libc6",
                                              "libffi8", "libgcc-s1", "libglib2.0-0", "libmount1",
                                              "qemu-guest-agent"});
  CHECK(r->kernel.name == "linux-image-6.1.0-57-arm64");
  CHECK(r->kernel_release == "6.1.0-57-arm64");
  // The kernel's own dependencies (kmod, initramfs-tools) are not part of the root filesystem.
  for (const auto& n : names(*r)) CHECK(n != "kmod");
}

TEST_CASE("the resolver picks the first installable alternative and uses Provides", "[images]") {
  FakeIndex idx;
  add_kernel(idx);
  idx.add("a", "1", "virtual-thing, missing | b");
  idx.add("b", "1");
  idx.add("c", "1", "", "virtual-thing");
  auto r = resolve_packages(recipe_with({"c", "a"}), idx);
  REQUIRE(r.is_ok());
  CHECK(names(*r) == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("the resolver refuses unknown packages, unresolvable dependencies and kernels",
          "[images]") {
  FakeIndex idx;
  add_kernel(idx);
  idx.add("iperf3", "3.12", "libiperf0");

  SECTION("unknown package named in the recipe") {
    auto r = resolve_packages(recipe_with({"no-such-package"}), idx);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK(r.status().field() == "packages");
    CHECK(r.status().message().find("no-such-package") != std::string::npos);
  }
  SECTION("dependency apt does not know") {
    auto r = resolve_packages(recipe_with({"iperf3"}), idx);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "packages");
    CHECK(r.status().message().find("libiperf0") != std::string::npos);
    CHECK(r.status().message().find("iperf3") != std::string::npos);
  }
  SECTION("an excluded dependency is not needed") {
    CHECK(resolve_packages(recipe_with({"iperf3"}, {"libiperf0"}), idx).is_ok());
  }
  SECTION("missing kernel package") {
    Recipe rec = recipe_with({"iperf3"}, {"libiperf0"});
    rec.kernel = "linux-image-nonexistent";
    auto r = resolve_packages(rec, idx);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "kernel");
    CHECK(r.status().message().find("linux-image-nonexistent") != std::string::npos);
  }
  SECTION("a kernel package that is not a kernel") {
    Recipe rec = recipe_with({"iperf3"}, {"libiperf0"});
    rec.kernel = "iperf3";
    auto r = resolve_packages(rec, idx);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "kernel");
  }
}

TEST_CASE("an mmdebstrap recipe only checks its listed packages exist", "[images]") {
  FakeIndex idx;
  add_kernel(idx);
  idx.add("systemd", "252", "libc6, something-mmdebstrap-resolves");
  Recipe rec = recipe_with({"systemd"});
  rec.kind = RecipeKind::kMmdebstrap;
  auto r = resolve_packages(rec, idx);
  REQUIRE(r.is_ok());
  CHECK(names(*r) == std::vector<std::string>{"systemd"});
  rec.packages.push_back("sytemd-typo");
  auto bad = resolve_packages(rec, idx);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message().find("sytemd-typo") != std::string::npos);
}

}  // namespace
}  // namespace armhive
