#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/result.h"

namespace armhive {

// Tells the service manager what the process is doing: systemd's notification protocol (one
// datagram of "KEY=value" lines to the AF_UNIX socket named by $NOTIFY_SOCKET; a leading '@' is
// the abstract namespace), written here rather than linked from libsystemd because the
// protocol is four lines of socket code and the daemon should not need libsystemd to run.
// Without $NOTIFY_SOCKET every call does nothing, so the same binary runs under systemd, by
// hand, and in tests.
//
// Thread-safety: const methods may be called from any thread (each sends one datagram).
class ServiceNotifier {
 public:
  ServiceNotifier() = default;  // notifies nobody
  ServiceNotifier(std::string socket_path, std::chrono::microseconds watchdog_interval)
      : socket_path_(std::move(socket_path)), watchdog_interval_(watchdog_interval) {}

  // From $NOTIFY_SOCKET and $WATCHDOG_USEC (honoured only when $WATCHDOG_PID is unset or this
  // process), which it then removes from the environment so that the tools armhived runs do not
  // inherit them. Call before any thread starts: it changes the environment.
  static ServiceNotifier from_environment();

  bool enabled() const { return !socket_path_.empty(); }
  // 0 when the manager set no watchdog; otherwise send watchdog() at least this often (systemd
  // kills the service when a whole interval passes without one).
  std::chrono::microseconds watchdog_interval() const { return watchdog_interval_; }

  // READY=1 with a STATUS= line: the service serves.
  [[nodiscard]] Status ready(std::string_view status) const;
  // STATUS=<line>: what it is doing now (shown by `systemctl status`).
  [[nodiscard]] Status status(std::string_view line) const;
  [[nodiscard]] Status watchdog() const;
  [[nodiscard]] Status stopping(std::string_view status) const;
  // RELOADING=1 and, once the new configuration is in force (or refused), READY=1.
  [[nodiscard]] Status reloading(std::string_view status) const;

  // One datagram of "KEY=value" lines. Newlines inside a value would start a new key: they
  // are replaced by spaces.
  [[nodiscard]] Status send(std::string_view message) const;

 private:
  std::string socket_path_;
  std::chrono::microseconds watchdog_interval_{0};
};

}  // namespace armhive
