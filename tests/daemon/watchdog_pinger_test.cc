#include "daemon/watchdog_pinger.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <thread>

namespace armhive {
namespace {

namespace fs = std::filesystem;

// systemd's end of the notification socket.
struct NotifySocket {
  fs::path dir = fs::temp_directory_path() / ("armhive-watchdog-" + std::to_string(::getpid()));
  std::string path = (dir / "notify").string();
  int fd = -1;
  NotifySocket() {
    fs::create_directories(dir);
    fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~NotifySocket() {
    ::close(fd);
    fs::remove_all(dir);
  }
  // The next datagram, or "" when none came within 30 s.
  std::string next() const {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 30000) != 1) return "";
    char buf[256];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
  }
  bool empty() const {
    char c;
    return ::recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) < 0;
  }
};

TEST_CASE("the watchdog is pinged while the daemon answers", "[daemon][watchdog]") {
  NotifySocket systemd;
  ServiceNotifier notifier(systemd.path, std::chrono::milliseconds(40));
  std::atomic<int> probes{0};
  std::atomic<int64_t> deadline_ms{0};  // Catch2 asserts on this thread only
  {
    WatchdogPinger pinger(notifier, [&](std::chrono::milliseconds deadline) {
      deadline_ms = deadline.count();
      ++probes;
      return Status::ok();
    });
    CHECK(systemd.next() == "WATCHDOG=1");
    CHECK(systemd.next() == "WATCHDOG=1");
  }
  CHECK(probes >= 2);
  CHECK(deadline_ms == 10);  // a quarter of the interval
}

TEST_CASE("a daemon that does not answer is not pinged", "[daemon][watchdog]") {
  NotifySocket systemd;
  ServiceNotifier notifier(systemd.path, std::chrono::milliseconds(20));
  std::atomic<int> probes{0};
  {
    WatchdogPinger pinger(notifier, [&](std::chrono::milliseconds) {
      ++probes;
      return unavailable("the lease engine's event loop did not run a task", "engine");
    });
    while (probes < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(systemd.empty());
}

TEST_CASE("without a watchdog interval nothing is probed", "[daemon][watchdog]") {
  NotifySocket systemd;
  ServiceNotifier notifier(systemd.path, std::chrono::microseconds(0));
  bool probed = false;
  {
    WatchdogPinger pinger(notifier, [&](std::chrono::milliseconds) {
      probed = true;
      return Status::ok();
    });
  }
  CHECK_FALSE(probed);
  CHECK(systemd.empty());
}

}  // namespace
}  // namespace armhive
