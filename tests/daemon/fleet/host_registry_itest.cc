// HostRegistry against libvirt's in-process test:/// driver: every host is connected and set up
// at once, and handed to the engine with its name, URI, labels and topology; a host that
// refuses the connection or never answers fails open() naming that host (and libvirt's error),
// and costs its deadline once, not the others' time.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "daemon/fleet/host_registry.h"
#include "daemon/virt/event_loop.h"
#include "tests/support/mute_libvirt.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct Dir {
  fs::path path;
  explicit Dir(const std::string& name)
      : path(fs::temp_directory_path() /
             ("armhive-registry-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Dir() { fs::remove_all(path); }
};

HostSetup host(std::string name, std::string uri, const Dir& dir) {
  HostSetup h;
  h.name = std::move(name);
  h.uri = std::move(uri);
  h.vm_dir = (dir.path / "vms").string();  // test:///default is one host: one directory
  h.image_dir = (dir.path / "images").string();
  return h;
}

HostRegistryOptions options() {
  HostRegistryOptions o;
  o.storage_pool = "armhive-registry-itest";
  o.connect_timeout = 5s;
  o.catalogue = [](const std::string& name) -> Result<BootImage> {
    return not_found("no image " + name);
  };
  return o;
}

TEST_CASE("host registry: every host is set up and given to the engine as it is configured",
          "[fleet][registry]") {
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  Dir dir("two");
  HostSetup hc1 = host("hc1", "test:///default", dir);
  hc1.labels = {{"board", "honeycomb"}};
  HostSetup tx1 = host("tx1", "test:///default", dir);
  tx1.labels = {{"board", "thunderx"}};
  tx1.cpus.housekeeping = "0";
  tx1.cpus.dedicated = "1";
  auto registry = HostRegistry::open(options(), {hc1, tx1});
  INFO(registry.status().to_string());
  REQUIRE(registry.is_ok());
  REQUIRE((*registry)->hosts().size() == 2);
  std::shared_ptr<HostRegistry::Host> t = (*registry)->host("tx1");
  REQUIRE(t != nullptr);
  CHECK_FALSE(t->remote);
  CHECK(t->topology.hostname == "tx1");  // the armhive name, not libvirt's host name
  CHECK(t->sets.housekeeping == std::vector<int>{0});
  CHECK(t->sets.dedicated == std::vector<int>{1});
  CHECK(t->shipping == nullptr);  // a local host uses this machine's catalogue
  CHECK((*registry)->host("nope") == nullptr);

  auto hosts = (*registry)->engine_hosts();
  REQUIRE(hosts.is_ok());
  REQUIRE(hosts->size() == 2);
  CHECK((*hosts)[0].name == "hc1");
  CHECK((*hosts)[0].uri == "test:///default");
  CHECK((*hosts)[0].labels.at("board") == "honeycomb");
  CHECK((*hosts)[1].hypervisor == t->hypervisor.get());
  CHECK((*hosts)[1].cores.sets().dedicated == std::vector<int>{1});
  CHECK((*hosts)[0].images("tiny").status().code() == ErrorCode::kNotFound);  // the catalogue's
}

TEST_CASE("host registry: a host that refuses or never answers is named, with libvirt's error",
          "[fleet][registry]") {
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  Dir dir("bad");
  SECTION("refused: nothing listens") {
    // Loopback, a port nothing listens on.
    auto r = HostRegistry::open(options(), {host("hc1", "test:///default", dir),
                                            host("tx1", "qemu+tcp://127.0.0.1:9/system", dir)});
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kUnavailable);
    CHECK_THAT(r.status().message(), Catch::Contains("host tx1 (qemu+tcp://127.0.0.1:9/system)"));
    CHECK_THAT(r.status().message(), Catch::Contains("Connection refused"));
  }
  SECTION("mute: a stopped libvirtd costs its deadline, and names the host") {
    MuteLibvirt mute(dir.path);
    HostRegistryOptions o = options();
    o.connect_timeout = 1s;
    auto r =
        HostRegistry::open(o, {host("hc1", "test:///default", dir), host("hc2", mute.uri(), dir)});
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kTimeout);
    CHECK_THAT(r.status().message(), Catch::Contains("host hc2 (" + mute.uri() + ")"));
    CHECK_THAT(r.status().message(), Catch::Contains("libvirt did not answer within 1s"));
  }
  SECTION("a remote host whose guests need this machine's guard") {
    HostRegistryOptions o = options();
    o.networks.push_back({"armhive", "ahbr0", "10.77.0.1/24", "10.77.0.10", "10.77.0.250", 1500});
    HostSetup remote = host("tx1", "qemu+tcp://127.0.0.1:9/system", dir);
    remote.guard_here = true;
    auto r = HostRegistry::open(o, {remote});
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains("host tx1"));
  }
  CHECK(HostRegistry::open(options(), {}).status().code() == ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace armhive
