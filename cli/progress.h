#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace armhive {

// Shows progress on stderr while the main thread blocks: an animated spinner line with the
// state and elapsed time on a terminal, one plain line per state change otherwise.
// Threads: update() and finish() from the owning thread; on a terminal a spinner thread of its
// own redraws the line (mu_ guards the state) until finish() or destruction joins it.
class Progress {
 public:
  explicit Progress(std::string what);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(const std::string& state, const std::string& detail);
  // Stops the spinner and clears its line; idempotent.
  void finish();

 private:
  long elapsed() const;
  void spin();

  std::string what_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string state_ = "waiting";
  std::string detail_;
  bool done_ = false;
  std::thread spinner_;
};

}  // namespace armhive
