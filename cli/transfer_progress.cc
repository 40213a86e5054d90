#include "cli/transfer_progress.h"

#include <unistd.h>

#include <cstdio>

namespace armhive {
namespace {

constexpr int kBarWidth = 24;
constexpr std::chrono::milliseconds kRedraw{100};
constexpr double kMib = 1024.0 * 1024.0;

}  // namespace

TransferProgress::TransferProgress(std::string what, uint64_t total)
    : what_(std::move(what)),
      total_(total),
      tty_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_ - kRedraw) {}

TransferProgress::~TransferProgress() { finish(); }

void TransferProgress::add(uint64_t bytes) {
  done_ += bytes;
  if (!tty_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < kRedraw) return;
  last_draw_ = now;
  draw();
}

double TransferProgress::mib_per_second() const {
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return s > 0 ? static_cast<double>(done_) / kMib / s : 0;
}

void TransferProgress::draw() {
  const double fraction =
      total_ == 0 ? 1.0
                  : static_cast<double>(std::min(done_, total_)) / static_cast<double>(total_);
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kBarWidth - filled), '-');
  std::fprintf(stderr, "\r\033[K  %s  [%s] %3d%%  %.1f/%.1f MiB  %.1f MiB/s", what_.c_str(),
               bar.c_str(), static_cast<int>(fraction * 100), static_cast<double>(done_) / kMib,
               static_cast<double>(total_) / kMib, mib_per_second());
  std::fflush(stderr);
}

void TransferProgress::finish() {
  if (finished_) return;
  finished_ = true;
  if (!tty_) return;
  draw();
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace armhive
