#include "base/deadline_worker.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <string>
#include <thread>

namespace armhive {
namespace {

using std::chrono::milliseconds;

// A call that blocks until the test opens the gate: a host that does not answer.
struct Gate {
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
};

// Waits (without a deadline of its own: ctest's timeout bounds it) until `done` is true.
template <class Pred>
void wait_for(Pred done) {
  while (!done()) std::this_thread::sleep_for(milliseconds(5));
}

TEST_CASE("deadline worker: results come back from the worker thread", "[deadline_worker]") {
  DeadlineWorker w("hc1");
  auto caller = std::this_thread::get_id();
  Result<std::thread::id> id = w.call<std::thread::id>(
      milliseconds(10'000), [] { return Result<std::thread::id>(std::this_thread::get_id()); });
  REQUIRE(id.is_ok());
  CHECK(*id != caller);
  Result<int> failed = w.call<int>(milliseconds(10'000), [] {
    return Result<int>(unavailable("virConnectOpen: connection refused", "qemu+tls://hc1"));
  });
  REQUIRE(!failed.is_ok());
  CHECK(failed.status().code() == ErrorCode::kUnavailable);
  CHECK(failed.status().message() == "virConnectOpen: connection refused");
  CHECK(w.run(milliseconds(10'000), [] { return Status::ok(); }).is_ok());
  CHECK_FALSE(w.hung());
}

TEST_CASE("deadline worker: a call past its deadline makes the worker hung until it returns",
          "[deadline_worker]") {
  DeadlineWorker w("hc1");
  auto gate = std::make_shared<Gate>();
  auto returned = std::make_shared<std::atomic<bool>>(false);
  Status late = w.run(milliseconds(50), [gate, returned] {
    gate->opened.wait();
    returned->store(true);
    return Status::ok();
  });
  CHECK(late.code() == ErrorCode::kTimeout);
  CHECK(late.context() == "hc1");
  CHECK(w.hung());
  // While hung, calls fail at once and never run: they do not queue behind the hung one.
  auto ran = std::make_shared<std::atomic<bool>>(false);
  Status refused = w.run(milliseconds(10'000), [ran] {
    ran->store(true);
    return Status::ok();
  });
  CHECK(refused.code() == ErrorCode::kUnavailable);
  CHECK(refused.message().find("past its deadline") != std::string::npos);

  gate->open.set_value();  // the host answers at last
  wait_for([&] { return !w.hung(); });
  CHECK(returned->load());
  CHECK_FALSE(ran->load());
  CHECK(w.run(milliseconds(10'000), [] { return Status::ok(); }).is_ok());
}

TEST_CASE("deadline worker: a call still queued at its deadline is dropped, never run late",
          "[deadline_worker]") {
  DeadlineWorker w("tx1");
  auto gate = std::make_shared<Gate>();
  auto started = std::make_shared<std::promise<void>>();
  auto first = std::async(std::launch::async, [&w, gate, started] {
    return w.run(milliseconds(60'000), [gate, started] {
      started->set_value();
      gate->opened.wait();
      return Status::ok();
    });
  });
  started->get_future().wait();  // the first call is running
  auto ran = std::make_shared<std::atomic<bool>>(false);
  Status queued = w.run(milliseconds(50), [ran] {
    ran->store(true);
    return Status::ok();
  });
  CHECK(queued.code() == ErrorCode::kTimeout);
  CHECK(queued.message().find("queued") != std::string::npos);
  CHECK_FALSE(w.hung());  // the running call has not missed its own deadline
  gate->open.set_value();
  CHECK(first.get().is_ok());
  CHECK(w.run(milliseconds(10'000), [] { return Status::ok(); }).is_ok());
  CHECK_FALSE(ran->load());
}

TEST_CASE("deadline worker: one hung host never delays another's calls", "[deadline_worker]") {
  auto gate = std::make_shared<Gate>();
  {
    DeadlineWorker hung("hc1");
    DeadlineWorker healthy("hc2");
    CHECK(hung.run(milliseconds(20),
                   [gate] {
                     gate->opened.wait();
                     return Status::ok();
                   })
              .code() == ErrorCode::kTimeout);
    for (int i = 0; i < 20; ++i) {
      Result<int> r = healthy.call<int>(milliseconds(10'000), [i] { return Result<int>(i); });
      REQUIRE(r.is_ok());
      CHECK(*r == i);
    }
    // Leaving the scope destroys the hung worker without waiting for its call (the test would
    // hang here otherwise); its thread ends when the call returns.
  }
  gate->open.set_value();
}

}  // namespace
}  // namespace armhive
