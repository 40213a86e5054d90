#pragma once

#include <string_view>

#include "base/result.h"

namespace armhive {

// The secret of an `Authorization: Bearer <secret>` header, as every armhived API reads it (the
// leader's pipeline and a standby's server): kUnauthenticated, in the words clients are shown,
// when the header is missing or not a bearer token. The view points into `authorization`. Pure.
Result<std::string_view> bearer_secret(std::string_view authorization);

}  // namespace armhive
