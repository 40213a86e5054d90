#include "base/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace armhive {

Status check_secret_file(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return unavailable(
        "cannot stat " + std::string(what) + " " + path + ": " + std::strerror(errno), path);
  }
  if (S_ISLNK(st.st_mode)) {
    // The target decides: stat it (a symlink's own mode is always 0777).
    if (::stat(path.c_str(), &st) != 0) {
      return unavailable(
          "cannot stat " + std::string(what) + " " + path + ": " + std::strerror(errno), path);
    }
  }
  if (!S_ISREG(st.st_mode)) {
    return Status(ErrorCode::kPermissionDenied,
                  std::string(what) + " " + path + " is not a regular file", path);
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status(ErrorCode::kPermissionDenied,
                  std::string(what) + " " + path + " is accessible by group or others (mode " +
                      mode + "); it holds a secret: run `chmod 600 " + path +
                      "` (and check who has read it)",
                  path);
  }
  return Status::ok();
}

Status write_secret_file(const std::string& path, std::string_view content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return conflict(path + " exists already", path);
    return unavailable("cannot create " + path + ": " + std::strerror(errno), path);
  }
  // The umask can only narrow 0600; fchmod makes the mode exact whatever it is.
  bool ok = ::fchmod(fd, 0600) == 0;
  size_t done = 0;
  while (ok && done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    done += static_cast<size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  int saved = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    return unavailable("cannot write " + path + ": " + std::strerror(saved), path);
  }
  return Status::ok();
}

}  // namespace armhive
