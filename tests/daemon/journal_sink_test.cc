#include "daemon/journal_sink.h"

#include <poll.h>
#include <spdlog/logger.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <map>

namespace armhive {
namespace {

namespace fs = std::filesystem;

// The fields of one native-protocol datagram (both encodings).
std::map<std::string, std::string> fields(const std::string& d) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  while (i < d.size()) {
    size_t nl = d.find('\n', i);
    std::string line = d.substr(i, nl - i);
    size_t eq = line.find('=');
    if (eq != std::string::npos) {
      out[line.substr(0, eq)] = line.substr(eq + 1);
      i = nl + 1;
      continue;
    }
    uint64_t n = 0;
    for (int b = 0; b < 8; ++b) {
      n |= static_cast<uint64_t>(static_cast<unsigned char>(d[nl + 1 + b])) << (8 * b);
    }
    out[line] = d.substr(nl + 9, n);
    i = nl + 9 + n + 1;
  }
  return out;
}

TEST_CASE("journal lines carry the lease, pool and host they name", "[daemon][journal]") {
  auto f = fields(JournalSink::encode(spdlog::level::info,
                                      "lease l-3f2a9c0d1e2b: ready on host hc1 (pool ci)"));
  CHECK(f["MESSAGE"] == "lease l-3f2a9c0d1e2b: ready on host hc1 (pool ci)");
  CHECK(f["PRIORITY"] == "6");
  CHECK(f["SYSLOG_IDENTIFIER"] == "armhived");
  CHECK(f["LEASE_ID"] == "l-3f2a9c0d1e2b");
  CHECK(f["HOST"] == "hc1");
  CHECK(f["POOL"] == "ci");

  auto prose = fields(JournalSink::encode(spdlog::level::err, "host name 'X' is used as 'x'"));
  CHECK(prose["PRIORITY"] == "3");
  CHECK(prose.count("HOST") == 0);
  CHECK(prose.count("LEASE_ID") == 0);

  // A line with newlines (a guest's output, a forged line) stays one entry, whole.
  auto multi = fields(JournalSink::encode(spdlog::level::warn, "pool ci: a\nPRIORITY=0\nb"));
  CHECK(multi["MESSAGE"] == "pool ci: a\nPRIORITY=0\nb");
  CHECK(multi["PRIORITY"] == "4");
  CHECK(multi["POOL"] == "ci");
}

TEST_CASE("the sink writes one datagram per line to the journal socket", "[daemon][journal]") {
  fs::path dir = fs::temp_directory_path() / ("armhive-journal-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "socket").string();
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  spdlog::logger logger("journal-test", std::make_shared<JournalSink>(path));
  logger.warn("pool {}: reloaded ({})", "ci", "min_warm");
  pollfd p{fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 10000) == 1);
  char buf[4096];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  REQUIRE(n > 0);
  auto f = fields(std::string(buf, static_cast<size_t>(n)));
  CHECK(f["MESSAGE"] == "pool ci: reloaded (min_warm)");
  CHECK(f["POOL"] == "ci");
  CHECK(f["PRIORITY"] == "4");
  ::close(fd);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace armhive
