#include "daemon/virt/error.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <mutex>
#include <string>

namespace armhive {

namespace {

void ignore_error(void* /*user_data*/, virErrorPtr /*error*/) {}

}  // namespace

ErrorCode libvirt_error_code(int number) {
  switch (number) {
    case VIR_ERR_OK:
      return ErrorCode::kInternal;
    case VIR_ERR_NO_DOMAIN:
    case VIR_ERR_NO_NETWORK:
    case VIR_ERR_NO_STORAGE_POOL:
    case VIR_ERR_NO_STORAGE_VOL:
    case VIR_ERR_NO_DOMAIN_METADATA:
    case VIR_ERR_NO_DOMAIN_SNAPSHOT:
    case VIR_ERR_NO_SECRET:
    case VIR_ERR_NO_NODE_DEVICE:
    case VIR_ERR_NO_NWFILTER:
      return ErrorCode::kNotFound;
    case VIR_ERR_OPERATION_INVALID:
      return ErrorCode::kConflict;
    case VIR_ERR_AGENT_UNRESPONSIVE:
    case VIR_ERR_OPERATION_TIMEOUT:
      return ErrorCode::kTimeout;
    case VIR_ERR_AGENT_UNSYNCED:
    case VIR_ERR_NO_CONNECT:
    case VIR_ERR_INVALID_CONN:
    case VIR_ERR_SYSTEM_ERROR:
    case VIR_ERR_RPC:
    case VIR_ERR_AUTH_FAILED:
    case VIR_ERR_AUTH_UNAVAILABLE:
    case VIR_ERR_AUTH_CANCELLED:
    case VIR_ERR_OPERATION_ABORTED:
    case VIR_ERR_RESOURCE_BUSY:
      return ErrorCode::kUnavailable;
    case VIR_ERR_XML_ERROR:
    case VIR_ERR_XML_DETAIL:
    case VIR_ERR_XML_INVALID_SCHEMA:
    case VIR_ERR_INVALID_ARG:
    case VIR_ERR_CONFIG_UNSUPPORTED:
      return ErrorCode::kInvalidArgument;
    case VIR_ERR_NO_SUPPORT:
    case VIR_ERR_ARGUMENT_UNSUPPORTED:
      return ErrorCode::kUnprocessable;
    default:
      return ErrorCode::kInternal;
  }
}

Status libvirt_error(std::string_view operation, std::string_view object) {
  virErrorPtr err = virGetLastError();
  std::string op(operation);
  if (err == nullptr || err->code == VIR_ERR_OK) {
    return Status(ErrorCode::kInternal, op + ": libvirt reported no error", std::string(object));
  }
  std::string message =
      op + ": " + (err->message != nullptr ? err->message : "unknown libvirt error");
  ErrorCode code = libvirt_error_code(err->code);
  virResetLastError();
  return Status(code, std::move(message), std::string(object));
}

Status init_libvirt() {
  static std::once_flag once;
  static int rc = 0;
  std::call_once(once, [] {
    rc = virInitialize();
    virSetErrorFunc(nullptr, ignore_error);
    if (rc == 0) rc = virEventRegisterDefaultImpl();
  });
  if (rc != 0)
    return internal_error(
        "libvirt initialisation (virInitialize, virEventRegisterDefaultImpl) failed");
  return Status::ok();
}

}  // namespace armhive
