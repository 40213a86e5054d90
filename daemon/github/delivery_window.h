#pragma once

#include <cstddef>
#include <deque>
#include <set>
#include <string>

#include "base/status.h"
#include "base/thread_annotations.h"
#include "daemon/core/clock.h"

namespace armhive {

// Remembers webhook delivery ids (X-GitHub-Delivery) for `window`, so that a delivery replayed
// by someone who captured it (signature and all) is refused. GitHub redelivers a failed
// delivery with the same id only when asked to; a redelivery within the window is refused too,
// which is what we want (its job was already handled). At most `capacity` ids are kept (the
// oldest go first), bounding memory under a flood of signed deliveries.
//
// Threading: thread-safe (one mutex, held only for the bookkeeping).
class DeliveryWindow {
 public:
  DeliveryWindow(Seconds window, size_t capacity = 100000) : window_(window), capacity_(capacity) {}

  // kConflict (field "X-GitHub-Delivery") when `id` was admitted within the window;
  // kInvalidArgument when it is empty or longer than 128 bytes. Admits it otherwise.
  Status admit(const std::string& id, TimePoint now) EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);
  // A new window (a reload): ids older than it go at the next admit; a longer one keeps those
  // still held for longer.
  void set_window(Seconds window) EXCLUDES(mu_);

 private:
  struct Seen {
    TimePoint at;
    std::string id;
  };
  void expire_locked(TimePoint now) REQUIRES(mu_);

  Seconds window_ GUARDED_BY(mu_);
  size_t capacity_;
  mutable Mutex mu_;
  std::deque<Seen> order_ GUARDED_BY(mu_);  // oldest first
  std::set<std::string> ids_ GUARDED_BY(mu_);
};

}  // namespace armhive
