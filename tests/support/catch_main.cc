#define CATCH_CONFIG_RUNNER
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <csignal>

namespace {
void on_sigpipe(int) {}
}  // namespace

int main(int argc, char* argv[]) {
  // A server that answers and closes before a test's client has written everything (a 413
  // before the body) must fail that write with EPIPE, not kill the test binary: cpp-httplib's
  // compiled send() passes no MSG_NOSIGNAL. A handler rather than SIG_IGN: dispositions set to
  // a handler reset to the default across exec, so the tools the tests start see a normal
  // SIGPIPE.
  struct sigaction sa {};
  sa.sa_handler = on_sigpipe;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPIPE, &sa, nullptr);
  // spdlog's registry is a function-local static inside Debian's libspdlog, which is not built
  // with TSan: two engine threads logging first at once race on its guard as far as TSan can
  // see. Made here, before any test starts a thread (armhived's main sets up logging first too).
  spdlog::default_logger_raw();
  return Catch::Session().run(argc, argv);
}
