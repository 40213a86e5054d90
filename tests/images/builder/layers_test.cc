#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "images/builder/layer_store.h"
#include "images/builder/recipe.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

const std::string kRecipes = std::string(ARMHIVE_SOURCE_DIR) + "/images/recipes/";

bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// A directory of recipe files written by the test, removed at the end.
struct RecipeDir {
  fs::path dir;
  explicit RecipeDir(const std::string& tag)
      : dir(fs::temp_directory_path() /
            ("armhive-layers-" + tag + "-" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~RecipeDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / (name + ".toml")) << text;
    return (dir / (name + ".toml")).string();
  }
};

constexpr const char* kBase = R"(
name = "base"
version = "1"
arch = "arm64"
kind = "mmdebstrap"
packages = ["systemd", "zstd"]
kernel = "linux-image-arm64"
cmdline = "console=ttyAMA0 root=/dev/vda"
disk_size_mib = 2048
)";

TEST_CASE("ci and github-runner derive from debian-12 and repeat none of its lines",
          "[images][layers]") {
  auto base = load_recipe(kRecipes + "debian-12.toml");
  REQUIRE(base.is_ok());
  for (const char* image : {"ci", "github-runner"}) {
    INFO(image);
    auto chain = load_recipe_chain(kRecipes + image + ".toml");
    INFO(chain.status().to_string());
    REQUIRE(chain.is_ok());
    REQUIRE(chain->size() == 2);
    const Recipe& parent = chain->front();
    const Recipe& leaf = chain->back();
    CHECK(parent.name == "debian-12");
    CHECK(leaf.name == image);
    CHECK(leaf.from == "debian-12");
    // What it inherits, it does not restate.
    CHECK(leaf.kind == RecipeKind::kMmdebstrap);
    CHECK(leaf.kernel == base->kernel);
    CHECK(leaf.cmdline == base->cmdline);
    CHECK(leaf.corpus_path == base->corpus_path);
    for (const std::string& p : leaf.packages) CHECK_FALSE(has(base->packages, p));
    for (const RecipeFile& f : leaf.files) {
      for (const RecipeFile& g : base->files) CHECK(f.path != g.path);
    }
  }
  auto ci = load_recipe_chain(kRecipes + "ci.toml");
  REQUIRE(ci.is_ok());
  for (const char* p :
       {"build-essential", "cmake", "ninja-build", "pkg-config", "git", "git-lfs", "python3",
        "curl", "ca-certificates", "ccache", "zstd", "unzip", "jq", "sudo"}) {
    INFO(p);
    CHECK((has(ci->back().packages, p) || has(ci->front().packages, p)));
  }
}

TEST_CASE("a derived recipe inherits what it does not set and may set only its own keys",
          "[images][layers]") {
  RecipeDir d("inherit");
  d.write("base", kBase);
  auto chain = load_recipe_chain(d.write("child", R"(
name = "child"
version = "1"
from = "base"
packages = ["git"]
disk_size_mib = 4096
commands = ["git --version"]
)"));
  INFO(chain.status().to_string());
  REQUIRE(chain.is_ok());
  const Recipe& child = chain->back();
  CHECK(child.arch == "arm64");
  CHECK(child.kernel == "linux-image-arm64");
  CHECK(child.cmdline == "console=ttyAMA0 root=/dev/vda");
  CHECK(child.disk_size_mib == 4096);  // set here
  CHECK(chain->front().disk_size_mib == 2048);
  CHECK(child.commands == std::vector<std::string>{"git --version"});
  CHECK(child.packages == std::vector<std::string>{"git"});  // its layer's own
}

TEST_CASE("a bad chain of recipes is refused naming `from` or the key", "[images][layers]") {
  RecipeDir d("bad");
  d.write("base", kBase);
  auto refused = [](const Result<std::vector<Recipe>>& r) {
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    return r.status();
  };
  SECTION("an unknown parent") {
    Status s = refused(
        load_recipe_chain(d.write("x", "name = \"x\"\nversion = \"1\"\nfrom = \"debian-13\"\n")));
    CHECK(s.field() == "from");
    CHECK_THAT(s.message(), Catch::Contains("debian-13"));
  }
  SECTION("a cycle") {
    d.write("a", "name = \"a\"\nversion = \"1\"\nfrom = \"b\"\n");
    Status s =
        refused(load_recipe_chain(d.write("b", "name = \"b\"\nversion = \"1\"\nfrom = \"a\"\n")));
    CHECK(s.field() == "from");
    CHECK_THAT(s.message(), Catch::Contains("cycle"));
  }
  SECTION("a recipe deriving from itself") {
    Status s = refused(
        load_recipe_chain(d.write("self", "name = \"self\"\nversion = \"1\"\nfrom = \"self\"\n")));
    CHECK(s.field() == "from");
  }
  SECTION("a parent file that names another image") {
    d.write("other", std::string(kBase));  // its name is "base"
    Status s = refused(
        load_recipe_chain(d.write("y", "name = \"y\"\nversion = \"1\"\nfrom = \"other\"\n")));
    CHECK(s.field() == "from");
  }
  SECTION("a key the parent decides") {
    for (const char* line : {"kernel = \"linux-image-rt-arm64\"", "arch = \"arm64\"",
                             "suite = \"trixie\"", "boot = \"uefi\""}) {
      INFO(line);
      auto r = parse_recipe(
          std::string("name = \"z\"\nversion = \"1\"\nfrom = \"base\"\n") + line + "\n", "");
      REQUIRE_FALSE(r.is_ok());
      CHECK(r.status().field() == std::string(line).substr(0, std::string(line).find(' ')));
      CHECK_THAT(r.status().message(), Catch::Contains("inherited from base"));
    }
  }
  SECTION("commands in a debs recipe") {
    auto tiny = load_recipe(kRecipes + "tiny.toml");
    REQUIRE(tiny.is_ok());
    std::ifstream in(kRecipes + "tiny.toml");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto r = parse_recipe("commands = [\"true\"]\n" + text, kRecipes);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "commands");
  }
}

