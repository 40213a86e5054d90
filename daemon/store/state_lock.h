#pragma once

#include <memory>
#include <string>

#include "base/result.h"

namespace armhive {

// An exclusive lock on a state directory (flock on <state_dir>/armhived.lock, which holds the
// holder's pid), held for as long as armhived serves from it: a second armhived on the same
// state would adopt the first one's VMs as its own, and `armhived restore` must not replace a
// database in use. The kernel drops the lock when the process dies, however it dies.
//
// Threading: not shared; the destructor releases the lock.
class StateLock {
 public:
  // kConflict naming the directory and the pid holding it when another process has it.
  [[nodiscard]] static Result<std::unique_ptr<StateLock>> acquire(const std::string& state_dir);
  ~StateLock() noexcept;
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

 private:
  explicit StateLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace armhive
