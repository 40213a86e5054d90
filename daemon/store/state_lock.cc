#include "daemon/store/state_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace armhive {

Result<std::unique_ptr<StateLock>> StateLock::acquire(const std::string& state_dir) {
  const std::string path = state_dir + "/armhived.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return unavailable(std::string("cannot open: ") + std::strerror(errno), path);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char buf[32] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK) {
      return unavailable(std::string("cannot lock: ") + std::strerror(err), path);
    }
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    return conflict("another armhived serves from " + state_dir +
                        (pid.empty() ? "" : " (pid " + pid + ")") +
                        ": stop it first; two on one state directory would drive the same VMs",
                    path);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  // Unchecked: the lock holds all the same; the pid only makes the message above friendlier.
  if (::ftruncate(fd, 0) == 0) (void)::pwrite(fd, pid.data(), pid.size(), 0);
  return std::unique_ptr<StateLock>(new StateLock(fd));
}

StateLock::~StateLock() noexcept {
  (void)::ftruncate(fd_, 0);
  ::close(fd_);  // releases the flock
}

}  // namespace armhive
