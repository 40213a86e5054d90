#include "daemon/images/catalog.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "base/sha256.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

// A scratch catalogue with one well-formed image "tiny" (small fake files).
class TempCatalog {
 public:
  TempCatalog() {
    char tmpl[] = "/tmp/armhive-catalog-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    add_image("tiny");
  }
  ~TempCatalog() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }
  fs::path image_dir(const std::string& name) const { return fs::path(dir_) / name; }

  nlohmann::json add_image(const std::string& name, const std::string& arch = "aarch64") {
    fs::create_directories(image_dir(name));
    nlohmann::json files;
    for (const auto& [role, file, data] : {std::tuple{"disk", "disk.qcow2", "QFI\xfb disk"},
                                           std::tuple{"kernel", "vmlinuz", "kernel"},
                                           std::tuple{"initrd", "initrd.img", "07070100"}}) {
      write(image_dir(name) / file, data);
      files[role] = {
          {"path", file}, {"sha256", sha256_hex(data)}, {"bytes", std::string_view(data).size()}};
    }
    nlohmann::json m = {{"name", name},
                        {"version", "1"},
                        {"arch", arch},
                        {"boot", "kernel"},
                        {"cmdline", "console=ttyAMA0"},
                        {"login_user", "root"},
                        {"files", files},
                        {"corpus",
                         {{"path", "/usr/share/armhive/corpus.bin"},
                          {"bytes", 8388608},
                          {"seed", 42},
                          {"sha256", std::string(64, 'a')}}},
                        {"packages", {{{"name", "zstd"}, {"version", "1.5.4"}, {"arch", "arm64"}}}},
                        {"built_at", "2026-01-30T00:00:00Z"},
                        {"recipe", name + ".toml"},
                        {"recipe_sha256", std::string(64, 'b')}};
    write(image_dir(name) / "manifest.json", m.dump(2));
    return m;
  }

  static void write(const fs::path& p, std::string_view data) {
    std::error_code ec;
    fs::permissions(p, fs::perms::owner_write, fs::perm_options::add, ec);
    std::ofstream(p, std::ios::binary | std::ios::trunc) << data;
  }

 private:
  std::string dir_;
};

TEST_CASE("the catalogue lists and finds images with absolute paths", "[images]") {
  TempCatalog tmp;
  auto cat = ImageCatalog::open(tmp.dir());
  REQUIRE(cat.is_ok());
  REQUIRE(cat->list().size() == 1);
  auto img = cat->find("tiny");
  REQUIRE(img.is_ok());
  CHECK(img->arch == "aarch64");
  CHECK(img->boot == "kernel");
  CHECK(img->disk.path == (tmp.image_dir("tiny") / "disk.qcow2").string());
  CHECK(fs::path(img->kernel.path).is_absolute());
  CHECK(img->corpus_path == "/usr/share/armhive/corpus.bin");
  CHECK(img->corpus_seed == 42);
  CHECK(img->manifest["packages"][0]["name"] == "zstd");
  CHECK(cat->verify(*img).is_ok());
}

TEST_CASE("the host copies of the corpus and armhive-stream are found and verified", "[images]") {
  TempCatalog tmp;
  auto m = tmp.add_image("tiny-host");
  const std::string corpus = "corpus bytes";
  const std::string stream =
      "\x7f"
      "ELF aarch64";
  TempCatalog::write(tmp.image_dir("tiny-host") / "corpus.bin", corpus);
  TempCatalog::write(tmp.image_dir("tiny-host") / "armhive-stream", stream);
  m["files"]["corpus"] = {
      {"path", "corpus.bin"}, {"sha256", sha256_hex(corpus)}, {"bytes", corpus.size()}};
  m["files"]["armhive-stream"] = {
      {"path", "armhive-stream"}, {"sha256", sha256_hex(stream)}, {"bytes", stream.size()}};
  TempCatalog::write(tmp.image_dir("tiny-host") / "manifest.json", m.dump(2));
  auto cat = ImageCatalog::open(tmp.dir());
  REQUIRE(cat.is_ok());
  auto img = cat->find("tiny-host");
  REQUIRE(img.is_ok());
  CHECK(img->host_corpus.path == (tmp.image_dir("tiny-host") / "corpus.bin").string());
  CHECK(img->host_stream.path == (tmp.image_dir("tiny-host") / "armhive-stream").string());
  CHECK(cat->verify(*img).is_ok());
  // Images built before these files existed have neither; they still verify.
  auto old = cat->find("tiny");
  REQUIRE(old.is_ok());
  CHECK(old->host_corpus.path.empty());
  CHECK(old->host_stream.path.empty());
  // A changed host copy is as corrupt as a changed disk.
  TempCatalog::write(tmp.image_dir("tiny-host") / "armhive-stream",
                     "\x7f"
                     "ELF x86_64!");
  Status s = cat->verify(*img);
  CHECK(s.code() == ErrorCode::kUnprocessable);
  CHECK(s.message().find("armhive-stream") != std::string::npos);
}

