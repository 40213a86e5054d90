#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive {

// How an injected call fails.
enum class FaultKind {
  kTransient,  // kUnavailable at once (libvirt reconnecting, database busy)
  kPermanent,  // kInternal at once (a broken promise below us)
  kHang,       // blocks for `hang` and then fails with kTimeout (a call past its deadline)
};
const char* to_string(FaultKind kind);

// Which calls of a wrapped interface fail: the Nth call counted over every method (fail_nth),
// or every call of one method (fail_method). Calls are counted only while armed. Thread-safe.
class FaultPlan {
 public:
  void arm() { set_armed(true); }
  void disarm() { set_armed(false); }
  // The nth call (1-based) after arm() fails with `kind`.
  void fail_nth(int n, FaultKind kind);
  // Every call of `method` fails with `kind` until clear_method().
  void fail_method(const std::string& method, FaultKind kind);
  void clear_method(const std::string& method);
  void set_hang(std::chrono::milliseconds hang);
  // Ends every hang in progress now (each fails with kTimeout as if its time had passed).
  void release_hangs();

  // Called by the wrapper at the start of every call: the fault to return, if any.
  std::optional<Status> on_call(std::string_view method);

  int calls() const;                       // counted while armed
  std::vector<std::string> trace() const;  // method names in call order while armed
  int injected() const;
  int hanging() const;  // calls blocked in a hang right now

 private:
  void set_armed(bool armed);
  mutable std::mutex mu_;
  std::condition_variable released_;
  uint64_t release_generation_ = 0;
  int hanging_ = 0;
  bool armed_ = false;
  int calls_ = 0;
  int injected_ = 0;
  int nth_ = 0;
  FaultKind nth_kind_ = FaultKind::kTransient;
  std::map<std::string, FaultKind, std::less<>> methods_;
  std::vector<std::string> trace_;
  std::chrono::milliseconds hang_{20};
};

}  // namespace armhive
