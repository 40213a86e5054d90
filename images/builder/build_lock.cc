#include "images/builder/build_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace armhive {

Result<BuildLock> BuildLock::acquire(const std::filesystem::path& dir,
                                     const std::function<void(std::string_view)>& waiting) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return unavailable("cannot create " + dir.string() + ": " + ec.message());
  const std::filesystem::path path = dir / ".build.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return unavailable(std::string("cannot open the build lock: ") + std::strerror(errno),
                       path.string());
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      const int err = errno;
      ::close(fd);
      return unavailable(std::string("cannot lock: ") + std::strerror(err), path.string());
    }
    if (waiting) waiting("waiting for another build holding " + path.string());
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return unavailable(std::string("cannot lock: ") + std::strerror(err), path.string());
    }
  }
  return BuildLock(fd);
}

BuildLock::~BuildLock() noexcept {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace armhive
