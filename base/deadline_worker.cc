#include "base/deadline_worker.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>

#include "base/thread_annotations.h"

namespace armhive {

struct DeadlineWorker::Shared {
  struct Task {
    uint64_t id = 0;
    std::function<void()> fn;
  };

  Mutex mu;
  std::condition_variable_any work_cv;  // a task was queued, or stop
  std::condition_variable_any done_cv;  // a task finished
  std::deque<Task> queue GUARDED_BY(mu);
  uint64_t next_id GUARDED_BY(mu) = 1;
  uint64_t finished_through GUARDED_BY(mu) = 0;  // ids run in order: every id <= this is done
  bool hung GUARDED_BY(mu) = false;
  bool stop GUARDED_BY(mu) = false;
};

DeadlineWorker::DeadlineWorker(std::string name)
    : name_(std::move(name)), shared_(std::make_shared<Shared>()) {
  // The thread holds its own reference: a detached, hung thread keeps the state alive.
  thread_ = std::thread([shared = shared_] { loop(shared); });
}

DeadlineWorker::~DeadlineWorker() noexcept {
  bool hung = false;
  {
    MutexLock lock(shared_->mu);
    shared_->stop = true;
    hung = shared_->hung;
    shared_->work_cv.notify_all();
  }
  // A hung call may never return (a stopped libvirtd): never wait for it.
  if (hung) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

void DeadlineWorker::loop(const std::shared_ptr<Shared>& shared) {
  Shared& s = *shared;
  MutexLock lock(s.mu);
  for (;;) {
    while (!s.stop && s.queue.empty()) s.work_cv.wait(lock);
    if (s.queue.empty()) return;  // stopping and nothing left
    Shared::Task task = std::move(s.queue.front());
    s.queue.pop_front();
    lock.unlock();
    task.fn();
    task.fn = nullptr;  // destroy captures outside the lock too
    lock.lock();
    s.finished_through = task.id;
    s.hung = false;
    s.done_cv.notify_all();
  }
}

Status DeadlineWorker::submit(std::chrono::milliseconds deadline, std::function<void()> task) {
  Shared& s = *shared_;
  MutexLock lock(s.mu);
  if (s.hung) {
    return unavailable("not answering: an earlier call is still running past its deadline", name_);
  }
  uint64_t id = s.next_id++;
  s.queue.push_back({id, std::move(task)});
  s.work_cv.notify_all();
  auto until = std::chrono::steady_clock::now() + deadline;
  while (s.finished_through < id) {
    if (s.done_cv.wait_until(lock, until) != std::cv_status::timeout) continue;
    if (s.finished_through >= id) break;
    auto queued = std::find_if(s.queue.begin(), s.queue.end(),
                               [id](const Shared::Task& t) { return t.id == id; });
    std::string after = std::to_string(deadline.count()) + " ms";
    if (queued != s.queue.end()) {
      s.queue.erase(queued);  // never run it late: its caller has given up
      return Status(ErrorCode::kTimeout, "still queued behind another call after " + after, name_);
    }
    s.hung = true;
    return Status(ErrorCode::kTimeout, "no answer within " + after, name_);
  }
  return Status::ok();
}

Status DeadlineWorker::run(std::chrono::milliseconds deadline, std::function<Status()> fn) {
  auto slot = std::make_shared<Status>();
  ARMHIVE_RETURN_IF_ERROR(submit(deadline, [fn = std::move(fn), slot] { *slot = fn(); }));
  return *slot;
}

bool DeadlineWorker::hung() const {
  MutexLock lock(shared_->mu);
  return shared_->hung;
}

}  // namespace armhive
