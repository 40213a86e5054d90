// Issue 33 (finding 10): the API's sockets are close-on-exec, so no program armhived runs
// inherits them (ProcessRunner also closes everything above 2 in its children:
// tests/base/process_runner_test.cc).
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

// The descriptors of this process that are TCP sockets bound to `port` on our side.
std::vector<int> sockets_on_port(int port) {
  std::vector<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = std::stoi(e.path().filename().string());
    sockaddr_in a{};
    socklen_t len = sizeof a;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) continue;
    if (a.sin_family == AF_INET && ntohs(a.sin_port) == port) out.push_back(fd);
  }
  return out;
}

TEST_CASE("http: the listening socket and accepted connections are close-on-exec",
          "[http][hostile]") {
  ApiFixture f;
  httplib::Client cli(f.url());
  cli.set_keep_alive(true);  // the accepted connection stays while we look
  REQUIRE(cli.Get("/healthz"));
  std::vector<int> fds = sockets_on_port(f.server->port());
  // The listener and the server's end of the kept-alive connection (the client's end has
  // another local port).
  REQUIRE(fds.size() >= 2);
  for (int fd : fds) {
    INFO("fd " << fd);
    CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  }
}

}  // namespace
}  // namespace armhive
