// armhived with several [[hosts]]: the configuration is valid, but this armhived drives one
// libvirt host, so it refuses at once, before it touches the state directory or libvirt.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "base/process_runner.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

TEST_CASE("armhived refuses a fleet of several [[hosts]] rather than serve only one",
          "[config][hosts]") {
  fs::path dir = fs::temp_directory_path() / ("armhive-hosts-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path config = dir / "armhived.toml";
  {
    std::ofstream(config) << "[host]\nstate_dir = \"" << (dir / "state").string() << "\"\n"
                          << "[[hosts]]\nname = \"hc1\"\nlibvirt_uri = \"test:///default\"\n"
                          << "[[hosts]]\nname = \"tx1\"\nlibvirt_uri = \"test:///default\"\n"
                          << "[[pools]]\nname = \"p\"\nimage = \"tiny\"\n";
  }
  SubprocessRunner runner;
  auto r = runner.run(
      {.argv = {ARMHIVE_DAEMON_PATH, "-c", config.string()}, .timeout = std::chrono::seconds(30)});
  REQUIRE(r.is_ok());
  CHECK(r->exit_code == 2);
  CHECK_THAT(r->err, Catch::Contains("2 [[hosts]] are configured"));
  CHECK_THAT(r->err, Catch::Contains("key hosts"));
  CHECK_FALSE(fs::exists(dir / "state"));

  // A pool whose host_labels match no host is named in the error.
  {
    std::ofstream(config) << "[[hosts]]\nname = \"hc1\"\nlibvirt_uri = \"test:///default\"\n"
                          << "labels = { board = \"honeycomb\" }\n"
                          << "[[pools]]\nname = \"tx\"\nimage = \"tiny\"\n"
                          << "host_labels = { board = \"thunderx\" }\n";
  }
  auto unmatched = runner.run(
      {.argv = {ARMHIVE_DAEMON_PATH, "-c", config.string()}, .timeout = std::chrono::seconds(30)});
  REQUIRE(unmatched.is_ok());
  CHECK(unmatched->exit_code == 2);
  CHECK_THAT(unmatched->err, Catch::Contains("pool 'tx' matches no host"));
  CHECK_THAT(unmatched->err, Catch::Contains("pools[0].host_labels"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace armhive
