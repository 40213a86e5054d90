#include "daemon/virt/guest_agent_reply.h"

#include <cstdint>
#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "base/json_depth.h"

namespace armhive {
namespace {

using json = nlohmann::json;

Result<json> reply_document(std::string_view reply, const char* command) {
  // The guest writes the reply: bound its nesting before nlohmann builds it.
  if (Status s = check_json_depth(reply, "reply"); !s.is_ok()) {
    return internal_error(std::string("the guest agent's ") + command + " reply " + s.message());
  }
  json doc = json::parse(reply.begin(), reply.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return internal_error(std::string("the guest agent's ") + command + " reply is not JSON");
  }
  if (!doc.is_object()) {
    return internal_error(std::string("the guest agent's ") + command +
                          " reply is not a JSON object");
  }
  return doc;
}

Result<json> reply_return(std::string_view reply, const char* command) {
  ARMHIVE_ASSIGN_OR_RETURN(json doc, reply_document(reply, command));
  auto r = doc.find("return");
  if (r == doc.end() || !r->is_object()) {
    return internal_error(std::string("the guest agent's ") + command +
                          " reply has no \"return\" object");
  }
  return *r;
}

// An integer member in [lo, hi]; absent gives `fallback` when it has one.
Result<int64_t> integer_member(const json& r, const char* key, int64_t lo, int64_t hi,
                               std::optional<int64_t> fallback, const char* command) {
  auto it = r.find(key);
  if (it == r.end()) {
    if (fallback) return *fallback;
    return internal_error(std::string("the guest agent's ") + command + " reply has no \"" + key +
                          "\"");
  }
  int64_t v = 0;
  if (it->is_number_unsigned()) {
    uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(hi))
      v = hi + 1;  // out of range below
    else
      v = static_cast<int64_t>(u);
  } else if (it->is_number_integer()) {
    v = it->get<int64_t>();
  } else {
    return internal_error(std::string("the guest agent's ") + command + " reply: \"" + key +
                          "\" is not an integer");
  }
  if (v < lo || v > hi) {
    return internal_error(std::string("the guest agent's ") + command + " reply: \"" + key +
                          "\" is out of range (" + std::to_string(lo) + ".." + std::to_string(hi) +
                          ")");
  }
  return v;
}

Result<bool> bool_member(const json& r, const char* key, const char* command) {
  auto it = r.find(key);
  if (it == r.end()) return false;
  if (!it->is_boolean()) {
    return internal_error(std::string("the guest agent's ") + command + " reply: \"" + key +
                          "\" is not a boolean");
  }
  return it->get<bool>();
}

Result<std::string> data_member(const json& r, const char* key, const char* command) {
  auto it = r.find(key);
  if (it == r.end()) return std::string();
  if (!it->is_string()) {
    return internal_error(std::string("the guest agent's ") + command + " reply: \"" + key +
                          "\" is not a string");
  }
  auto decoded = base64_decode(key, it->get_ref<const std::string&>());
  if (!decoded.is_ok()) {
    return internal_error(std::string("the guest agent's ") + command + " reply: \"" + key +
                          "\" is not base64");
  }
  return decoded;
}

}  // namespace

Result<int64_t> parse_guest_exec_started(std::string_view reply) {
  ARMHIVE_ASSIGN_OR_RETURN(json r, reply_return(reply, "guest-exec"));
  return integer_member(r, "pid", 1, INT32_MAX, std::nullopt, "guest-exec");
}

Result<std::optional<GuestExecResult>> parse_guest_exec_status(std::string_view reply) {
  constexpr const char* kCommand = "guest-exec-status";
  ARMHIVE_ASSIGN_OR_RETURN(json r, reply_return(reply, kCommand));
  ARMHIVE_ASSIGN_OR_RETURN(bool exited, bool_member(r, "exited", kCommand));
  if (!exited) return std::optional<GuestExecResult>();
  GuestExecResult result;
  // A process killed by a signal has no exit code: -1 says "none".
  ARMHIVE_ASSIGN_OR_RETURN(int64_t code, integer_member(r, "exitcode", -1, 255, -1, kCommand));
  ARMHIVE_ASSIGN_OR_RETURN(int64_t signal, integer_member(r, "signal", 0, 255, 0, kCommand));
  result.exit_code = static_cast<int>(code);
  result.signal = static_cast<int>(signal);
  ARMHIVE_ASSIGN_OR_RETURN(result.out, data_member(r, "out-data", kCommand));
  ARMHIVE_ASSIGN_OR_RETURN(result.err, data_member(r, "err-data", kCommand));
  ARMHIVE_ASSIGN_OR_RETURN(bool out_truncated, bool_member(r, "out-truncated", kCommand));
  ARMHIVE_ASSIGN_OR_RETURN(bool err_truncated, bool_member(r, "err-truncated", kCommand));
  result.out_truncated = out_truncated || err_truncated;
  return std::optional<GuestExecResult>(std::move(result));
}

Result<int64_t> parse_guest_file_open(std::string_view reply) {
  constexpr const char* kCommand = "guest-file-open";
  ARMHIVE_ASSIGN_OR_RETURN(json doc, reply_document(reply, kCommand));
  // The handle is the bare "return" value; wrap it to reuse the range check.
  auto r = doc.find("return");
  if (r == doc.end())
    return internal_error("the guest agent's guest-file-open reply has no \"return\"");
  json wrapped = {{"handle", *r}};
  return integer_member(wrapped, "handle", 0, INT64_MAX - 1, std::nullopt, kCommand);
}

Result<GuestFileChunk> parse_guest_file_read(std::string_view reply, size_t max_count) {
  constexpr const char* kCommand = "guest-file-read";
  ARMHIVE_ASSIGN_OR_RETURN(json r, reply_return(reply, kCommand));
  ARMHIVE_ASSIGN_OR_RETURN(
      int64_t count,
      integer_member(r, "count", 0, static_cast<int64_t>(max_count), std::nullopt, kCommand));
  GuestFileChunk chunk;
  ARMHIVE_ASSIGN_OR_RETURN(chunk.data, data_member(r, "buf-b64", kCommand));
  ARMHIVE_ASSIGN_OR_RETURN(chunk.eof, bool_member(r, "eof", kCommand));
  if (chunk.data.size() != static_cast<size_t>(count)) {
    return internal_error("the guest agent's guest-file-read reply: \"count\" is " +
                          std::to_string(count) + " but \"buf-b64\" holds " +
                          std::to_string(chunk.data.size()) + " bytes");
  }
  return chunk;
}

Status parse_guest_file_write(std::string_view reply, size_t written) {
  constexpr const char* kCommand = "guest-file-write";
  ARMHIVE_ASSIGN_OR_RETURN(json r, reply_return(reply, kCommand));
  ARMHIVE_ASSIGN_OR_RETURN(int64_t count,
                           integer_member(r, "count", 0, INT64_MAX - 1, std::nullopt, kCommand));
  if (static_cast<uint64_t>(count) != written) {
    return internal_error("the guest agent's guest-file-write reply: \"count\" is " +
                          std::to_string(count) + " for a write of " + std::to_string(written) +
                          " bytes");
  }
  return Status::ok();
}

}  // namespace armhive
