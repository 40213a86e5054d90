#include "base/status.h"

#include <utility>

namespace armhive {

Status::Status(ErrorCode code, std::string message, std::string context, std::string field)
    : code_(code),
      message_(std::move(message)),
      context_(std::move(context)),
      field_(std::move(field)) {}

Status Status::annotate(std::string_view what) const {
  if (is_ok()) return *this;
  Status s = *this;
  s.message_ = std::string(what) + ": " + message_;
  return s;
}

Status Status::with_field(std::string field) const {
  Status s = *this;
  s.field_ = std::move(field);
  return s;
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  std::string out(code_name(code_));
  out += ": ";
  out += message_;
  if (!context_.empty()) out += " [" + context_ + "]";
  if (!field_.empty()) out += " (field " + field_ + ")";
  return out;
}

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return 200;
    case ErrorCode::kInvalidArgument:
      return 400;
    case ErrorCode::kUnauthenticated:
      return 401;
    case ErrorCode::kPermissionDenied:
      return 403;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kMethodNotAllowed:
      return 405;
    case ErrorCode::kConflict:
      return 409;
    case ErrorCode::kRequestTimeout:
      return 408;
    case ErrorCode::kPayloadTooLarge:
      return 413;
    case ErrorCode::kUnsupportedMediaType:
      return 415;
    case ErrorCode::kUnprocessable:
      return 422;
    case ErrorCode::kResourceExhausted:
      return 429;
    case ErrorCode::kInternal:
      return 500;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kTimeout:
      return 504;
  }
  return 500;
}

ErrorCode code_from_http(int status) {
  switch (status) {
    case 200:
    case 201:
    case 202:
    case 204:
      return ErrorCode::kOk;
    case 400:
      return ErrorCode::kInvalidArgument;
    case 401:
      return ErrorCode::kUnauthenticated;
    case 403:
      return ErrorCode::kPermissionDenied;
    case 404:
      return ErrorCode::kNotFound;
    case 405:
      return ErrorCode::kMethodNotAllowed;
    case 408:
      return ErrorCode::kRequestTimeout;
    case 409:
      return ErrorCode::kConflict;
    case 413:
      return ErrorCode::kPayloadTooLarge;
    case 415:
      return ErrorCode::kUnsupportedMediaType;
    case 422:
      return ErrorCode::kUnprocessable;
    case 429:
      return ErrorCode::kResourceExhausted;
    case 503:
      return ErrorCode::kUnavailable;
    case 504:
      return ErrorCode::kTimeout;
    default:
      return ErrorCode::kInternal;
  }
}

std::string_view code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kInvalidArgument:
      return "invalid-argument";
    case ErrorCode::kUnauthenticated:
      return "unauthenticated";
    case ErrorCode::kPermissionDenied:
      return "permission-denied";
    case ErrorCode::kNotFound:
      return "not-found";
    case ErrorCode::kMethodNotAllowed:
      return "method-not-allowed";
    case ErrorCode::kConflict:
      return "conflict";
    case ErrorCode::kRequestTimeout:
      return "request-timeout";
    case ErrorCode::kPayloadTooLarge:
      return "payload-too-large";
    case ErrorCode::kUnsupportedMediaType:
      return "unsupported-media-type";
    case ErrorCode::kUnprocessable:
      return "unprocessable";
    case ErrorCode::kResourceExhausted:
      return "resource-exhausted";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kTimeout:
      return "timeout";
  }
  return "internal";
}

Status invalid_argument(std::string field, std::string message) {
  return {ErrorCode::kInvalidArgument, std::move(message), {}, std::move(field)};
}
Status not_found(std::string message, std::string context) {
  return {ErrorCode::kNotFound, std::move(message), std::move(context)};
}
Status conflict(std::string message, std::string context) {
  return {ErrorCode::kConflict, std::move(message), std::move(context)};
}
Status unavailable(std::string message, std::string context) {
  return {ErrorCode::kUnavailable, std::move(message), std::move(context)};
}
Status internal_error(std::string message, std::string context) {
  return {ErrorCode::kInternal, std::move(message), std::move(context)};
}

}  // namespace armhive
