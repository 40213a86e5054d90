#include "base/process_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

namespace armhive {
namespace {

TEST_CASE("process runner passes argv verbatim, stdin, and captures both streams", "[base]") {
  SubprocessRunner runner;
  auto r = runner.run({.argv = {"sh", "-c", "cat; echo \"$1\" >&2; exit 3", "sh", "a b;$(x)"},
                       .stdin_data = "hello"});
  REQUIRE(r.is_ok());
  CHECK(r->exit_code == 3);
  CHECK(r->out == "hello");
  CHECK(r->err == "a b;$(x)\n");
}

TEST_CASE("process runner: a parent that ignores SIGPIPE runs children that do not", "[base]") {
  // As armhived does: its tools must still end on a closed pipe.
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  REQUIRE(sigaction(SIGPIPE, &ignore, &old) == 0);
  SubprocessRunner run;
  auto r = run.run({.argv = {"/bin/sh", "-c", "grep '^SigIgn:' /proc/self/status"}});
  sigaction(SIGPIPE, &old, nullptr);
  REQUIRE(r.is_ok());
  REQUIRE(r->ok());
  // SigIgn is a hex mask of ignored signals; SIGPIPE (13) is bit 12.
  const std::string mask = r->out.substr(r->out.find(':') + 1);
  CHECK((std::stoull(mask, nullptr, 16) & (1ull << (SIGPIPE - 1))) == 0);
}

TEST_CASE("process runner reports a missing program and kills on timeout", "[base]") {
  SubprocessRunner runner;
  auto missing = runner.run({.argv = {"/nonexistent/armhive-tool"}});
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == ErrorCode::kNotFound);

  auto slow = runner.run({.argv = {"sleep", "30"}, .timeout = std::chrono::milliseconds(200)});
  REQUIRE(slow.is_ok());
  CHECK(slow->timed_out);
  CHECK_FALSE(slow->ok());
}

TEST_CASE("process runner gives the child its environment without touching the parent's",
          "[base]") {
  SubprocessRunner runner;
  ::setenv("ARMHIVE_TEST_INHERITED", "parent", 1);
  ::setenv("ARMHIVE_TEST_REPLACED", "parent", 1);
  auto r = runner.run({.argv = {"sh", "-c",
                                "echo \"$ARMHIVE_TEST_INHERITED $ARMHIVE_TEST_REPLACED "
                                "$ARMHIVE_TEST_ADDED\""},
                       .env = {{"ARMHIVE_TEST_REPLACED", "child"}, {"ARMHIVE_TEST_ADDED", "x y"}}});
  REQUIRE(r.is_ok());
  CHECK(r->out == "parent child x y\n");
  // The variables were given to the child only (no setenv in this process).
  CHECK(std::string(std::getenv("ARMHIVE_TEST_REPLACED")) == "parent");
  CHECK(std::getenv("ARMHIVE_TEST_ADDED") == nullptr);
  CHECK(runner.run({.argv = {"true"}, .env = {{"A=B", "1"}}}).status().field() == "env");
  ::unsetenv("ARMHIVE_TEST_INHERITED");
  ::unsetenv("ARMHIVE_TEST_REPLACED");
}

std::set<int> open_fds() {
  std::set<int> fds;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    fds.insert(std::stoi(e.path().filename().string()));
  }
  return fds;
}

TEST_CASE("process runner closes the pipes it made when a later pipe cannot be made", "[base]") {
  std::set<int> before = open_fds();
  // Leave exactly five free descriptors: two pipes fit, the third fails with EMFILE.
  int limit = 0;
  for (int free_fds = 0; free_fds < 5; ++limit) {
    if (!before.count(limit)) ++free_fds;
  }
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(limit);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  SubprocessRunner runner;
  auto r = runner.run({.argv = {"true"}});
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &old) == 0);
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Contains("pipe"));
  CHECK(open_fds() == before);
}

// Issue 33 (finding 10): a child used to inherit every descriptor armhived held without
// O_CLOEXEC (the API's and forwards' sockets among them: Boost.Asio opens them without it), so
// a helper tool, or whatever it left running, kept a listening port open or could accept on it.
TEST_CASE("process runner: the child sees only stdin, stdout and stderr", "[base][hostile]") {
  // Inheritable on purpose: a file, a listening-socket-like pair, a pipe.
  int file = ::open("/dev/null", O_RDONLY);
  int pair[2] = {-1, -1};
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
  int pipe_fds[2] = {-1, -1};
  REQUIRE(::pipe(pipe_fds) == 0);
  REQUIRE(file >= 0);
  REQUIRE((::fcntl(pair[0], F_GETFD) & FD_CLOEXEC) == 0);
  SubprocessRunner runner;
  // ls opens the directory itself: its own descriptor is the one above 2 it may see.
  auto r = runner.run({.argv = {"sh", "-c", "ls /proc/self/fd"}});
  for (int fd : {file, pair[0], pair[1], pipe_fds[0], pipe_fds[1]}) ::close(fd);
  REQUIRE(r.is_ok());
  REQUIRE(r->ok());
  std::set<int> seen;
  std::istringstream lines(r->out);
  for (std::string line; std::getline(lines, line);) seen.insert(std::stoi(line));
  INFO(r->out);
  // 0, 1, 2 and the directory ls reads (the lowest free number, 3), nothing of ours.
  CHECK(seen.count(0) == 1);
  CHECK(seen.count(1) == 1);
  CHECK(seen.count(2) == 1);
  CHECK(*seen.rbegin() <= 3);
}

}  // namespace
}  // namespace armhive
