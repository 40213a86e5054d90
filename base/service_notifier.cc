#include "base/service_notifier.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace armhive {
namespace {

std::string one_line(std::string_view value) {
  std::string out(value);
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

}  // namespace

ServiceNotifier ServiceNotifier::from_environment() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  const char* usec = std::getenv("WATCHDOG_USEC");
  const char* pid = std::getenv("WATCHDOG_PID");
  std::string path = socket == nullptr ? "" : socket;
  std::chrono::microseconds interval{0};
  bool ours = pid == nullptr || std::strtoll(pid, nullptr, 10) == static_cast<long long>(getpid());
  if (usec != nullptr && ours) {
    char* end = nullptr;
    long long v = std::strtoll(usec, &end, 10);
    if (end != usec && *end == '\0' && v > 0) interval = std::chrono::microseconds(v);
  }
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("WATCHDOG_PID");
  return ServiceNotifier(std::move(path), interval);
}

Status ServiceNotifier::send(std::string_view message) const {
  if (socket_path_.empty()) return Status::ok();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path_.size() >= sizeof addr.sun_path || socket_path_.size() < 2 ||
      (socket_path_[0] != '/' && socket_path_[0] != '@')) {
    return invalid_argument("NOTIFY_SOCKET", "not a socket path: " + socket_path_);
  }
  std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_path_.size());
  if (socket_path_[0] == '@') {
    addr.sun_path[0] = '\0';  // abstract: no trailing NUL counted
  } else {
    len += 1;
  }
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return unavailable(std::string("socket: ") + std::strerror(errno), "NOTIFY_SOCKET");
  ssize_t n = ::sendto(fd, message.data(), message.size(), MSG_NOSIGNAL,
                       reinterpret_cast<const sockaddr*>(&addr), len);
  int err = errno;
  ::close(fd);
  if (n < 0 || static_cast<size_t>(n) != message.size()) {
    return unavailable("cannot notify " + socket_path_ + ": " + std::strerror(err),
                       "NOTIFY_SOCKET");
  }
  return Status::ok();
}

Status ServiceNotifier::ready(std::string_view status) const {
  return send("READY=1\nSTATUS=" + one_line(status));
}

Status ServiceNotifier::status(std::string_view line) const {
  return send("STATUS=" + one_line(line));
}

Status ServiceNotifier::watchdog() const { return send("WATCHDOG=1"); }

Status ServiceNotifier::stopping(std::string_view status) const {
  return send("STOPPING=1\nSTATUS=" + one_line(status));
}

Status ServiceNotifier::reloading(std::string_view status) const {
  return send("RELOADING=1\nSTATUS=" + one_line(status));
}

}  // namespace armhive
