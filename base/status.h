#pragma once

#include <string>
#include <string_view>

namespace armhive {

// Error codes map one-to-one to HTTP statuses (see http_status()). Keep the set small:
// a code says what the caller can do about it, the message says what happened.
enum class ErrorCode {
  kOk,                    // 200
  kInvalidArgument,       // 400: the request is malformed; `field` names the culprit
  kUnauthenticated,       // 401
  kPermissionDenied,      // 403
  kNotFound,              // 404
  kMethodNotAllowed,      // 405: the path exists, the method does not (the reply says which do)
  kConflict,              // 409: the state does not allow it now (or the name is taken)
  kPayloadTooLarge,       // 413
  kRequestTimeout,        // 408: the client did not send its request (an upload's body) in time
  kUnsupportedMediaType,  // 415: a request body that is not application/json
  kUnprocessable,  // 422: well-formed but can never be satisfied (e.g. a VM larger than any host)
  kResourceExhausted,  // 429: quota or capacity
  kInternal,           // 500: a broken promise of ours (not a broken invariant: those abort)
  kUnavailable,        // 503: the environment failed (libvirt down, guest unreachable); retryable
  kTimeout,            // 504
};

// Status: the outcome of an operation that can fail for environmental reasons.
// Cheap to copy when ok. `context` carries the object the failure is about (a domain
// name, a file path), `field` the request field for client errors.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message, std::string context = {}, std::string field = {});

  static Status ok() { return {}; }

  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& context() const { return context_; }
  const std::string& field() const { return field_; }

  // Returns a copy whose message is prefixed with `what: ` so a caller can say what it was
  // doing without losing the original cause.
  Status annotate(std::string_view what) const;
  Status with_field(std::string field) const;

  // "NotFound: no such lease [lease l-1]" — for logs and CLI output.
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
  std::string context_;
  std::string field_;
};

int http_status(ErrorCode code);
std::string_view code_name(ErrorCode code);  // "invalid-argument", stable: used in problem types
ErrorCode code_from_http(int status);

// Shorthands for the common cases.
Status invalid_argument(std::string field, std::string message);
Status not_found(std::string message, std::string context = {});
Status conflict(std::string message, std::string context = {});
Status unavailable(std::string message, std::string context = {});
Status internal_error(std::string message, std::string context = {});

}  // namespace armhive

// Propagate a failed Status from an expression returning Status.
#define ARMHIVE_RETURN_IF_ERROR(expr)                     \
  do {                                                    \
    ::armhive::Status armhive_status_ = (expr);           \
    if (!armhive_status_.is_ok()) return armhive_status_; \
  } while (0)
