#include "daemon/virt/event_loop.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "daemon/virt/error.h"

namespace armhive {

namespace {

std::atomic<bool> g_loop_running{false};  // libvirt's default loop is process-wide

void wake_once(int timer, void* /*opaque*/) { virEventRemoveTimeout(timer); }

}  // namespace

Result<std::unique_ptr<EventLoop>> EventLoop::start() {
  ARMHIVE_RETURN_IF_ERROR(init_libvirt());
  bool expected = false;
  if (!g_loop_running.compare_exchange_strong(expected, true)) {
    return conflict("libvirt's default event loop already runs in this process");
  }
  std::unique_ptr<EventLoop> loop(new EventLoop());
  loop->thread_ = std::thread([l = loop.get()] { l->run(); });
  return loop;
}

void EventLoop::run() {
  while (!stopping_.load()) {
    if (virEventRunDefaultImpl() < 0) virResetLastError();
  }
}

void wake_event_loop() {
  // A 0 ms timer makes the blocked poll() return; the timer removes itself when it fires.
  if (virEventAddTimeout(0, wake_once, nullptr, nullptr) < 0) virResetLastError();
}

void EventLoop::stop() noexcept {
  if (!thread_.joinable()) return;
  stopping_.store(true);
  wake_event_loop();
  thread_.join();
  g_loop_running.store(false);
}

EventLoop::~EventLoop() noexcept { stop(); }

}  // namespace armhive
