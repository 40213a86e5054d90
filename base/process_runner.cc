#include "base/process_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace armhive {
namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

Result<ProcessResult> SubprocessRunner::run(const ProcessRequest& request) {
  if (request.argv.empty()) return invalid_argument("argv", "empty command");
  int in_pipe[2], out_pipe[2], err_pipe[2], exec_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0 ||
      ::pipe2(err_pipe, O_CLOEXEC) != 0 || ::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    return internal_error(std::string("pipe: ") + std::strerror(errno), request.argv[0]);
  }
  std::vector<char*> argv;
  for (const std::string& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid < 0) return internal_error(std::string("fork: ") + std::strerror(errno), request.argv[0]);
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    for (const auto& [k, v] : request.env) ::setenv(k.c_str(), v.c_str(), 1);
    if (!request.cwd.empty() && ::chdir(request.cwd.c_str()) != 0) {
      int e = errno;
      (void)!::write(exec_pipe[1], &e, sizeof e);
      ::_exit(127);
    }
    ::execvp(argv[0], argv.data());
    int e = errno;
    (void)!::write(exec_pipe[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(exec_pipe[1]);

  int exec_errno = 0;
  ssize_t n = ::read(exec_pipe[0], &exec_errno, sizeof exec_errno);
  ::close(exec_pipe[0]);
  if (n == sizeof exec_errno) {
    ::waitpid(pid, nullptr, 0);
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    ErrorCode code = exec_errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInternal;
    return Status(code, std::string("cannot run: ") + std::strerror(exec_errno), request.argv[0]);
  }

  ProcessResult result;
  int in_fd = in_pipe[1], out_fd = out_pipe[0], err_fd = err_pipe[0];
  ::fcntl(in_fd, F_SETFL, O_NONBLOCK);
  size_t in_off = 0;
  if (request.stdin_data.empty()) close_fd(in_fd);
  auto deadline = std::chrono::steady_clock::now() + request.timeout;
  char buf[65536];
  while (out_fd >= 0 || err_fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd fds[3];
    int nfds = 0;
    if (out_fd >= 0) fds[nfds++] = {out_fd, POLLIN, 0};
    if (err_fd >= 0) fds[nfds++] = {err_fd, POLLIN, 0};
    if (in_fd >= 0) fds[nfds++] = {in_fd, POLLOUT, 0};
    int r = ::poll(fds, nfds, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno != EINTR) break;
    for (int i = 0; i < nfds; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == in_fd) {
        ssize_t w =
            ::write(in_fd, request.stdin_data.data() + in_off, request.stdin_data.size() - in_off);
        if (w > 0) in_off += static_cast<size_t>(w);
        if (w < 0 || in_off >= request.stdin_data.size()) close_fd(in_fd);
        continue;
      }
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        (fds[i].fd == out_fd ? result.out : result.err).append(buf, static_cast<size_t>(got));
      } else if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
        if (fds[i].fd == out_fd)
          close_fd(out_fd);
        else
          close_fd(err_fd);
      }
    }
  }
  close_fd(in_fd);
  close_fd(out_fd);
  close_fd(err_fd);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(wstatus) && !result.timed_out) result.exit_code = WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) result.signal = WTERMSIG(wstatus);
  return result;
}

}  // namespace armhive
