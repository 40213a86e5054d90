#pragma once

#include <string>
#include <string_view>

namespace armhive {

// RFC 3986 percent-encoding of one path segment or query value: every byte but the unreserved
// ones (ALPHA, DIGIT, '-', '.', '_', '~') becomes %XX (upper-case hex), '/' included, so a value
// can never add a segment or a parameter. Locale-independent.
std::string url_encode(std::string_view s);

}  // namespace armhive
