#include "images/builder/recipe.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

constexpr const char* kMinimal = R"(
name = "mini"
version = "1"
arch = "arm64"
kind = "mmdebstrap"
packages = ["iperf3", "zstd"]
kernel = "linux-image-arm64"
)";

TEST_CASE("the tiny recipe parses with its packages, modules, corpus and files", "[images]") {
  auto r = load_recipe(std::string(ARMHIVE_SOURCE_DIR) + "/images/recipes/tiny.toml");
  REQUIRE(r.is_ok());
  CHECK(r->name == "tiny");
  CHECK(r->arch == "arm64");
  CHECK(r->kind == RecipeKind::kDebs);
  CHECK(r->kernel == "linux-image-arm64");
  CHECK(r->file_name == "tiny.toml");
  for (const char* p : {"busybox-static", "qemu-guest-agent", "openssh-server", "iperf3", "zstd"})
    CHECK(std::find(r->packages.begin(), r->packages.end(), p) != r->packages.end());
  for (const char* m : {"virtio_pci", "virtio_blk", "virtio_net", "virtio_console", "ext4"})
    CHECK(std::find(r->modules.begin(), r->modules.end(), m) != r->modules.end());
  CHECK(r->initramfs_init.find("switch_root") != std::string::npos);
  CHECK(r->corpus_path == "/usr/share/armhive/corpus.bin");
  CHECK(r->corpus_bytes >= (8u << 20));
  CHECK(r->corpus_bytes <= (16u << 20));
  bool has_inittab = false, has_passwd_root = false;
  for (const auto& f : r->files) {
    if (f.path == "/etc/inittab")
      has_inittab = f.content.find("armhive-agent") != std::string::npos;
    if (f.path == "/etc/passwd")
      has_passwd_root = f.content.find("root:x:0:0:") != std::string::npos;
  }
  CHECK(has_inittab);
  CHECK(has_passwd_root);
  CHECK(r->sha256.size() == 64);
}

TEST_CASE("the debian-12 recipe parses (the documented mmdebstrap build)", "[images]") {
  auto r = load_recipe(std::string(ARMHIVE_SOURCE_DIR) + "/images/recipes/debian-12.toml");
  REQUIRE(r.is_ok());
  CHECK(r->kind == RecipeKind::kMmdebstrap);
  CHECK(r->arch == "arm64");
  for (const char* p : {"systemd", "openssh-server", "qemu-guest-agent", "iperf3", "zstd"})
    CHECK(std::find(r->packages.begin(), r->packages.end(), p) != r->packages.end());
  CHECK(r->cmdline.find("root=/dev/vda") != std::string::npos);
}

TEST_CASE("the recipe hash changes with the recipe text", "[images]") {
  auto a = parse_recipe(kMinimal, "");
  auto b = parse_recipe(std::string(kMinimal) + "cmdline = \"console=ttyAMA0\"\n", "");
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  CHECK(a->sha256 != b->sha256);
  CHECK(parse_recipe(kMinimal, "")->sha256 == a->sha256);
}

TEST_CASE("bad recipes are refused naming the culprit", "[images]") {
  auto field_of = [](const std::string& text) {
    auto r = parse_recipe(text, "");
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    return r.status().field();
  };
  std::string base = kMinimal;
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = base;
    s.replace(s.find(from), from.size(), to);
    return s;
  };

  SECTION("wrong architecture") {
    auto r = parse_recipe(replace("arch = \"arm64\"", "arch = \"amd64\""), "");
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "arch");
    CHECK(r.status().message().find("amd64") != std::string::npos);
  }
  SECTION("missing kernel") {
    CHECK(field_of(replace("kernel = \"linux-image-arm64\"", "")) == "kernel");
  }
  SECTION("no packages") {
    CHECK(field_of(replace("packages = [\"iperf3\", \"zstd\"]", "packages = []")) == "packages");
  }
  SECTION("invalid package name") {
    CHECK(field_of(replace("\"zstd\"", "\"Zstd; rm -rf /\"")) == "packages");
  }
  SECTION("unknown key (a typo)") { CHECK(field_of(base + "kernal = \"x\"\n") == "kernal"); }
  SECTION("bad kind") { CHECK(field_of(replace("\"mmdebstrap\"", "\"docker\"")) == "kind"); }
  SECTION("bad name") { CHECK(field_of(replace("\"mini\"", "\"../etc\"")) == "name"); }
  SECTION("debs recipe without an initramfs init") {
    CHECK(field_of(replace("\"mmdebstrap\"", "\"debs\"")) == "initramfs.init");
  }
  SECTION("relative guest path in files") {
    CHECK(field_of(base + "[[files]]\npath = \"etc/x\"\ncontent = \"\"\n") == "files.path");
  }
  SECTION("path escaping the guest root") {
    CHECK(field_of(base + "[[files]]\npath = \"/etc/../../x\"\ncontent = \"\"\n") == "files.path");
  }
  SECTION("a file with two kinds of content") {
    CHECK(field_of(base + "[[files]]\npath = \"/x\"\ncontent = \"a\"\nsymlink = \"/y\"\n") ==
          "files");
  }
  SECTION("source without a recipe directory") {
    CHECK(field_of(base + "[[files]]\npath = \"/x\"\nsource = \"x\"\n") == "files.source");
  }
  SECTION("bad mode") {
    CHECK(field_of(base + "[[files]]\npath = \"/x\"\ncontent = \"\"\nmode = \"0999\"\n") ==
          "files.mode");
  }
  SECTION("syntax error") {
    auto r = parse_recipe("name = \"x\nversion = 1", "");
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "recipe");
    CHECK(r.status().message().find("line") != std::string::npos);
  }
}

TEST_CASE("the tiny recipe compiles the memory benchmark kernel and has the bench tools",
          "[images]") {
  auto r = load_recipe(std::string(ARMHIVE_SOURCE_DIR) + "/images/recipes/tiny.toml");
  REQUIRE(r.is_ok());
  for (const char* p : {"openssl", "fio"})
    CHECK(std::find(r->packages.begin(), r->packages.end(), p) != r->packages.end());
  const RecipeFile* stream = nullptr;
  for (const auto& f : r->files)
    if (f.path == "/usr/local/bin/armhive-stream") stream = &f;
  REQUIRE(stream != nullptr);
  CHECK(stream->type == RecipeFile::Type::kCompiled);
  CHECK(stream->source == "tiny/armhive-stream.c");
  CHECK(stream->mode == 0755);
  CHECK(stream->content.find("validation ok") != std::string::npos);  // the source is read
  // compile without a base directory, or beside another kind, is refused.
  auto field = [](const std::string& text) {
    auto p = parse_recipe(text, "");
    return p.is_ok() ? std::string("ok") : p.status().field();
  };
  CHECK(field(std::string(kMinimal) + "[[files]]\npath = \"/x\"\ncompile = \"x.c\"\n") ==
        "files.source");
  CHECK(field(std::string(kMinimal) +
              "[[files]]\npath = \"/x\"\ncompile = \"x.c\"\ncontent = \"y\"\n") == "files");
}

TEST_CASE("a recipe file that does not exist is not found", "[images]") {
  auto r = load_recipe("/nonexistent/armhive/recipe.toml");
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::kNotFound);
}

}  // namespace
}  // namespace armhive
