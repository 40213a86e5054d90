#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace armhive {

// Standard base64 (RFC 4648 alphabet, '=' padding), the one codec for API bodies and guest
// agent payloads. Pure; any thread.
std::string base64_encode(std::string_view bytes);
// Strict: length a multiple of 4, padding only at the end. kInvalidArgument naming `field`.
Result<std::string> base64_decode(std::string_view field, std::string_view text);

}  // namespace armhive
