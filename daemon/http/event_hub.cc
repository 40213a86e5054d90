#include "daemon/http/event_hub.h"

#include <condition_variable>
#include <mutex>

namespace armhive {

void EventHub::start() {
  if (watcher_.joinable()) return;
  watcher_ = std::jthread([this](std::stop_token stop) { watch(stop); });
}

void EventHub::stop() {
  if (!watcher_.joinable()) return;
  watcher_.request_stop();
  watcher_.join();
}

void EventHub::watch(std::stop_token stop) {
  uint64_t after = 0;
  {
    MutexLock lock(mu_);
    after = cursor_;
  }
  std::mutex idle_mu;
  std::condition_variable_any idle;
  while (!stop.stop_requested()) {
    auto asked = std::chrono::steady_clock::now();
    std::vector<Event> batch = leases_.events_since(after, kSlice);
    if (batch.empty()) {
      // A service that returns at once without events (one that is stopping) must not turn
      // this into a spin; the wait ends early on stop.
      if (std::chrono::steady_clock::now() - asked < std::chrono::milliseconds(5)) {
        std::unique_lock lock(idle_mu);
        idle.wait_for(lock, stop, kSlice, [] { return false; });
      }
      continue;
    }
    // Gathered under the lock, called after it: a callback may drop the last reference to
    // its waiter, whose destructor comes back here to deregister.
    std::vector<std::function<void()>> wake;
    std::vector<std::pair<std::function<void(const std::vector<Event>&)>, std::vector<Event>>> feed;
    {
      MutexLock lock(mu_);
      std::vector<Event> fresh;
      for (Event& e : batch) {
        if (e.seq <= after) continue;
        after = e.seq;
        fresh.push_back(std::move(e));
      }
      if (fresh.empty()) continue;
      cursor_ = after;
      for (const Event& e : fresh) {
        recent_.push_back(e);
        if (recent_.size() > ring_) recent_.pop_front();
        if (e.lease_id.empty()) continue;
        auto [lo, hi] = waiters_by_lease_.equal_range(e.lease_id);
        for (auto it = lo; it != hi; ++it) {
          auto w = waiters_.find(it->second);
          if (w != waiters_.end()) wake.push_back(w->second.on_event);
        }
      }
      for (auto& [handle, sub] : subscribers_) {
        std::vector<Event> mine;
        for (const Event& e : fresh) {
          if (e.seq > sub.cursor) mine.push_back(e);
        }
        if (mine.empty()) continue;
        sub.cursor = mine.back().seq;
        feed.emplace_back(sub.deliver, std::move(mine));
      }
    }
    // Only this thread delivers live batches, so each subscriber still sees them in order.
    for (auto& w : wake) w();
    for (auto& [deliver, events] : feed) deliver(events);
  }
}

uint64_t EventHub::add_lease_waiter(const std::string& lease_id, std::function<void()> on_event) {
  MutexLock lock(mu_);
  uint64_t h = next_handle_++;
  waiters_[h] = {lease_id, std::move(on_event)};
  waiters_by_lease_.emplace(lease_id, h);
  return h;
}

void EventHub::remove_lease_waiter(uint64_t handle) {
  MutexLock lock(mu_);
  auto it = waiters_.find(handle);
  if (it == waiters_.end()) return;
  auto [lo, hi] = waiters_by_lease_.equal_range(it->second.lease_id);
  for (auto b = lo; b != hi; ++b) {
    if (b->second == handle) {
      waiters_by_lease_.erase(b);
      break;
    }
  }
  waiters_.erase(it);
}

uint64_t EventHub::subscribe(uint64_t after,
                             std::function<void(const std::vector<Event>&)> deliver) {
  MutexLock lock(mu_);
  uint64_t h = next_handle_++;
  std::vector<Event> catch_up;
  for (const Event& e : recent_) {
    if (e.seq > after) catch_up.push_back(e);
  }
  Subscriber sub{std::max(after, catch_up.empty() ? after : catch_up.back().seq),
                 std::move(deliver)};
  if (!catch_up.empty()) sub.deliver(catch_up);
  subscribers_[h] = std::move(sub);
  return h;
}

void EventHub::unsubscribe(uint64_t handle) {
  MutexLock lock(mu_);
  subscribers_.erase(handle);
}

size_t EventHub::waiting() const {
  MutexLock lock(mu_);
  return waiters_.size() + subscribers_.size();
}

}  // namespace armhive
