#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "base/result.h"

namespace armhive {

// One thread that runs calls which can hang (a libvirt host's calls: a SIGSTOPped libvirtd or a
// cut network never answers), each waited for with a deadline, so a hung host never blocks its
// caller past the deadline nor delays the callers of other hosts (one worker per host).
//
// Ownership: the worker owns its thread and the state it shares with it. A call that misses its
// deadline keeps running on the thread; the worker is then "hung" until that call returns, and
// the destructor detaches the thread instead of waiting for it (the shared state lives until the
// thread ends). So `fn` must own everything it touches (capture by value or shared_ptr, never
// references to the caller's stack): after a timeout the caller has returned.
//
// Threading: call()/run()/hung() may be called from any thread, concurrently; calls run one at
// a time, in submission order, and a call's deadline covers its wait in the queue. A call still
// queued when its deadline passes is dropped, never run late. The destructor must not race with
// calls (the owner destroys the worker after its last caller is done).
class DeadlineWorker {
 public:
  // `name` is the context of errors ("hc1"); the thread starts at once.
  explicit DeadlineWorker(std::string name);
  ~DeadlineWorker() noexcept;
  DeadlineWorker(const DeadlineWorker&) = delete;
  DeadlineWorker& operator=(const DeadlineWorker&) = delete;

  // Runs `fn` on the worker thread and returns its result, or
  //   kTimeout      it did not return within `deadline` (the worker is hung from then on), or
  //                 it was still queued behind another call then (the worker is not hung);
  //   kUnavailable  at once, without running `fn`, while the worker is hung.
  template <class T>
  Result<T> call(std::chrono::milliseconds deadline, std::function<Result<T>()> fn) {
    auto slot = std::make_shared<std::optional<Result<T>>>();
    Status st = submit(deadline, [fn = std::move(fn), slot] { slot->emplace(fn()); });
    if (!st.is_ok()) return st;
    // The worker wrote the slot before submit() saw the task done, under the shared mutex.
    return std::move(**slot);
  }
  Status run(std::chrono::milliseconds deadline, std::function<Status()> fn);

  // True from a missed deadline until the late call returns.
  bool hung() const;
  const std::string& name() const { return name_; }

 private:
  struct Shared;
  Status submit(std::chrono::milliseconds deadline, std::function<void()> task);
  static void loop(const std::shared_ptr<Shared>& shared);

  std::string name_;
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace armhive
