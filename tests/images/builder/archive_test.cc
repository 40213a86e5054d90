// [[archives]]: an operator-supplied tarball (the GitHub runner's), pinned by sha256, lands in
// the image's root filesystem. A small stand-in tarball plays GitHub's (no internet here).
#include "images/builder/archive.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "base/sha256.h"
#include "images/builder/recipe.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

struct StandIn {
  fs::path dir;
  fs::path tarball;
  std::string sha256;
  StandIn() {
    dir = fs::temp_directory_path() / ("armhive-archive-test-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "src/bin");
    std::ofstream(dir / "src/run.sh") << "#!/bin/sh\nexec ./bin/Runner.Listener run \"$@\"\n";
    fs::permissions(dir / "src/run.sh", fs::perms(0755));
    std::ofstream(dir / "src/bin/Runner.Listener") << "stand-in listener\n";
    tarball = dir / "actions-runner-linux-arm64-0.0.1.tar.gz";
    SubprocessRunner runner;
    auto r =
        runner.run({.argv = {"tar", "-czf", tarball.string(), "-C", (dir / "src").string(), "."}});
    REQUIRE(r.is_ok());
    REQUIRE(r->ok());
    sha256 = *sha256_file(tarball.string());
  }
  ~StandIn() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

std::string recipe_text(const std::string& sha, const std::string& source = "") {
  return R"(
name = "runner"
version = "1"
arch = "arm64"
kind = "mmdebstrap"
packages = ["ca-certificates"]
kernel = "linux-image-arm64"
[[archives]]
name = "actions-runner"
path = "/opt/actions-runner"
sha256 = ")" +
         sha + "\"\n" + (source.empty() ? "" : "source = \"" + source + "\"\n");
}

TEST_CASE("an archive's files land in the image at its path, executable bits kept",
          "[images][archives]") {
  StandIn t;
  auto recipe = parse_recipe(recipe_text(t.sha256), "");
  REQUIRE(recipe.is_ok());
  REQUIRE(recipe->archives.size() == 1);
  REQUIRE(set_archive_source(*recipe, "actions-runner=" + t.tarball.string()).is_ok());
  const fs::path rootfs = t.dir / "rootfs";
  SubprocessRunner runner;
  Status s = unpack_archive(runner, recipe->archives[0], rootfs / "opt/actions-runner");
  INFO(s.to_string());
  REQUIRE(s.is_ok());
  CHECK(fs::exists(rootfs / "opt/actions-runner/bin/Runner.Listener"));
  struct stat st {};
  REQUIRE(::stat((rootfs / "opt/actions-runner/run.sh").c_str(), &st) == 0);
  CHECK((st.st_mode & 0111) != 0);

  // The pin, not the tarball's location, is what the recipe's hash depends on.
  auto other = parse_recipe(recipe_text(t.sha256, "/elsewhere/runner.tar.gz"), "");
  REQUIRE(other.is_ok());
  auto pinned_otherwise = parse_recipe(recipe_text(std::string(64, '1')), "");
  REQUIRE(pinned_otherwise.is_ok());
  CHECK(pinned_otherwise->sha256 != recipe->sha256);
}

TEST_CASE("a tarball that is not the pinned one never reaches the image", "[images][archives]") {
  StandIn t;
  auto recipe = parse_recipe(recipe_text(std::string(64, 'a')), "");
  REQUIRE(recipe.is_ok());
  SubprocessRunner runner;
  const fs::path target = t.dir / "rootfs/opt/actions-runner";
  Status missing = unpack_archive(runner, recipe->archives[0], target);
  CHECK(missing.field() == "archives.source");
  CHECK_THAT(missing.message(), Catch::Contains("--archive actions-runner=PATH"));
  REQUIRE(set_archive_source(*recipe, "actions-runner=" + t.tarball.string()).is_ok());
  Status wrong = unpack_archive(runner, recipe->archives[0], target);
  CHECK(wrong.field() == "archives.sha256");
  CHECK_THAT(wrong.message(), Catch::Contains(t.sha256));  // says what the tarball's sum is
  CHECK_FALSE(fs::exists(target));
  CHECK(set_archive_source(*recipe, "nope=/x").field() == "archive");
  CHECK(set_archive_source(*recipe, "no-equals").field() == "archive");
}

TEST_CASE("archives in a recipe are checked", "[images][archives]") {
  for (const std::string& bad : {recipe_text("short"), recipe_text(std::string(64, 'A'))}) {
    auto r = parse_recipe(bad, "");
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "archives.sha256");
  }
  auto rel = parse_recipe(recipe_text(std::string(64, 'a'), "runner.tar.gz"), "");
  REQUIRE_FALSE(rel.is_ok());
  CHECK(rel.status().field() == "archives.source");
  auto runner = load_recipe(std::string(ARMHIVE_SOURCE_DIR) + "/images/recipes/github-runner.toml");
  INFO(runner.status().to_string());
  REQUIRE(runner.is_ok());
  REQUIRE(runner->archives.size() == 1);
  CHECK(runner->archives[0].path == "/opt/actions-runner");
  CHECK(std::find(runner->packages.begin(), runner->packages.end(), "libicu72") !=
        runner->packages.end());
}

}  // namespace
}  // namespace armhive
