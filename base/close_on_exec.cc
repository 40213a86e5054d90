#include "base/close_on_exec.h"

#include <fcntl.h>

namespace armhive {

void set_close_on_exec(int fd) noexcept {
  if (fd < 0) return;
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0 && (flags & FD_CLOEXEC) == 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

}  // namespace armhive
