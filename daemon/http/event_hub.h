#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_annotations.h"
#include "daemon/engine/lease_service.h"

namespace armhive {

// The one consumer of LeaseService::events_since in the server: a watcher thread that
// follows the event log and fans it out to the requests that wait on it — long-polls (woken
// when an event names their lease) and event streams (handed every new event). Waiting
// requests therefore hold no thread: they are a callback here and a timer on their
// connection.
//
// Keeps the last `ring` events so that a stream subscribing after a replay catches up
// without a gap (see subscribe()).
//
// Threading: add/remove/subscribe/unsubscribe from any thread. Callbacks run on the watcher
// thread (a subscriber's catch-up on the subscribing thread, under the hub's lock), in event
// order; they must only post work elsewhere and never block.
class EventHub {
 public:
  explicit EventHub(LeaseService& leases, size_t ring = 4096) : leases_(leases), ring_(ring) {}
  ~EventHub() { stop(); }
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;

  void start();
  // Ends the watcher within one events_since slice (kSlice) and joins it. Idempotent.
  void stop();

  // `on_event` runs for every event whose lease_id is `lease_id`.
  uint64_t add_lease_waiter(const std::string& lease_id, std::function<void()> on_event)
      EXCLUDES(mu_);
  void remove_lease_waiter(uint64_t handle) EXCLUDES(mu_);

  // `deliver` gets, in order, every event with seq > after: first those still in the ring,
  // then each new batch. Events the caller already has (seq ≤ after) are never passed.
  uint64_t subscribe(uint64_t after, std::function<void(const std::vector<Event>&)> deliver)
      EXCLUDES(mu_);
  void unsubscribe(uint64_t handle) EXCLUDES(mu_);

  size_t waiting() const
      EXCLUDES(mu_);  // long-poll waiters plus subscribers (for tests and metrics)

  // How long one events_since call may block: bounds stop()'s latency, not any request's.
  static constexpr std::chrono::milliseconds kSlice{250};

 private:
  void watch(std::stop_token stop) EXCLUDES(mu_);

  struct Waiter {
    std::string lease_id;
    std::function<void()> on_event;
  };
  struct Subscriber {
    uint64_t cursor = 0;
    std::function<void(const std::vector<Event>&)> deliver;
  };

  LeaseService& leases_;
  const size_t ring_;
  mutable Mutex mu_;
  std::deque<Event> recent_ GUARDED_BY(mu_);
  uint64_t cursor_ GUARDED_BY(mu_) = 0;  // the newest seq seen
  uint64_t next_handle_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Waiter> waiters_ GUARDED_BY(mu_);
  std::multimap<std::string, uint64_t> waiters_by_lease_ GUARDED_BY(mu_);
  std::map<uint64_t, Subscriber> subscribers_ GUARDED_BY(mu_);
  std::jthread watcher_;
};

}  // namespace armhive
