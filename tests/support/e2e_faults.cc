#include "tests/support/e2e_faults.h"

#include <signal.h>
#include <sys/mount.h>

#include <chrono>
#include <fstream>

#include "base/process_runner.h"

namespace armhive {
namespace {

pid_t libvirtd_pid() {
  std::ifstream in("/run/libvirtd.pid");
  pid_t pid = -1;
  in >> pid;
  return pid;
}

}  // namespace

StoppedLibvirtd::StoppedLibvirtd() : pid_(libvirtd_pid()) {
  if (pid_ > 0 && ::kill(pid_, SIGSTOP) != 0) pid_ = -1;
}

void StoppedLibvirtd::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
  pid_ = -1;
}

ReadOnlyDir::ReadOnlyDir(std::string dir) : dir_(std::move(dir)) {
  mounted_ = ::mount(dir_.c_str(), dir_.c_str(), nullptr, MS_BIND, nullptr) == 0;
  if (mounted_ &&
      ::mount(nullptr, dir_.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
    remove();
  }
}

void ReadOnlyDir::remove() {
  if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  mounted_ = false;
}

bool run_in_libvirtd_mounts(std::vector<std::string> argv) {
  pid_t pid = libvirtd_pid();
  if (pid <= 0) return false;
  argv.insert(argv.begin(), {"nsenter", "-t", std::to_string(pid), "-m", "--"});
  SubprocessRunner run;
  auto r = run.run({.argv = argv, .timeout = std::chrono::seconds(30)});
  return r.is_ok() && r->ok();
}

}  // namespace armhive
