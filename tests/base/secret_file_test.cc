#include "base/secret_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

namespace armhive {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("armhive-secret-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

TEST_CASE("secret files are created 0600 whatever the umask, never over a file",
          "[base][secrets]") {
  TempDir d;
  mode_t old = ::umask(0);
  Status s = write_secret_file((d.path / "token").string(), "ah_secret\n");
  ::umask(old);
  REQUIRE(s.is_ok());
  CHECK(mode_of(d.path / "token") == 0600);
  std::ifstream in(d.path / "token");
  std::string line;
  std::getline(in, line);
  CHECK(line == "ah_secret");
  CHECK(check_secret_file((d.path / "token").string(), "the token file").is_ok());
  // Never replaces (or follows a symlink to) an existing file.
  CHECK(write_secret_file((d.path / "token").string(), "other").code() == ErrorCode::kConflict);
  fs::create_symlink(d.path / "elsewhere", d.path / "link");
  CHECK_FALSE(write_secret_file((d.path / "link").string(), "x").is_ok());
  CHECK_FALSE(fs::exists(d.path / "elsewhere"));
}

TEST_CASE("a group- or world-accessible secret file is refused with the fix", "[base][secrets]") {
  TempDir d;
  fs::path key = d.path / "key.pem";
  { std::ofstream(key) << "-----BEGIN PRIVATE KEY-----\n"; }
  for (unsigned mode : {0644u, 0640u, 0604u, 0660u, 0606u}) {
    INFO(mode);
    ::chmod(key.c_str(), mode);
    Status s = check_secret_file(key.string(), "the TLS key");
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.code() == ErrorCode::kPermissionDenied);
    CHECK_THAT(s.message(), Catch::Contains("the TLS key " + key.string()));
    CHECK_THAT(s.message(), Catch::Contains("chmod 600 " + key.string()));
  }
  ::chmod(key.c_str(), 0400);
  CHECK(check_secret_file(key.string(), "the TLS key").is_ok());
  ::chmod(key.c_str(), 0600);
  fs::create_symlink(key, d.path / "via-link");
  CHECK(check_secret_file((d.path / "via-link").string(), "the TLS key").is_ok());
  CHECK(check_secret_file(d.path.string(), "the TLS key").code() == ErrorCode::kPermissionDenied);
  CHECK(check_secret_file((d.path / "missing").string(), "the TLS key").code() ==
        ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace armhive
