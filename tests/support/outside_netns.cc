#include "tests/support/outside_netns.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>

namespace armhive {

namespace {

ProcessResult must_run(std::vector<std::string> argv) {
  SubprocessRunner run;
  auto r = run.run({.argv = std::move(argv), .timeout = std::chrono::seconds(30)});
  REQUIRE(r.is_ok());
  return *r;
}

}  // namespace

OutsideNamespace::OutsideNamespace(std::string name, std::string guest_cidr)
    : name_(std::move(name)) {
  must_run({"ip", "netns", "delete", name_});  // stale from a killed run; fails when absent
  auto step = [](std::vector<std::string> argv) {
    ProcessResult r = must_run(argv);
    INFO(argv[0] << " " << argv[1] << ": " << r.err);
    REQUIRE(r.ok());
  };
  step({"ip", "netns", "add", name_});
  const std::string host_if = "ahout0";
  const std::string out_if = "ahout1";
  must_run({"ip", "link", "delete", host_if});
  step({"ip", "link", "add", host_if, "type", "veth", "peer", "name", out_if, "netns", name_});
  step({"ip", "addr", "add", std::string(kHostAddress) + "/24", "dev", host_if});
  step({"ip", "link", "set", host_if, "up"});
  step({"ip", "-n", name_, "addr", "add", std::string(kOutsideAddress) + "/24", "dev", out_if});
  step({"ip", "-n", name_, "link", "set", out_if, "up"});
  step({"ip", "-n", name_, "link", "set", "lo", "up"});
  if (!guest_cidr.empty()) {
    step({"ip", "-n", name_, "route", "add", guest_cidr, "via", kHostAddress});
  }
}

OutsideNamespace::~OutsideNamespace() {
  for (pid_t p : children_) {
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
  }
  // Deleting the namespace deletes its end of the veth pair, and with it the host's end.
  SubprocessRunner run;
  (void)run.run({.argv = {"ip", "netns", "delete", name_}});
}

ProcessResult OutsideNamespace::run(std::vector<std::string> argv,
                                    std::chrono::milliseconds timeout) const {
  argv.insert(argv.begin(), {"ip", "netns", "exec", name_});
  SubprocessRunner run;
  auto r = run.run({.argv = std::move(argv), .timeout = timeout});
  REQUIRE(r.is_ok());
  return *r;
}

pid_t OutsideNamespace::spawn(std::vector<std::string> argv, const std::string& log) {
  argv.insert(argv.begin(), {"ip", "netns", "exec", name_});
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null = ::open("/dev/null", O_RDONLY);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (null >= 0) ::dup2(null, 0);
    ::execvp(cargv[0], cargv.data());
    ::_exit(127);
  }
  children_.push_back(pid);
  return pid;
}

bool OutsideNamespace::exited(pid_t pid) {
  int status = 0;
  pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == pid) {
    children_.erase(std::remove(children_.begin(), children_.end(), pid), children_.end());
    return true;
  }
  return r < 0;
}

void OutsideNamespace::kill(pid_t pid) {
  if (std::find(children_.begin(), children_.end(), pid) == children_.end()) return;
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  children_.erase(std::remove(children_.begin(), children_.end(), pid), children_.end());
}

}  // namespace armhive
