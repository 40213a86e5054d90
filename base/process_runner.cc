#include "base/process_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

extern char** environ;

namespace armhive {
namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The four pipes of one run; whatever was opened is closed again unless release()d.
struct Pipes {
  int fds[4][2] = {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}};
  ~Pipes() {
    for (auto& p : fds) {
      close_fd(p[0]);
      close_fd(p[1]);
    }
  }
};

// The child's environment: the inherited one with request.env added or replacing, built
// before fork() because the child of a multi-threaded process may only call
// async-signal-safe functions (setenv allocates and may deadlock on a lock another thread held).
std::vector<std::string> child_environment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::string_view key = entry.substr(0, entry.find('='));
    if (!extra.count(std::string(key))) env.emplace_back(entry);
  }
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  return env;
}

// In the child, between fork() and exec: no descriptor of armhived's above 2 may reach the tool
// (the API's and the forwards' listening sockets, client connections, the database), whatever
// flags it was opened with: another thread may have opened one without O_CLOEXEC, or between
// its socket() and fcntl(). Every one but `keep` (the exec-error pipe, itself close-on-exec) is
// closed; where close_range(2) is missing (Linux < 5.9), each one listed in /proc/self/fd is
// marked close-on-exec instead (getdents64 on a stack buffer: async-signal-safe, unlike
// opendir's malloc), and failing that every number up to RLIMIT_NOFILE is.
void close_inherited_fds(int keep) {
#ifdef SYS_close_range
  if (keep < 3) {
    if (::syscall(SYS_close_range, 3U, ~0U, 0U) == 0) return;
  } else {
    const auto k = static_cast<unsigned>(keep);
    if ((k == 3 || ::syscall(SYS_close_range, 3U, k - 1, 0U) == 0) &&
        ::syscall(SYS_close_range, k + 1, ~0U, 0U) == 0) {
      return;
    }
  }
#endif
  int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    alignas(8) char buf[4096];
    while (true) {
      long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        const auto* d = reinterpret_cast<const struct dirent64*>(buf + off);
        off += d->d_reclen;
        int fd = 0;
        const char* p = d->d_name;
        if (*p < '0' || *p > '9') continue;
        for (; *p >= '0' && *p <= '9'; ++p) fd = fd * 10 + (*p - '0');
        if (fd > 2 && fd != dir) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      }
    }
    ::close(dir);
    return;
  }
  rlimit rl{};
  const int max = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                      ? static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 1 << 20))
                      : 1 << 16;
  for (int fd = 3; fd < max; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

}  // namespace

Result<ProcessResult> SubprocessRunner::run(const ProcessRequest& request) {
  if (request.argv.empty()) return invalid_argument("argv", "empty command");
  for (const auto& [k, v] : request.env) {
    if (k.empty() || k.find('=') != std::string::npos) {
      return invalid_argument("env", "variable name '" + k + "' is empty or contains '='");
    }
  }
  Pipes pipes;
  for (auto& p : pipes.fds) {
    if (::pipe2(p, O_CLOEXEC) != 0) {
      return internal_error(std::string("pipe: ") + std::strerror(errno), request.argv[0]);
    }
  }
  auto& in_pipe = pipes.fds[0];
  auto& out_pipe = pipes.fds[1];
  auto& err_pipe = pipes.fds[2];
  auto& exec_pipe = pipes.fds[3];
  std::vector<char*> argv;
  for (const std::string& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = child_environment(request.env);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid < 0) return internal_error(std::string("fork: ") + std::strerror(errno), request.argv[0]);
  if (pid == 0) {
    ::setpgid(0, 0);
    // armhived ignores SIGPIPE (a client that goes away is an error, not a death), and an
    // ignored signal stays ignored across exec: the tools it runs get the default back, so
    // `... | head` in a helper script ends as it would anywhere (signal() is async-signal-safe).
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    close_inherited_fds(exec_pipe[1]);
    if (!request.cwd.empty() && ::chdir(request.cwd.c_str()) != 0) {
      int e = errno;
      (void)!::write(exec_pipe[1], &e, sizeof e);
      ::_exit(127);
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    int e = errno;
    (void)!::write(exec_pipe[1], &e, sizeof e);
    ::_exit(127);
  }
  close_fd(in_pipe[0]);
  close_fd(out_pipe[1]);
  close_fd(err_pipe[1]);
  close_fd(exec_pipe[1]);

  int exec_errno = 0;
  ssize_t n = ::read(exec_pipe[0], &exec_errno, sizeof exec_errno);
  close_fd(exec_pipe[0]);
  if (n == sizeof exec_errno) {
    ::waitpid(pid, nullptr, 0);
    ErrorCode code = exec_errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInternal;
    return Status(code, std::string("cannot run: ") + std::strerror(exec_errno), request.argv[0]);
  }

  ProcessResult result;
  int in_fd = std::exchange(in_pipe[1], -1);
  int out_fd = std::exchange(out_pipe[0], -1);
  int err_fd = std::exchange(err_pipe[0], -1);
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
