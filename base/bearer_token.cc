#include "base/bearer_token.h"

namespace armhive {

Result<std::string_view> bearer_secret(std::string_view authorization) {
  if (authorization.empty()) {
    return Status(ErrorCode::kUnauthenticated,
                  "missing bearer token: send \"Authorization: Bearer ah_...\" "
                  "(create one with `armhived token create NAME --role ci`)");
  }
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() ||
      authorization.substr(0, kBearer.size()) != kBearer) {
    return Status(ErrorCode::kUnauthenticated,
                  "the Authorization header must be \"Bearer <token>\"");
  }
  return authorization.substr(kBearer.size());
}

}  // namespace armhive
