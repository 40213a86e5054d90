#include "daemon/virt/domain_events.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

namespace armhive {
namespace {

using namespace std::chrono_literals;

TEST_CASE("unsubscribe waits for a handler that is running, so its owner may go away",
          "[virt][events]") {
  DomainEvents::Subscribers subscribers;
  std::atomic<bool> started{false}, release{false}, finished{false};
  int id = subscribers.add([&](const VmEvent&) {
    started = true;
    while (!release) std::this_thread::yield();
    finished = true;
  });
  std::thread loop([&] { subscribers.dispatch({"armhive-vm-1", VmEventKind::kCrashed, ""}); });
  while (!started) std::this_thread::yield();
  std::atomic<bool> finished_when_returned{false};
  std::thread owner([&] {
    subscribers.remove(id);
    finished_when_returned = finished.load();
  });
  std::this_thread::sleep_for(50ms);  // let remove() reach its wait (ordering, not timing)
  release = true;
  owner.join();
  loop.join();
  CHECK(finished_when_returned);
  // And it is never called again.
  finished = false;
  release = true;
  subscribers.dispatch({"armhive-vm-1", VmEventKind::kStopped, ""});
  CHECK_FALSE(finished);
}

TEST_CASE("a handler may unsubscribe itself and one unsubscribed mid-dispatch is not called",
          "[virt][events]") {
  DomainEvents::Subscribers subscribers;
  int second_calls = 0;
  int second = 0;
  int first = 0;
  first = subscribers.add([&](const VmEvent&) {
    subscribers.remove(first);   // must not wait for itself
    subscribers.remove(second);  // nor for the dispatch it is part of
  });
  second = subscribers.add([&](const VmEvent&) { ++second_calls; });
  subscribers.dispatch({"armhive-vm-1", VmEventKind::kStopped, ""});
  CHECK(second_calls == 0);
  subscribers.dispatch({"armhive-vm-1", VmEventKind::kStopped, ""});
  CHECK(second_calls == 0);
}

}  // namespace
}  // namespace armhive
