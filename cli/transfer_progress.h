#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace armhive {

// A byte progress bar for `armhive cp` on stderr:
//   "  NAME  [########------------]  40%  40.0/100.0 MiB  12.5 MiB/s"
// redrawn at most ten times a second while bytes arrive, on a terminal only (a pipe or log
// gets nothing until the caller prints its summary). Owning thread only.
class TransferProgress {
 public:
  TransferProgress(std::string what, uint64_t total);
  ~TransferProgress();
  TransferProgress(const TransferProgress&) = delete;
  TransferProgress& operator=(const TransferProgress&) = delete;

  void add(uint64_t bytes);
  // Draws the final state (100% when all bytes came) and ends the line; idempotent.
  void finish();
  // MiB/s over the transfer so far.
  double mib_per_second() const;

 private:
  void draw();

  std::string what_;
  uint64_t total_;
  uint64_t done_ = 0;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace armhive
