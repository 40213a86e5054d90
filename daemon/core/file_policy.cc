#include "daemon/core/file_policy.h"

#include <vector>

namespace armhive {
namespace {

// Splits an absolute path into its segments, refusing what could escape or confuse.
Result<std::string> normal_form(const std::string& field, std::string_view path) {
  if (path.empty()) return invalid_argument(field, "is required");
  if (path.front() != '/') return invalid_argument(field, "must be an absolute path");
  for (char c : path) {
    if (c == '\0') return invalid_argument(field, "must not contain NUL");
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return invalid_argument(field, "must not contain control characters");
    }
  }
  std::string out;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view seg = path.substr(i, j - i);
    if (seg == "." || seg == "..") {
      return invalid_argument(field, "must not contain \".\" or \"..\" segments");
    }
    if (!seg.empty()) {
      out += '/';
      out += seg;
    }
    i = j + 1;
  }
  if (out.empty()) out = "/";
  return out;
}

}  // namespace

Result<std::string> check_guest_path(const FilePolicy& policy, std::string_view path) {
  ARMHIVE_ASSIGN_OR_RETURN(std::string p, normal_form("path", path));
  const std::string& prefix = policy.path_prefix;
  const bool inside = prefix == "/" || p == prefix ||
                      (p.size() > prefix.size() && p.compare(0, prefix.size(), prefix) == 0 &&
                       p[prefix.size()] == '/');
  if (!inside) {
    return Status(ErrorCode::kPermissionDenied,
                  "'" + p + "' is outside the pool's files.path_prefix '" + prefix + "'", {},
                  "path");
  }
  return p;
}

Status check_transfer_size(const FilePolicy& policy, const std::string& pool, uint64_t bytes) {
  if (bytes <= policy.max_bytes) return Status::ok();
  return Status(ErrorCode::kPayloadTooLarge,
                std::to_string(bytes) + " bytes exceed pool '" + pool + "''s files.max_bytes of " +
                    std::to_string(policy.max_bytes) + " bytes",
                pool, "files.max_bytes");
}

Result<std::string> normalize_path_prefix(const std::string& field, std::string_view prefix) {
  return normal_form(field, prefix);
}

}  // namespace armhive
