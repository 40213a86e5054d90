#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <string>

namespace armhive {

// A unix socket in `dir` that accepts connections and never reads: to libvirt, a libvirtd that
// is stopped (SIGSTOP) or behind a cut link. Connections complete in the listen backlog; every
// call then waits for an answer that never comes.
class MuteLibvirt {
 public:
  explicit MuteLibvirt(const std::filesystem::path& dir) : path_(dir / "mute-libvirt.sock") {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    REQUIRE(path_.string().size() < sizeof(addr.sun_path));
    std::memcpy(addr.sun_path, path_.c_str(), path_.string().size());
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(::listen(fd_, 8) == 0);
  }
  ~MuteLibvirt() { ::close(fd_); }
  MuteLibvirt(const MuteLibvirt&) = delete;
  MuteLibvirt& operator=(const MuteLibvirt&) = delete;

  // The URI that reaches it.
  std::string uri() const { return "qemu+unix:///system?socket=" + path_.string(); }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace armhive
