#include "daemon/github/delivery_window.h"

namespace armhive {

namespace {
constexpr const char* kHeader = "X-GitHub-Delivery";
}

void DeliveryWindow::expire_locked(TimePoint now) {
  while (!order_.empty() && (order_.front().at + window_ <= now || order_.size() > capacity_)) {
    ids_.erase(order_.front().id);
    order_.pop_front();
  }
}

Status DeliveryWindow::admit(const std::string& id, TimePoint now) {
  if (id.empty()) return invalid_argument(kHeader, "every delivery must carry its id");
  if (id.size() > 128) return invalid_argument(kHeader, "must be at most 128 bytes");
  MutexLock lock(mu_);
  expire_locked(now);
  if (ids_.count(id)) {
    return Status(ErrorCode::kConflict, "delivery " + id + " was received already (a replay)", {},
                  kHeader);
  }
  ids_.insert(id);
  order_.push_back({now, id});
  expire_locked(now);
  return Status::ok();
}

void DeliveryWindow::set_window(Seconds window) {
  MutexLock lock(mu_);
  window_ = window;
}

size_t DeliveryWindow::size() const {
  MutexLock lock(mu_);
  return ids_.size();
}

}  // namespace armhive
