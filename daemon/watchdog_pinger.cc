#include "daemon/watchdog_pinger.h"

#include <spdlog/spdlog.h>

namespace armhive {

WatchdogPinger::WatchdogPinger(const ServiceNotifier& notifier, Probe answers)
    : notifier_(notifier), answers_(std::move(answers)) {
  if (notifier_.watchdog_interval().count() > 0) thread_ = std::thread([this] { run(); });
}

WatchdogPinger::~WatchdogPinger() noexcept {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WatchdogPinger::run() {
  auto period = std::max(
      std::chrono::milliseconds(1),
      std::chrono::duration_cast<std::chrono::milliseconds>(notifier_.watchdog_interval() / 2));
  MutexLock lock(mu_);
  while (!stopping_) {
    if (wake_.wait_for(lock, period) == std::cv_status::no_timeout) continue;  // stop, or spurious
    lock.unlock();
    // Not under mu_: the probe may take up to its deadline.
    if (Status s = answers_(period / 2); s.is_ok()) {
      if (Status n = notifier_.watchdog(); !n.is_ok()) spdlog::warn("watchdog: {}", n.message());
    } else {
      spdlog::error("watchdog not pinged: {}", s.message());
    }
    lock.lock();
  }
}

}  // namespace armhive