TEST_CASE("a missing image is refused naming it", "[images]") {
  TempCatalog tmp;
  auto cat = ImageCatalog::open(tmp.dir());
  REQUIRE(cat.is_ok());
  auto img = cat->find("debian-12");
  REQUIRE_FALSE(img.is_ok());
  CHECK(img.status().code() == ErrorCode::kNotFound);
  CHECK(img.status().message().find("debian-12") != std::string::npos);
  CHECK(ImageCatalog::open("/nonexistent/armhive/catalog").status().code() == ErrorCode::kNotFound);
}

TEST_CASE("a corrupt image file fails verification", "[images]") {
  TempCatalog tmp;
  auto cat = ImageCatalog::open(tmp.dir());
  REQUIRE(cat.is_ok());
  auto img = cat->find("tiny");
  REQUIRE(img.is_ok());
  SECTION("same size, different content") {
    TempCatalog::write(tmp.image_dir("tiny") / "vmlinuz", "kernEl");
    Status s = cat->verify(*img);
    CHECK(s.code() == ErrorCode::kUnprocessable);
    CHECK(s.message().find("corrupt") != std::string::npos);
    CHECK(s.message().find("kernel") != std::string::npos);
  }
  SECTION("truncated") {
    TempCatalog::write(tmp.image_dir("tiny") / "disk.qcow2", "QFI");
    Status s = cat->verify(*img);
    CHECK(s.code() == ErrorCode::kUnprocessable);
    CHECK(s.message().find("disk") != std::string::npos);
  }
  SECTION("missing file") {
    fs::remove(tmp.image_dir("tiny") / "initrd.img");
    Status s = cat->verify(*img);
    CHECK(s.code() == ErrorCode::kUnprocessable);
    CHECK(s.message().find("missing") != std::string::npos);
    CHECK(s.context().find("initrd.img") != std::string::npos);
  }
}

TEST_CASE("a foreign-architecture image is refused", "[images]") {
  TempCatalog tmp;
  tmp.add_image("tiny-x86", "x86_64");
  auto cat = ImageCatalog::open(tmp.dir());
  REQUIRE(cat.is_ok());
  auto img = cat->find("tiny-x86");
  REQUIRE(img.is_ok());
  Status s = cat->verify(*img);
  CHECK(s.code() == ErrorCode::kUnprocessable);
  CHECK(s.message().find("x86_64") != std::string::npos);
}

TEST_CASE("a malformed manifest makes only that image unusable", "[images]") {
  TempCatalog tmp;
  fs::create_directories(tmp.image_dir("broken"));
  TempCatalog::write(tmp.image_dir("broken") / "manifest.json", "{not json");
  auto m = tmp.add_image("nofiles");
  m.erase("files");
  TempCatalog::write(tmp.image_dir("nofiles") / "manifest.json", m.dump());
  auto escape = tmp.add_image("escape");
  escape["files"]["disk"]["path"] = "../tiny/disk.qcow2";
  TempCatalog::write(tmp.image_dir("escape") / "manifest.json", escape.dump());

  auto cat = ImageCatalog::open(tmp.dir());
  REQUIRE(cat.is_ok());
  CHECK(cat->find("tiny").is_ok());
  CHECK(cat->list().size() == 1);
  for (const char* name : {"broken", "nofiles", "escape"}) {
    auto img = cat->find(name);
    REQUIRE_FALSE(img.is_ok());
    CHECK(img.status().code() == ErrorCode::kUnprocessable);
  }
}

}  // namespace
}  // namespace armhive
