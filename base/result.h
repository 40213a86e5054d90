#pragma once

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <variant>

#include "base/status.h"

namespace armhive {

// Result<T>: a value or the Status saying why there is none. Accessing the value of a failed
// Result is a programming error and aborts (it is an invariant, not an environmental failure).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).is_ok()) {
      std::fputs("armhive: Result constructed from an ok Status\n", stderr);
      std::abort();
    }
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }

  const Status& status() const {
    static const Status kOkStatus;
    return is_ok() ? kOkStatus : std::get<Status>(v_);
  }

  T& value() & {
    check();
    return std::get<T>(v_);
  }
  const T& value() const& {
    check();
    return std::get<T>(v_);
  }
  T&& value() && {
    check();
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  T value_or(T fallback) const& { return is_ok() ? std::get<T>(v_) : std::move(fallback); }

 private:
  void check() const {
    if (!is_ok()) {
      std::fprintf(stderr, "armhive: value() of a failed Result: %s\n",
                   std::get<Status>(v_).to_string().c_str());
      std::abort();
    }
  }
  std::variant<T, Status> v_;
};

}  // namespace armhive

// Evaluate `expr` (a Result), return its Status on failure, else move its value into `lhs`.
#define ARMHIVE_CONCAT_INNER(a, b) a##b
#define ARMHIVE_CONCAT(a, b) ARMHIVE_CONCAT_INNER(a, b)
#define ARMHIVE_ASSIGN_OR_RETURN(lhs, expr) \
  ARMHIVE_ASSIGN_OR_RETURN_IMPL(ARMHIVE_CONCAT(armhive_result_, __LINE__), lhs, expr)
#define ARMHIVE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.is_ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
