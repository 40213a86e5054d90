// armhived and its hosts: a host of [[hosts]] that cannot be reached is named with libvirt's
// error while armhived serves with the others; a remote host's guest networks need its own
// guard; a libvirt that never answers is given up on after libvirt_timeout.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>

#include "base/process_runner.h"
#include "tests/support/mute_libvirt.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

TEST_CASE("armhived names the host of a fleet it cannot reach, and the pool no host serves",
          "[config][hosts]") {
  fs::path dir = fs::temp_directory_path() / ("armhive-hosts-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path config = dir / "armhived.toml";
  // Loopback, a port nothing listens on: the second host's libvirtd is not there. armhived
  // serves with hc1 all the same (an ephemeral API port) and names tx1 with libvirt's error;
  // the runner's deadline ends it.
  {
    std::ofstream(config) << "[server]\nport = 0\n"
                          << "[host]\nstate_dir = \"" << (dir / "state").string() << "\"\n"
                          << "[engine]\nhost_probe_period = \"1s\"\n"
                          << "[[hosts]]\nname = \"hc1\"\nlibvirt_uri = \"test:///default\"\n"
                          << "[[hosts]]\nname = \"tx1\"\n"
                          << "libvirt_uri = \"qemu+tcp://127.0.0.1:9/system\"\n"
                          << "[[pools]]\nname = \"p\"\nimage = \"tiny\"\n";
  }
  SubprocessRunner runner;
  auto r = runner.run(
      {.argv = {ARMHIVE_DAEMON_PATH, "-c", config.string()}, .timeout = std::chrono::seconds(8)});
  REQUIRE(r.is_ok());
  INFO(r->out << r->err);
  CHECK(r->timed_out);  // it was serving
  const std::string log = r->out + r->err;
  CHECK_THAT(log, Catch::Contains("host tx1 (qemu+tcp://127.0.0.1:9/system)"));
  CHECK_THAT(log, Catch::Contains("Connection refused"));  // libvirt's own words
  CHECK_THAT(log, Catch::Contains("drives it only once it answers"));
  CHECK_THAT(log, Catch::Contains("armhived listening on"));

  // No host at all can be reached: armhived does not start, and says why.
  {
    std::ofstream(config) << "[host]\nstate_dir = \"" << (dir / "state").string() << "\"\n"
                          << "[[hosts]]\nname = \"tx1\"\n"
                          << "libvirt_uri = \"qemu+tcp://127.0.0.1:9/system\"\n"
                          << "[[pools]]\nname = \"p\"\nimage = \"tiny\"\n";
  }
  auto none = runner.run(
      {.argv = {ARMHIVE_DAEMON_PATH, "-c", config.string()}, .timeout = std::chrono::seconds(30)});
  REQUIRE(none.is_ok());
  CHECK(none->exit_code == 1);
  CHECK_THAT(none->out + none->err, Catch::Contains("no libvirt host can be driven"));
  CHECK_THAT(none->out + none->err, Catch::Contains("host tx1 (qemu+tcp://127.0.0.1:9/system)"));

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

TEST_CASE("armhived refuses a remote host with guest networks unless its guard is the host's",
          "[config][hosts]") {
  fs::path dir = fs::temp_directory_path() / ("armhive-remote-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path config = dir / "armhived.toml";
  SubprocessRunner runner;
  const std::string network =
      "[[networks]]\nname = \"armhive\"\nbridge = \"ahbr0\"\ncidr = \"10.77.0.1/24\"\n"
      "dhcp_start = \"10.77.0.10\"\ndhcp_end = \"10.77.0.250\"\n";
  // Loopback, a port nothing listens on: were the refusal gone, no traffic leaves this machine.
  struct Case {
    std::string hosts, key, line;
  };
  for (const Case& c :
       {Case{"[host]\nlibvirt_uri = \"qemu+tcp://127.0.0.1:9/system\"\n", "host.libvirt_uri", "2"},
        Case{"[[hosts]]\nname = \"tx1\"\nlibvirt_uri = \"qemu+tls://127.0.0.1:9/system\"\n",
             "hosts[0].network_guard", "1"}}) {
    std::ofstream(config) << c.hosts << network << "[[pools]]\nname = \"p\"\nimage = \"tiny\"\n"
                          << "network = \"armhive\"\n";
    auto r = runner.run({.argv = {ARMHIVE_DAEMON_PATH, "-c", config.string()},
                         .timeout = std::chrono::seconds(30)});
    REQUIRE(r.is_ok());
    INFO(r->err);
    CHECK(r->exit_code == 2);
    CHECK_THAT(r->err, Catch::Contains("network_guard = \"host\""));
    // FILE:LINE: KEY: what (daemon/config/config_check.h), the key at the line of its table.
    CHECK_THAT(r->err, Catch::Contains(config.string() + ":" + c.line + ": " + c.key + ": "));
  }
  fs::remove_all(dir);
}

// A libvirtd that accepts the connection and never answers (stopped, or a cut link): armhived
// gives up after [host] libvirt_timeout with an error saying so, instead of hanging.
TEST_CASE("armhived gives up on a libvirt that never answers after libvirt_timeout",
          "[config][hosts]") {
  fs::path dir = fs::temp_directory_path() / ("armhive-mute-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto mute = std::make_unique<MuteLibvirt>(dir);
  fs::path config = dir / "armhived.toml";
  {
    std::ofstream(config) << "[host]\nstate_dir = \"" << (dir / "state").string() << "\"\n"
                          << "libvirt_uri = \"" << mute->uri() << "\"\nlibvirt_timeout = \"2s\"\n"
                          << "[[pools]]\nname = \"p\"\nimage = \"tiny\"\n";
  }
  SubprocessRunner runner;
  auto r = runner.run(
      {.argv = {ARMHIVE_DAEMON_PATH, "-c", config.string()}, .timeout = std::chrono::seconds(60)});
  mute.reset();
  REQUIRE(r.is_ok());
  INFO(r->out << r->err);
  CHECK(r->exit_code == 1);
  CHECK_THAT(r->out + r->err, Catch::Contains("libvirt did not answer within 2s while connecting"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace armhive
