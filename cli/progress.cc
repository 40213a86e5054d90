#include "cli/progress.h"

#include <unistd.h>

#include <iostream>

namespace armhive {

using SteadyClock = std::chrono::steady_clock;

Progress::Progress(std::string what)
    : what_(std::move(what)), tty_(isatty(STDERR_FILENO) == 1), start_(SteadyClock::now()) {
  if (tty_) spinner_ = std::thread([this] { spin(); });
}

Progress::~Progress() { finish(); }

void Progress::update(const std::string& state, const std::string& detail) {
  std::lock_guard lock(mu_);
  if (state == state_ && detail == detail_) return;
  state_ = state;
  detail_ = detail;
  if (!tty_) {
    std::cerr << what_ << ": " << state << (detail.empty() ? "" : " (" + detail + ")") << " after "
              << elapsed() << "s\n";
  }
}

void Progress::finish() {
  {
    std::lock_guard lock(mu_);
    if (done_) return;
    done_ = true;
  }
  cv_.notify_all();
  if (spinner_.joinable()) spinner_.join();
  if (tty_) std::cerr << "\r\033[K" << std::flush;
}

long Progress::elapsed() const {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::seconds>(SteadyClock::now() - start_).count());
}

void Progress::spin() {
  static constexpr const char* kFrames[] = {"|", "/", "-", "\\"};
  size_t i = 0;
  std::unique_lock lock(mu_);
  while (!done_) {
    std::cerr << "\r\033[K" << kFrames[i++ % 4] << " " << what_ << ": " << state_
              << (detail_.empty() ? "" : " (" + detail_ + ")") << " " << elapsed() << "s"
              << std::flush;
    cv_.wait_for(lock, std::chrono::milliseconds(120));
  }
}

}  // namespace armhive
