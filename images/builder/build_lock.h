#pragma once

#include <filesystem>
#include <functional>
#include <string_view>

#include "base/result.h"

namespace armhive {

// An exclusive flock(2) on `<dir>/.build.lock`, held for the object's life: one image build per
// catalogue (and per layer store) at a time, across processes. A second `armhive-image build`
// of the same catalogue waits for the first and then finds its image up to date, which is how
// CI's e2e fixture joins a build that started beside the other tests. The kernel drops the
// lock if the process dies. Not copyable; any thread.
class BuildLock {
 public:
  // Blocks until the lock is held; `waiting` is called once if another process holds it.
  static Result<BuildLock> acquire(const std::filesystem::path& dir,
                                   const std::function<void(std::string_view)>& waiting);
  BuildLock(BuildLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  BuildLock& operator=(BuildLock&&) = delete;
  BuildLock(const BuildLock&) = delete;
  ~BuildLock() noexcept;

 private:
  explicit BuildLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace armhive
