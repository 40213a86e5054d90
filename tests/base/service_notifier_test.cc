#include "base/service_notifier.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace armhive {
namespace {

namespace fs = std::filesystem;

// A service manager's end: a datagram socket bound at a path (or an abstract name, '@...').
struct Manager {
  std::string name;
  fs::path dir;
  int fd = -1;
  explicit Manager(bool abstract) {
    dir = fs::temp_directory_path() / ("armhive-notify-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    name = abstract ? "@armhive-notify-test-" + std::to_string(::getpid())
                    : (dir / "notify.sock").string();
    fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, name.data(), name.size());
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    if (abstract) addr.sun_path[0] = '\0';
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0);
  }
  ~Manager() {
    ::close(fd);
    fs::remove_all(dir);
  }
  std::string receive() const {
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
  }
};

TEST_CASE("the notifier sends systemd's datagrams to a path socket", "[base][notify]") {
  Manager manager(false);
  ServiceNotifier notifier(manager.name, std::chrono::microseconds(0));
  REQUIRE(notifier.enabled());
  REQUIRE(notifier.status("recovering leases").is_ok());
  CHECK(manager.receive() == "STATUS=recovering leases");
  REQUIRE(notifier.ready("serving on http://127.0.0.1:8470").is_ok());
  CHECK(manager.receive() == "READY=1\nSTATUS=serving on http://127.0.0.1:8470");
  REQUIRE(notifier.watchdog().is_ok());
  CHECK(manager.receive() == "WATCHDOG=1");
  REQUIRE(notifier.reloading("reloading").is_ok());
  CHECK(manager.receive() == "RELOADING=1\nSTATUS=reloading");
  REQUIRE(notifier.stopping("stopping").is_ok());
  CHECK(manager.receive() == "STOPPING=1\nSTATUS=stopping");
}

TEST_CASE("a status line cannot add keys of its own", "[base][notify]") {
  Manager manager(false);
  ServiceNotifier notifier(manager.name, std::chrono::microseconds(0));
  REQUIRE(notifier.status("pool ci\nREADY=1").is_ok());
  CHECK(manager.receive() == "STATUS=pool ci READY=1");
}

TEST_CASE("the notifier reaches an abstract socket", "[base][notify]") {
  Manager manager(true);
  ServiceNotifier notifier(manager.name, std::chrono::microseconds(0));
  REQUIRE(notifier.ready("up").is_ok());
  CHECK(manager.receive() == "READY=1\nSTATUS=up");
}

TEST_CASE("without a manager the notifier does nothing, a gone manager is an error",
          "[base][notify]") {
  ServiceNotifier none;
  CHECK_FALSE(none.enabled());
  CHECK(none.ready("up").is_ok());
  ServiceNotifier gone("/nonexistent/armhive/notify.sock", std::chrono::microseconds(0));
  Status s = gone.ready("up");
  CHECK(s.code() == ErrorCode::kUnavailable);
  CHECK_THAT(s.message(), Catch::Contains("/nonexistent/armhive/notify.sock"));
  ServiceNotifier relative("notify.sock", std::chrono::microseconds(0));
  CHECK(relative.ready("up").code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("the environment gives the socket and the watchdog, then forgets them",
          "[base][notify]") {
  ::setenv("NOTIFY_SOCKET", "/run/armhive-test.sock", 1);
  ::setenv("WATCHDOG_USEC", "30000000", 1);
  ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
  ServiceNotifier n = ServiceNotifier::from_environment();
  CHECK(n.enabled());
  CHECK(n.watchdog_interval() == std::chrono::seconds(30));
  CHECK(std::getenv("NOTIFY_SOCKET") == nullptr);  // the tools armhived runs do not inherit it
  CHECK(std::getenv("WATCHDOG_USEC") == nullptr);

  // A watchdog meant for another process (a parent that exec'd us without clearing it).
  ::setenv("NOTIFY_SOCKET", "/run/armhive-test.sock", 1);
  ::setenv("WATCHDOG_USEC", "30000000", 1);
  ::setenv("WATCHDOG_PID", "1", 1);
  CHECK(ServiceNotifier::from_environment().watchdog_interval().count() == 0);
  ::setenv("WATCHDOG_USEC", "soon", 1);
  CHECK(ServiceNotifier::from_environment().watchdog_interval().count() == 0);
  CHECK_FALSE(ServiceNotifier::from_environment().enabled());
}

}  // namespace
}  // namespace armhive
