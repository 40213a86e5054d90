#pragma once

namespace armhive {

// Marks a descriptor close-on-exec (FD_CLOEXEC), for those opened by libraries that do not
// (Boost.Asio's socket() and accept() on Debian 12's Boost 1.74): a program armhived runs must
// not inherit the API's or the forwards' sockets. ProcessRunner also closes everything above 2
// in its children, which covers the window between opening a descriptor and this call. A
// negative fd is ignored. Any thread.
void set_close_on_exec(int fd) noexcept;

}  // namespace armhive
