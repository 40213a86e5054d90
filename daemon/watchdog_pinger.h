#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <thread>

#include "base/result.h"
#include "base/service_notifier.h"
#include "base/thread_annotations.h"

namespace armhive {

// Sends the service manager's WATCHDOG=1 while `answers` says the daemon's loop runs: twice
// per watchdog interval (as sd_watchdog_enabled(3) advises), each probe given a quarter of
// it. A hung loop stops the pings, and systemd restarts armhived (VMs keep running; the next
// one re-adopts them). Without a watchdog interval it starts no thread.
//
// Ownership: borrows the notifier, which outlives it. Threading: one thread of its own; the
// destructor stops and joins it (waiting at most for the probe in progress).
class WatchdogPinger {
 public:
  using Probe = std::function<Status(std::chrono::milliseconds deadline)>;
  WatchdogPinger(const ServiceNotifier& notifier, Probe answers);
  ~WatchdogPinger() noexcept;
  WatchdogPinger(const WatchdogPinger&) = delete;
  WatchdogPinger& operator=(const WatchdogPinger&) = delete;

 private:
  void run();

  const ServiceNotifier& notifier_;
  const Probe answers_;
  Mutex mu_;
  std::condition_variable_any wake_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace armhive
