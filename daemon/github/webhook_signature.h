#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace armhive {

// GitHub's webhook signature: X-Hub-Signature-256 = "sha256=" + lowercase hex of
// HMAC-SHA256(secret, raw body). Pure (OpenSSL), any thread.

// "sha256=<64 hex>" for `body` under `secret`.
std::string webhook_signature(std::string_view secret, std::string_view body);

// kUnauthenticated (field "X-Hub-Signature-256") unless `header` is the signature of `body`
// under `secret`. The comparison takes the same time wherever the first difference is
// (CRYPTO_memcmp over the full digest); an empty secret verifies nothing.
Status verify_webhook_signature(std::string_view secret, std::string_view body,
                                std::string_view header);

}  // namespace armhive
