#pragma once

#include <string_view>

#include "base/status.h"

namespace armhive {

// libvirt keeps its last error per thread. Call libvirt_error() on the same thread, right after
// the failing libvirt call, before any other libvirt call can overwrite it.
//
// Mapping: VIR_ERR_NO_DOMAIN (and the other "no such object" codes) -> kNotFound;
// VIR_ERR_OPERATION_INVALID -> kConflict (e.g. the domain is not running);
// VIR_ERR_AGENT_UNRESPONSIVE / VIR_ERR_OPERATION_TIMEOUT -> kTimeout;
// VIR_ERR_AGENT_UNSYNCED -> kUnavailable;
// connection and RPC errors -> kUnavailable; XML errors -> kInvalidArgument;
// VIR_ERR_NO_SUPPORT -> kUnprocessable; anything else -> kInternal.
//
// The Status message reads "<operation>: <libvirt message>"; its context names `object`
// (normally the domain name).
Status libvirt_error(std::string_view operation, std::string_view object = {});

// The ErrorCode for a libvirt virErrorNumber (exposed for tests).
ErrorCode libvirt_error_code(int vir_error_number);

// Once per process, in libvirt's required order: virInitialize(), replace the default error
// printer (which writes every error to stderr) with a no-op, and virEventRegisterDefaultImpl()
// (which must precede the first connection for events and keepalive to work). Thread-safe;
// later calls do nothing. Connection::open() and EventLoop::start() call it.
Status init_libvirt();

}  // namespace armhive
