#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace armhive {

// Faults of a real host for the e2e tests, each undone by its guard's destructor whatever the
// test's outcome: the sandbox's libvirtd and mounts are shared by the later e2e stages.

// The sandbox's libvirtd (/run/libvirtd.pid), stopped with SIGSTOP for the life of this guard
// and continued by resume() or the destructor.
class StoppedLibvirtd {
 public:
  StoppedLibvirtd();
  ~StoppedLibvirtd() { resume(); }
  StoppedLibvirtd(const StoppedLibvirtd&) = delete;
  StoppedLibvirtd& operator=(const StoppedLibvirtd&) = delete;
  bool stopped() const { return pid_ > 0; }
  void resume();

 private:
  pid_t pid_ = -1;
};

// `dir` made read-only by a bind mount for the life of this guard, in this process's mount
// namespace (which the armhived it starts shares): removing the files in it fails as a full or
// failing disk would.
class ReadOnlyDir {
 public:
  explicit ReadOnlyDir(std::string dir);
  ~ReadOnlyDir() { remove(); }
  ReadOnlyDir(const ReadOnlyDir&) = delete;
  ReadOnlyDir& operator=(const ReadOnlyDir&) = delete;
  bool active() const { return mounted_; }
  void remove();

 private:
  std::string dir_;
  bool mounted_ = false;
};

// Runs `argv` inside the sandbox libvirtd's mount namespace, where its storage pools and QEMU
// see the files (an e2e test has a mount namespace of its own, from `ip netns exec`); true if it
// ran and exited 0.
bool run_in_libvirtd_mounts(std::vector<std::string> argv);

}  // namespace armhive