TEST_CASE("derived from a debs recipe: refused, only mmdebstrap layers", "[images][layers]") {
  RecipeDir d("debs");
  std::ifstream in(kRecipes + "tiny.toml");
  std::string tiny((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // tiny.toml reads files beside it: copy them so it loads from the test's directory.
  fs::copy(kRecipes + "tiny", d.dir / "tiny", fs::copy_options::recursive);
  d.write("tiny", tiny);
  auto r = load_recipe_chain(
      d.write("on-tiny", "name = \"on-tiny\"\nversion = \"1\"\nfrom = \"tiny\"\n"));
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().field() == "from");
  CHECK_THAT(r.status().message(), Catch::Contains("debs recipe"));
}

TEST_CASE("a layer's key changes with each of its inputs and nothing else", "[images][layers]") {
  const LayerInputs base{.recipe_sha256 = "r1",
                         .parent_key = "p1",
                         .packages = {"git 1:2.39 arm64 aa", "cmake 3.25 arm64 bb"},
                         .index_digest = "i1"};
  const std::string key = layer_key(base);
  CHECK(key.size() == 64);
  CHECK(key.find_first_not_of("0123456789abcdef") == std::string::npos);
  LayerInputs reordered = base;
  std::reverse(reordered.packages.begin(), reordered.packages.end());
  CHECK(layer_key(reordered) == key);  // a set of packages, not a list

  LayerInputs changed = base;
  changed.recipe_sha256 = "r2";
  CHECK(layer_key(changed) != key);
  changed = base;
  changed.parent_key = "p2";
  CHECK(layer_key(changed) != key);
  changed = base;
  changed.packages[0] = "git 1:2.39 arm64 ab";  // another .deb of the same version
  CHECK(layer_key(changed) != key);
  changed = base;
  changed.index_digest = "i2";
  CHECK(layer_key(changed) != key);
  // Framing: moving text between fields is a different input.
  CHECK(layer_key({.recipe_sha256 = "ab", .parent_key = "c"}) !=
        layer_key({.recipe_sha256 = "a", .parent_key = "bc"}));
}

TEST_CASE("the layer store keeps a layer by key, refuses a colliding key and prunes old ones",
          "[images][layers]") {
  RecipeDir d("store");
  LayerStore store(d.dir / "layers");
  auto tar = [&d](const std::string& text) {
    fs::path p = d.dir / "t.tar";
    std::ofstream(p) << text;
    return p;
  };
  auto none = store.find("ci", "k1", "p");
  REQUIRE(none.is_ok());
  CHECK_FALSE(none->has_value());

  auto kept = store.put("ci", std::string(64, '1'), "p", tar("one"), {{"recipe", "ci.toml"}});
  REQUIRE(kept.is_ok());
  CHECK(fs::exists(kept->tar()));
  CHECK_FALSE(fs::exists(d.dir / "t.tar"));  // moved in
  auto found = store.find("ci", std::string(64, '1'), "p");
  REQUIRE(found.is_ok());
  REQUIRE(found->has_value());
  CHECK((*found)->info.value("recipe", "") == "ci.toml");
  CHECK((*found)->info.value("bytes", 0) == 3);

  // The same key for another layer: refused, naming `from`, never reused.
  auto clash = store.find("github-runner", std::string(64, '1'), "p");
  REQUIRE_FALSE(clash.is_ok());
  CHECK(clash.status().field() == "from");

  // Three generations of ci on one parent; keep the newest only.
  REQUIRE(store.put("ci", std::string(64, '2'), "p", tar("two"), {}).is_ok());
  REQUIRE(store.put("ci", std::string(64, '3'), "p", tar("three"), {}).is_ok());
  // A layer whose parent is the oldest ci: that one stays.
  REQUIRE(
      store.put("ci-extra", std::string(64, '4'), std::string(64, '1'), tar("four"), {}).is_ok());
  auto removed = store.prune("ci", std::string(64, '3'), 1);
  CHECK(removed.size() == 1);  // '2'; '1' is a parent
  CHECK(store.find("ci", std::string(64, '3'), "p")->has_value());
  CHECK(store.find("ci", std::string(64, '1'), "p")->has_value());
  CHECK_FALSE(store.find("ci", std::string(64, '2'), "p")->has_value());
  // No staging directories left behind.
  for (const auto& e : fs::directory_iterator(store.dir()))
    CHECK(e.path().filename().string().front() != '.');
}

}  // namespace
}  // namespace armhive
