#include "tests/support/fault_plan.h"

#include <thread>

namespace armhive {

const char* to_string(FaultKind kind) {
  switch (kind) {
    case FaultKind::kTransient:
      return "transient";
    case FaultKind::kPermanent:
      return "permanent";
    case FaultKind::kHang:
      return "hang";
  }
  return "?";
}

void FaultPlan::set_armed(bool armed) {
  std::lock_guard lock(mu_);
  armed_ = armed;
}

void FaultPlan::fail_nth(int n, FaultKind kind) {
  std::lock_guard lock(mu_);
  nth_ = n;
  nth_kind_ = kind;
}

void FaultPlan::fail_method(const std::string& method, FaultKind kind) {
  std::lock_guard lock(mu_);
  methods_[method] = kind;
}

void FaultPlan::clear_method(const std::string& method) {
  std::lock_guard lock(mu_);
  methods_.erase(method);
}

void FaultPlan::set_hang(std::chrono::milliseconds hang) {
  std::lock_guard lock(mu_);
  hang_ = hang;
}

std::optional<Status> FaultPlan::on_call(std::string_view method) {
  FaultKind kind;
  std::chrono::milliseconds hang;
  {
    std::lock_guard lock(mu_);
    auto m = methods_.find(method);
    bool by_method = m != methods_.end();
    if (!armed_ && !by_method) return std::nullopt;
    bool by_count = false;
    if (armed_) {
      ++calls_;
      trace_.emplace_back(method);
      by_count = calls_ == nth_;
    }
    if (!by_method && !by_count) return std::nullopt;
    kind = by_method ? m->second : nth_kind_;
    hang = hang_;
    ++injected_;
  }
  std::string what = "injected " + std::string(to_string(kind)) + " fault";
  switch (kind) {
    case FaultKind::kTransient:
      return Status(ErrorCode::kUnavailable, what, std::string(method));
    case FaultKind::kPermanent:
      return Status(ErrorCode::kInternal, what, std::string(method));
    case FaultKind::kHang: {
      std::unique_lock lock(mu_);
      uint64_t generation = release_generation_;
      ++hanging_;
      released_.wait_for(lock, hang, [&] { return release_generation_ != generation; });
      --hanging_;
      return Status(ErrorCode::kTimeout, what, std::string(method));
    }
  }
  return std::nullopt;
}

void FaultPlan::release_hangs() {
  {
    std::lock_guard lock(mu_);
    ++release_generation_;
  }
  released_.notify_all();
}

int FaultPlan::hanging() const {
  std::lock_guard lock(mu_);
  return hanging_;
}

int FaultPlan::calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

std::vector<std::string> FaultPlan::trace() const {
  std::lock_guard lock(mu_);
  return trace_;
}

int FaultPlan::injected() const {
  std::lock_guard lock(mu_);
  return injected_;
}

}  // namespace armhive
