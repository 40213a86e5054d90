#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "base/result.h"

namespace armhive {

// The thread that runs libvirt's default event loop (virEventRunDefaultImpl). Lifecycle and
// agent events, keepalive probes and close callbacks are all dispatched on it, so it must run
// for the daemon's whole life. Start it before opening connections whose events you want.
//
// libvirt's default loop is process-wide: only one EventLoop can run at a time (a second
// start() gets kConflict). Destruction stops the thread: it sets a flag and wakes the loop
// with a 0 ms timer, then joins. Callbacks already registered stay registered but are not
// dispatched while no loop runs.
class EventLoop {
 public:
  static Result<std::unique_ptr<EventLoop>> start();
  ~EventLoop() noexcept;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Stops and joins the thread (idempotent; called by the destructor). Not from the loop thread.
  void stop() noexcept;

 private:
  EventLoop() = default;
  void run();
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Makes the running loop start a fresh iteration (a one-shot 0 ms timer). Called after a
// connection or event registration changes: the loop then rebuilds its poll set. (Seen with
// libvirt 9.0: after libvirtd restarted and the connection was reopened — its socket reusing
// the old descriptor number — events were not dispatched until the loop woke for another
// reason.) Harmless when no loop runs.
void wake_event_loop();

}  // namespace armhive
