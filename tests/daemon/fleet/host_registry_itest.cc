// HostRegistry against libvirt's in-process test:/// driver: every host is connected and set up
// at once, and handed to the engine with its name, URI, labels and topology; a host that
// refuses the connection or never answers fails open() naming that host (and libvirt's error),
// and costs its deadline once, not the others' time.
#include <unistd.h>

#include <atomic>
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
  // Generous: a host that answers must never time out, even under TSan on a loaded machine
  // (CI runs these beside the e2e guests); the tests of a deadline set their own.
  o.connect_timeout = 60s;
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
  // The engine calls the host's LibvirtHypervisor through its slot.
  REQUIRE((*hosts)[1].hypervisor != nullptr);
  CHECK((*hosts)[1].hypervisor->list_vms().is_ok());
  CHECK((*hosts)[1].cores.sets().dedicated == std::vector<int>{1});
  CHECK((*hosts)[0].images("tiny").status().code() == ErrorCode::kNotFound);  // the catalogue's
}

TEST_CASE("host registry: a host that refuses or never answers waits, named with libvirt's error",
          "[fleet][registry]") {
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  Dir dir("bad");
  SECTION("refused: nothing listens") {
    // Loopback, a port nothing listens on. Never seen before: no topology to drive it with, so
    // it is not the engine's until it answers; armhived starts with the others.
    auto r = HostRegistry::open(options(), {host("hc1", "test:///default", dir),
                                            host("tx1", "qemu+tcp://127.0.0.1:9/system", dir)});
    INFO(r.status().to_string());
    REQUIRE(r.is_ok());
    CHECK((*r)->hosts().size() == 1);
    CHECK((*r)->engine_hosts()->size() == 1);
    auto waiting = (*r)->waiting();
    REQUIRE(waiting.count("tx1") == 1);
    // libvirt's words; the listing names the host and its URI beside them.
    CHECK_THAT(waiting.at("tx1"), Catch::StartsWith("open libvirt connection:"));
    CHECK_THAT(waiting.at("tx1"), Catch::Contains("Connection refused"));
    // Listed by the API as unreachable, with libvirt's error and no CPUs.
    auto listed = (*r)->waiting_hosts();
    REQUIRE(listed.size() == 1);
    HostView view = HostRegistry::view_of(listed[0]);
    CHECK(view.topology.hostname == "tx1");
    CHECK(view.uri == "qemu+tcp://127.0.0.1:9/system");
    CHECK(view.state == HostState::kUnreachable);
    CHECK(view.unreachable_since == std::optional<TimePoint>(listed[0].since));
    CHECK_THAT(view.last_error, Catch::Contains("Connection refused"));
    CHECK(view.topology.cpus.empty());
    CHECK(view.cores.empty());
    CHECK((*r)->reconnect_once().empty());  // still refused
    CHECK((*r)->waiting().count("tx1") == 1);
    CHECK((*r)->waiting_hosts().at(0).since == listed[0].since);  // since the first try
    CHECK((*r)->remove("tx1").is_ok());                           // an admin gives up on it
    CHECK((*r)->waiting_hosts().empty());
    CHECK((*r)->waiting().empty());
  }
  SECTION("mute: a stopped libvirtd costs its deadline, and says so") {
    MuteLibvirt mute(dir.path);
    HostRegistryOptions o = options();
    o.connect_timeout = 1s;
    auto r =
        HostRegistry::open(o, {host("hc1", "test:///default", dir), host("hc2", mute.uri(), dir)});
    REQUIRE(r.is_ok());
    auto waiting = (*r)->waiting();
    REQUIRE(waiting.count("hc2") == 1);
    CHECK_THAT(waiting.at("hc2"), Catch::Contains("libvirt did not answer within 1s"));
  }
  SECTION("no host answers: armhived cannot start, and says why for each") {
    auto r = HostRegistry::open(options(), {host("tx1", "qemu+tcp://127.0.0.1:9/system", dir)});
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kUnavailable);
    CHECK_THAT(r.status().message(), Catch::Contains("no libvirt host can be driven"));
    CHECK_THAT(r.status().message(), Catch::Contains("host tx1 (qemu+tcp://127.0.0.1:9/system)"));
  }
  SECTION("a remote host whose guests need this machine's guard") {
    HostRegistryOptions o = options();
    o.networks.push_back({"armhive", "ahbr0", "10.77.0.1/24", "10.77.0.10", "10.77.0.250", 1500});
    HostSetup remote = host("tx1", "qemu+tcp://127.0.0.1:9/system", dir);
    remote.guard_here = true;
    auto r = HostRegistry::open(o, {host("hc1", "test:///default", dir), remote});
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains("host tx1"));
  }
  SECTION("CPU sets the host cannot give are the configuration's to fix, not a host to wait for") {
    HostSetup odd = host("hc2", "test:///default", dir);
    odd.cpus.dedicated = "900-901";
    auto r = HostRegistry::open(options(), {host("hc1", "test:///default", dir), odd});
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains("host hc2"));
  }
  CHECK(HostRegistry::open(options(), {}).status().code() == ErrorCode::kInvalidArgument);
}

