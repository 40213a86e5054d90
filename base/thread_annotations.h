#pragma once

#include <mutex>

// Clang thread-safety annotations (checked by -Wthread-safety in clang builds, e.g. the tsan
// preset; no-ops elsewhere) and a Mutex the analysis understands (libstdc++'s std::mutex is not
// annotated). See https://clang.llvm.org/docs/ThreadSafetyAnalysis.html.

#if defined(__clang__)
#define ARMHIVE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define ARMHIVE_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) ARMHIVE_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY ARMHIVE_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) ARMHIVE_THREAD_ANNOTATION(guarded_by(x))
#define REQUIRES(...) ARMHIVE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) ARMHIVE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) ARMHIVE_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRE(...) ARMHIVE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) ARMHIVE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) ARMHIVE_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS ARMHIVE_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace armhive {

// std::mutex with capability annotations. Lockable, so std::condition_variable_any waits on a
// MutexLock.
class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope; unlock()/lock() release and retake it early (a condition
// variable does so while waiting).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() {
    if (locked_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  void lock() ACQUIRE() {
    mu_.lock();
    locked_ = true;
  }
  void unlock() RELEASE() {
    locked_ = false;
    mu_.unlock();
  }

 private:
  Mutex& mu_;
  bool locked_ = true;
};

}  // namespace armhive
