#include "images/builder/deb_cache.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

namespace armhive {
namespace {

namespace fs = std::filesystem;

// Plays apt-get download: writes NAME_VERSION_ARCH.deb into the working directory.
class FakeApt final : public ProcessRunner {
 public:
  Result<ProcessResult> run(const ProcessRequest& request) override {
    requests.push_back(request);
    ProcessResult r;
    if (offline) {
      r.exit_code = 100;
      r.err = "E: Failed to fetch http://deb.debian.org/... Temporary failure resolving";
      return r;
    }
    std::ofstream(fs::path(request.cwd) / file_name, std::ios::binary) << "!<arch>\ndebian-binary";
    r.exit_code = 0;
    return r;
  }
  std::vector<ProcessRequest> requests;
  std::string file_name;
  bool offline = false;
};

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/armhive-debs-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

TEST_CASE("the deb cache downloads once per name, version and architecture", "[images]") {
  TempDir dir;
  FakeApt apt;
  apt.file_name = "qemu-guest-agent_1%3a7.2+dfsg-7_arm64.deb";
  DebCache cache(dir.path, apt);
  PackageInfo p{.name = "qemu-guest-agent", .version = "1:7.2+dfsg-7", .arch = "arm64"};
  CHECK(cache.path_for(p) == dir.path + "/" + apt.file_name);

  bool downloaded = false;
  auto first = cache.fetch(p, &downloaded);
  REQUIRE(first.is_ok());
  CHECK(downloaded);
  CHECK(*first == cache.path_for(p));
  CHECK(fs::exists(*first));
  REQUIRE(apt.requests.size() == 1);
  const auto& argv = apt.requests[0].argv;
  REQUIRE(argv.size() >= 3);
  CHECK(argv[0] == "apt-get");
  CHECK(argv[1] == "download");
  CHECK(argv.back() == "qemu-guest-agent:arm64=1:7.2+dfsg-7");
  // Downloads land in a private partial directory, which is gone afterwards.
  CHECK(apt.requests[0].cwd.find("/.partial-") != std::string::npos);
  CHECK_FALSE(fs::exists(apt.requests[0].cwd));

  // Second build, offline: served from the cache without running apt.
  apt.offline = true;
  auto second = cache.fetch(p, &downloaded);
  REQUIRE(second.is_ok());
  CHECK_FALSE(downloaded);
  CHECK(apt.requests.size() == 1);

  // A new version is a different file and needs the network.
  PackageInfo newer = p;
  newer.version = "1:7.2+dfsg-8";
  auto miss = cache.fetch(newer);
  REQUIRE_FALSE(miss.is_ok());
  CHECK(miss.status().code() == ErrorCode::kUnavailable);
  CHECK(miss.status().message().find("qemu-guest-agent:arm64=1:7.2+dfsg-8") != std::string::npos);
  CHECK_FALSE(fs::exists(cache.path_for(newer)));
}

}  // namespace
}  // namespace armhive