// A host that can be taken down and brought back: libvirt's test:///default behind a gate
// that refuses the connection as a stopped libvirtd does.
struct Gate {
  std::atomic<bool> down{false};
  void install(HostRegistryOptions& o, const std::string& host_uri) {
    o.open_connection = [this, host_uri](std::string_view uri) -> Result<Connection> {
      if (down && uri == host_uri) {
        return Status(ErrorCode::kUnavailable,
                      "unable to connect to server at 'hc2.lab:16514': Connection refused");
      }
      return Connection::open(uri);
    };
  }
};
// test:///default under another name: the gate tells it from hc1.
const std::string kHc2 = "test:///default?name=hc2";

TEST_CASE(
    "host registry: a host seen before but down at start is driven as unreachable until "
    "it answers",
    "[fleet][registry]") {
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  Dir dir("late");
  Gate gate;
  std::map<std::string, std::string> remembered;
  HostRegistryOptions o = options();
  gate.install(o, kHc2);
  o.remember = [&remembered](const std::string& name, const std::string& caps) {
    remembered[name] = caps;  // open() and reconnect_once() run on this thread here
  };

  // A first run sees hc2 and remembers its capabilities.
  {
    auto first =
        HostRegistry::open(o, {host("hc1", "test:///default", dir), host("hc2", kHc2, dir)});
    INFO(first.status().to_string());
    REQUIRE(first.is_ok());
    CHECK((*first)->waiting().empty());
  }
  REQUIRE(remembered.count("hc2") == 1);
  CHECK_THAT(remembered.at("hc2"), Catch::Contains("<capabilities>"));

  // The next start finds hc2 down: it is driven all the same, with the topology it had.
  gate.down = true;
  o.remembered_capabilities = remembered;
  auto r = HostRegistry::open(o, {host("hc1", "test:///default", dir), host("hc2", kHc2, dir)});
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  std::shared_ptr<HostRegistry::Host> away = (*r)->host("hc2");
  REQUIRE(away != nullptr);
  CHECK_FALSE(away->connected());
  CHECK_FALSE(away->not_connected.empty());
  CHECK(away->topology.cpus.size() == 16);  // from the remembered capabilities
  auto hosts = (*r)->engine_hosts();
  REQUIRE(hosts.is_ok());
  REQUIRE(hosts->size() == 2);
  EngineHost& hc2 = (*hosts)[1];
  CHECK(hc2.name == "hc2");
  CHECK(hc2.cores.topology().cpus.size() == 16);
  CHECK_THAT(away->not_connected, Catch::Contains("Connection refused"));
  auto listed = hc2.hypervisor->list_vms();
  CHECK(listed.status().code() == ErrorCode::kUnavailable);
  CHECK_THAT(listed.status().message(), Catch::Contains("host hc2 is not connected"));
  CHECK(hc2.images("tiny").status().code() == ErrorCode::kUnavailable);
  CHECK((*r)->reconnect_once().empty());

  // It answers: the same hypervisor the engine holds now reaches it.
  gate.down = false;
  remembered.clear();
  CHECK((*r)->reconnect_once() == std::vector<std::string>{"hc2"});
  std::shared_ptr<HostRegistry::Host> back = (*r)->host("hc2");
  REQUIRE(back != nullptr);
  CHECK(back->connected());
  CHECK(remembered.count("hc2") == 1);  // remembered again, as it is now
  auto now = hc2.hypervisor->list_vms();
  INFO(now.status().to_string());
  CHECK(now.is_ok());
  CHECK(hc2.images("tiny").status().code() == ErrorCode::kNotFound);  // the catalogue's answer
  CHECK((*r)->reconnect_once().empty());                              // nothing left to connect
}

TEST_CASE("host registry: a host never seen joins the engine once it answers",
          "[fleet][registry]") {
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  Dir dir("new");
  Gate gate;
  gate.down = true;
  HostRegistryOptions o = options();
  gate.install(o, kHc2);
  o.reconnect_period = 1h;  // the registry's own rounds sleep; the test runs them
  auto r = HostRegistry::open(o, {host("hc1", "test:///default", dir), host("hc3", kHc2, dir)});
  REQUIRE(r.is_ok());
  CHECK((*r)->waiting().count("hc3") == 1);
  CHECK((*r)->add(host("hc3", "test:///default", dir)).status().code() == ErrorCode::kConflict);

  std::vector<EngineHost> driven;
  (*r)->start_reconnecting([&driven](EngineHost h) {
    driven.push_back(std::move(h));
    return Status::ok();
  });
  CHECK((*r)->reconnect_once().empty());
  CHECK(driven.empty());
  gate.down = false;
  CHECK((*r)->reconnect_once() == std::vector<std::string>{"hc3"});
  REQUIRE(driven.size() == 1);
  CHECK(driven[0].name == "hc3");
  CHECK(driven[0].hypervisor->list_vms().is_ok());
  CHECK((*r)->waiting().empty());
  REQUIRE((*r)->host("hc3") != nullptr);
  CHECK((*r)->host("hc3")->connected());
}

}  // namespace
}  // namespace armhive
