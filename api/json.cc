#include "api/json.h"

#include <initializer_list>
#include <limits>
#include <set>

#include "api/startup_json.h"
#include "base/base64.h"
#include "base/json_depth.h"
#include "base/json_reader.h"
#include "base/utf8.h"
#include "base/validation.h"

namespace armhive {
namespace {

using nlohmann::json;

Result<int64_t> ttl_from_json(const json& v, const std::string& field) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kMaxTtlSeconds)) {
      return invalid_argument(field,
                              "must be at most 30 days (" + std::to_string(kMaxTtlSeconds) + " s)");
    }
    int64_t s = v.get<int64_t>();
    ARMHIVE_RETURN_IF_ERROR(check_ttl(field, s));
    return s;
  }
  if (v.is_string()) {
    ARMHIVE_ASSIGN_OR_RETURN(int64_t s, parse_duration(field, v.get<std::string>()));
    ARMHIVE_RETURN_IF_ERROR(check_ttl(field, s));
    return s;
  }
  return invalid_argument(
      field, "must be a number of seconds or a duration string like \"2h\" or \"90m\"");
}

// Output bytes: text when valid UTF-8, else base64 under `<key>_base64`.
void put_bytes(json& j, const std::string& key, const std::string& bytes) {
  if (is_valid_utf8(bytes)) {
    j[key] = bytes;
  } else {
    j[key + "_base64"] = base64_encode(bytes);
  }
}

Status get_bytes(const JsonReader& r, const std::string& key, std::string& out) {
  std::string text, b64;
  ARMHIVE_RETURN_IF_ERROR(r.str(key, text));
  ARMHIVE_RETURN_IF_ERROR(r.str(key + "_base64", b64));
  if (!text.empty() && !b64.empty()) {
    return invalid_argument(r.field(key), "give either " + key + " or " + key + "_base64");
  }
  if (!b64.empty()) {
    ARMHIVE_ASSIGN_OR_RETURN(out, base64_decode(r.field(key + "_base64"), b64));
  } else {
    out = std::move(text);
  }
  return Status::ok();
}

template <typename T>
json optional_string(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

Status parse_vm(const json& j, const std::string& prefix, VmDto& vm) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.str("name", vm.name));
  ARMHIVE_RETURN_IF_ERROR(r.str("address", vm.address));
  ARMHIVE_RETURN_IF_ERROR(r.str("login_user", vm.login_user));
  ARMHIVE_RETURN_IF_ERROR(r.int_list("cpus", vm.cpus));
  ARMHIVE_RETURN_IF_ERROR(r.str("host", vm.host));
  return Status::ok();
}

Status parse_ssh(const json& j, const std::string& prefix, SshDto& ssh) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.str("user", ssh.user));
  ARMHIVE_RETURN_IF_ERROR(r.str("host", ssh.host));
  ARMHIVE_RETURN_IF_ERROR(r.integer("port", ssh.port));
  ARMHIVE_RETURN_IF_ERROR(r.str("command", ssh.command));
  ARMHIVE_RETURN_IF_ERROR(r.str_list("host_keys", ssh.host_keys));
  ARMHIVE_RETURN_IF_ERROR(r.str("known_hosts", ssh.known_hosts));
  ARMHIVE_RETURN_IF_ERROR(r.str("host_key_alias", ssh.host_key_alias));
  return Status::ok();
}

Status parse_forward(const json& j, const std::string& prefix, PortForwardDto& f) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.integer("guest_port", f.guest_port));
  ARMHIVE_RETURN_IF_ERROR(r.str("host", f.host));
  ARMHIVE_RETURN_IF_ERROR(r.integer("port", f.port));
  return Status::ok();
}

Status parse_transition(const json& j, const std::string& prefix, TransitionDto& t) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.str("from", t.from));
  ARMHIVE_RETURN_IF_ERROR(r.str("to", t.to));
  ARMHIVE_RETURN_IF_ERROR(r.str("at", t.at));
  ARMHIVE_RETURN_IF_ERROR(r.str("reason", t.reason));
  return Status::ok();
}

Status parse_lease(const json& j, const std::string& prefix, LeaseDto& l) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.str("id", l.id, true));
  ARMHIVE_RETURN_IF_ERROR(r.str("pool", l.pool));
  ARMHIVE_RETURN_IF_ERROR(r.str("owner", l.owner));
  ARMHIVE_RETURN_IF_ERROR(r.str("state", l.state, true));
  ARMHIVE_RETURN_IF_ERROR(r.str("reason", l.reason));
  ARMHIVE_RETURN_IF_ERROR(r.str("purpose", l.purpose));
  ARMHIVE_RETURN_IF_ERROR(r.str_map("labels", l.labels));
  ARMHIVE_RETURN_IF_ERROR(r.str("created_at", l.created_at));
  ARMHIVE_RETURN_IF_ERROR(r.opt_str("ready_at", l.ready_at));
  ARMHIVE_RETURN_IF_ERROR(r.str("expires_at", l.expires_at));
  ARMHIVE_RETURN_IF_ERROR(r.opt_str("ended_at", l.ended_at));
  ARMHIVE_RETURN_IF_ERROR(r.integer("ttl_seconds", l.ttl_seconds));
  ARMHIVE_RETURN_IF_ERROR(r.boolean("warm_handout", l.warm_handout));
  if (const json* vm = r.find("vm")) {
    VmDto v;
    ARMHIVE_RETURN_IF_ERROR(parse_vm(*vm, r.field("vm"), v));
    l.vm = std::move(v);
  }
  if (const json* ssh = r.find("ssh")) {
    SshDto s;
    ARMHIVE_RETURN_IF_ERROR(parse_ssh(*ssh, r.field("ssh"), s));
    l.ssh = std::move(s);
  }
  ARMHIVE_RETURN_IF_ERROR(r.objects("forwards", l.forwards, parse_forward));
  if (const json* startup = r.find("startup")) {
    StartupStatusDto s;
    ARMHIVE_RETURN_IF_ERROR(parse_startup_status(*startup, r.field("startup"), s));
    l.startup = std::move(s);
  }
  if (const json* queue = r.find("queue")) {
    JsonReader q(*queue, r.field("queue"));
    ARMHIVE_RETURN_IF_ERROR(q.require_object());
    LeaseQueueDto dto;
    ARMHIVE_RETURN_IF_ERROR(q.integer("position", dto.position, true));
    ARMHIVE_RETURN_IF_ERROR(q.str("reason", dto.reason, true));
    l.queue = std::move(dto);
  }
  if (const json* usage = r.find("usage")) {
    JsonReader u(*usage, r.field("usage"));
    ARMHIVE_RETURN_IF_ERROR(u.require_object());
    LeaseUsageDto dto;
    ARMHIVE_RETURN_IF_ERROR(u.number("cpu_seconds", dto.cpu_seconds));
    ARMHIVE_RETURN_IF_ERROR(u.number("wall_seconds", dto.wall_seconds));
    ARMHIVE_RETURN_IF_ERROR(u.integer("peak_memory_bytes", dto.peak_memory_bytes));
    ARMHIVE_RETURN_IF_ERROR(u.integer("disk_write_bytes", dto.disk_write_bytes));
    ARMHIVE_RETURN_IF_ERROR(u.integer("net_rx_bytes", dto.net_rx_bytes));
    ARMHIVE_RETURN_IF_ERROR(u.integer("net_tx_bytes", dto.net_tx_bytes));
    ARMHIVE_RETURN_IF_ERROR(u.str("sampled_at", dto.sampled_at));
    ARMHIVE_RETURN_IF_ERROR(u.boolean("final", dto.final));
    l.usage = std::move(dto);
  }
  ARMHIVE_RETURN_IF_ERROR(r.objects("history", l.history, parse_transition));
  return Status::ok();
}

}  // namespace

namespace {

// Finds the first member name that occurs twice in one object, as a field path ("pool",
// "labels.team", "items[2].name"). nlohmann keeps the last duplicate silently; its parser
// callback sees every key with the nesting, which is all this needs. A frame holds only its own
// key or index: the path is joined from the frames only when a duplicate is reported (copying
// the parent's path into every frame made deep nesting quadratic, issue 33 finding 1).
class DuplicateKeyFinder {
 public:
  bool on(int /*depth*/, json::parse_event_t event, const json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        frames_.push_back({event == json::parse_event_t::object_start, {}, {}, 0});
        break;
      case json::parse_event_t::key: {
        Frame& f = frames_.back();
        f.key = parsed.is_string() ? parsed.get<std::string>() : std::string();
        if (!f.keys.insert(f.key).second && duplicate_.empty()) duplicate_ = path();
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!frames_.empty()) frames_.pop_back();
        element_done();
        break;
      case json::parse_event_t::value:
        element_done();
        break;
    }
    return true;
  }
  const std::string& duplicate() const { return duplicate_; }

 private:
  struct Frame {
    bool object = false;
    std::set<std::string> keys;
    std::string key;
    size_t index = 0;
  };
  // The path of the member or element being parsed, from the outermost frame in.
  std::string path() const {
    std::string out;
    for (const Frame& f : frames_) {
      if (f.object) {
        out += out.empty() ? f.key : "." + f.key;
      } else {
        out += "[" + std::to_string(f.index) + "]";
      }
    }
    return out;
  }
  void element_done() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }
  std::vector<Frame> frames_;
  std::string duplicate_;
};

}  // namespace

Result<json> parse_json(std::string_view text, std::string_view field) {
  // Before nlohmann sees it: the parser's cost grows with the nesting (base/json_depth.h).
  ARMHIVE_RETURN_IF_ERROR(check_json_depth(text, field));
  DuplicateKeyFinder finder;
  json j = json::parse(
      text,
      [&finder](int depth, json::parse_event_t event, json& parsed) {
        return finder.on(depth, event, parsed);
      },
      /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // nlohmann reports the position only through the exception, which we catch here at the
    // call site.
    try {
      json again = json::parse(text);
      (void)again;
    } catch (const json::parse_error& e) {
      return invalid_argument(std::string(field),
                              "is not valid JSON (at byte " + std::to_string(e.byte) + ")");
    } catch (const std::exception&) {
    }
    return invalid_argument(std::string(field), "is not valid JSON");
  }
  if (!finder.duplicate().empty()) {
    return invalid_argument(finder.duplicate(),
                            "appears twice in one object (send each member once)");
  }
  return j;
}

std::string dump_json(const json& j, int indent) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

json to_json(const LeaseCreateRequest& r) {
  json j = {
      {"pool", r.pool}, {"ssh_keys", r.ssh_keys}, {"labels", r.labels}, {"purpose", r.purpose}};
  if (r.ttl_seconds) j["ttl"] = *r.ttl_seconds;
  if (!r.ports.empty()) j["ports"] = r.ports;
  if (r.startup) j["startup"] = to_json(*r.startup);
  return j;
}

Result<LeaseCreateRequest> lease_create_from_json(const json& j) {
  JsonReader r(j, "");
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(
      r.only({"pool", "ttl", "ssh_keys", "labels", "purpose", "ports", "startup"}));
  LeaseCreateRequest out;
  ARMHIVE_RETURN_IF_ERROR(r.str("pool", out.pool, true));
  ARMHIVE_RETURN_IF_ERROR(check_name("pool", out.pool));
  if (const json* ttl = r.find("ttl")) {
    ARMHIVE_ASSIGN_OR_RETURN(int64_t s, ttl_from_json(*ttl, "ttl"));
    out.ttl_seconds = s;
  }
  ARMHIVE_RETURN_IF_ERROR(r.str_list("ssh_keys", out.ssh_keys));
  if (out.ssh_keys.size() > kMaxSshKeys) {
    return invalid_argument("ssh_keys", "at most " + std::to_string(kMaxSshKeys) + " keys");
  }
  for (size_t i = 0; i < out.ssh_keys.size(); ++i) {
    ARMHIVE_RETURN_IF_ERROR(check_ssh_key("ssh_keys[" + std::to_string(i) + "]", out.ssh_keys[i]));
  }
  ARMHIVE_RETURN_IF_ERROR(r.str_map("labels", out.labels));
  ARMHIVE_RETURN_IF_ERROR(check_labels("labels", out.labels));
  ARMHIVE_RETURN_IF_ERROR(r.str("purpose", out.purpose));
  if (out.purpose != "ci" && out.purpose != "dev") {
    return invalid_argument("purpose", "must be \"ci\" or \"dev\"");
  }
  ARMHIVE_RETURN_IF_ERROR(r.int_list("ports", out.ports));
  for (size_t i = 0; i < out.ports.size(); ++i) {
    if (out.ports[i] < 1 || out.ports[i] > 65535) {
      return invalid_argument("ports[" + std::to_string(i) + "]", "must be a TCP port, 1-65535");
    }
  }
  if (const json* startup = r.find("startup")) {
    ARMHIVE_ASSIGN_OR_RETURN(out.startup, startup_request_from_json(*startup, "startup"));
  }
  return out;
}

json to_json(const LeaseRenewRequest& r) { return {{"ttl", r.ttl_seconds}}; }

Result<LeaseRenewRequest> lease_renew_from_json(const json& j) {
  JsonReader r(j, "");
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.only({"ttl"}));
  const json* ttl = r.find("ttl");
  if (ttl == nullptr) return r.missing("ttl");
  LeaseRenewRequest out;
  ARMHIVE_ASSIGN_OR_RETURN(out.ttl_seconds, ttl_from_json(*ttl, "ttl"));
  return out;
}

json to_json(const SshCertificateRequest& r) { return {{"public_key", r.public_key}}; }

Result<SshCertificateRequest> ssh_certificate_request_from_json(const json& j) {
  JsonReader r(j, "");
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.only({"public_key"}));
  SshCertificateRequest out;
  ARMHIVE_RETURN_IF_ERROR(r.str("public_key", out.public_key, /*required=*/true));
  return out;
}

json to_json(const FileTransferDto& f) {
  return {{"path", f.path}, {"kind", f.kind}, {"bytes", f.bytes}, {"sha256", f.sha256}};
}

Result<FileTransferDto> file_transfer_from_json(const json& j) {
  JsonReader r(j, "");
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  FileTransferDto f;
  ARMHIVE_RETURN_IF_ERROR(r.str("path", f.path, true));
  ARMHIVE_RETURN_IF_ERROR(r.str("kind", f.kind, true));
  ARMHIVE_RETURN_IF_ERROR(r.integer("bytes", f.bytes));
  ARMHIVE_RETURN_IF_ERROR(r.str("sha256", f.sha256, true));
  return f;
}

json to_json(const SshCertificateDto& c) {
  return {{"certificate", c.certificate},
          {"user", c.user},
          {"principal", c.principal},
          {"key_id", c.key_id},
          {"serial", c.serial},
          {"valid_after", c.valid_after},
          {"valid_before", c.valid_before}};
}

Result<SshCertificateDto> ssh_certificate_from_json(const json& j) {
  JsonReader r(j, "");
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  SshCertificateDto c;
  ARMHIVE_RETURN_IF_ERROR(r.str("certificate", c.certificate, true));
  ARMHIVE_RETURN_IF_ERROR(r.str("user", c.user));
  ARMHIVE_RETURN_IF_ERROR(r.str("principal", c.principal));
  ARMHIVE_RETURN_IF_ERROR(r.str("key_id", c.key_id));
  ARMHIVE_RETURN_IF_ERROR(r.integer("serial", c.serial));
  ARMHIVE_RETURN_IF_ERROR(r.str("valid_after", c.valid_after));
  ARMHIVE_RETURN_IF_ERROR(r.str("valid_before", c.valid_before));
  return c;
}

json to_json(const ExecRequestDto& r) {
  json j = {{"argv", r.argv}, {"timeout_s", r.timeout_s}};
  if (!r.stdin_data.empty()) put_bytes(j, "stdin", r.stdin_data);
  return j;
}

Result<ExecRequestDto> exec_request_from_json(const json& j) {
  JsonReader r(j, "");
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.only({"argv", "stdin", "stdin_base64", "timeout_s"}));
  ExecRequestDto out;
  if (r.find("argv") == nullptr) return r.missing("argv");
  ARMHIVE_RETURN_IF_ERROR(r.str_list("argv", out.argv));
  if (out.argv.empty()) return invalid_argument("argv", "must name a program");
  if (out.argv.size() > 4096) return invalid_argument("argv", "at most 4096 arguments");
  if (out.argv[0].empty()) return invalid_argument("argv[0]", "must not be empty");
  for (size_t i = 0; i < out.argv.size(); ++i) {
    if (out.argv[i].find('\0') != std::string::npos) {
      return invalid_argument("argv[" + std::to_string(i) + "]", "must not contain NUL");
    }
  }
  ARMHIVE_RETURN_IF_ERROR(get_bytes(r, "stdin", out.stdin_data));
  out.timeout_given = r.find("timeout_s") != nullptr;
  ARMHIVE_RETURN_IF_ERROR(r.integer("timeout_s", out.timeout_s));
  if (out.timeout_s <= 0 || out.timeout_s > kMaxExecTimeoutSeconds) {
    return invalid_argument("timeout_s",
                            "must be between 1 and " + std::to_string(kMaxExecTimeoutSeconds));
  }
  return out;
}

json to_json(const LeaseUsageDto& u) {
  return {{"cpu_seconds", u.cpu_seconds},
          {"wall_seconds", u.wall_seconds},
          {"peak_memory_bytes", u.peak_memory_bytes},
          {"disk_write_bytes", u.disk_write_bytes},
          {"net_rx_bytes", u.net_rx_bytes},
          {"net_tx_bytes", u.net_tx_bytes},
          {"sampled_at", u.sampled_at},
          {"final", u.final}};
}

json to_json(const LeaseDto& l) {
  json j = {{"id", l.id},
            {"pool", l.pool},
            {"owner", l.owner},
            {"state", l.state},
            {"reason", l.reason},
            {"purpose", l.purpose},
            {"labels", l.labels},
            {"created_at", l.created_at},
            {"ready_at", optional_string(l.ready_at)},
            {"expires_at", l.expires_at},
            {"ended_at", optional_string(l.ended_at)},
            {"ttl_seconds", l.ttl_seconds},
            {"warm_handout", l.warm_handout},
            {"vm", nullptr},
            {"ssh", nullptr},
            {"history", json::array()}};
  if (l.vm) {
    j["vm"] = {{"name", l.vm->name},
               {"address", l.vm->address},
               {"login_user", l.vm->login_user},
               {"cpus", l.vm->cpus},
               {"host", l.vm->host}};
  }
  if (l.ssh) {
    j["ssh"] = {{"user", l.ssh->user},
                {"host", l.ssh->host},
                {"port", l.ssh->port},
                {"command", l.ssh->command},
                {"host_keys", l.ssh->host_keys},
                {"known_hosts", l.ssh->known_hosts},
                {"host_key_alias", l.ssh->host_key_alias}};
  }
  if (!l.forwards.empty()) {
    j["forwards"] = json::array();
    for (const auto& f : l.forwards) {
      j["forwards"].push_back({{"guest_port", f.guest_port}, {"host", f.host}, {"port", f.port}});
    }
  }
  if (l.startup) j["startup"] = to_json(*l.startup);
  if (l.queue) j["queue"] = {{"position", l.queue->position}, {"reason", l.queue->reason}};
  if (l.usage) j["usage"] = to_json(*l.usage);
  for (const auto& t : l.history) {
    j["history"].push_back({{"from", t.from}, {"to", t.to}, {"at", t.at}, {"reason", t.reason}});
  }
  return j;
}

Result<LeaseDto> lease_from_json(const json& j) {
  LeaseDto l;
  ARMHIVE_RETURN_IF_ERROR(parse_lease(j, "", l));
  return l;
}

json to_json(const LeasePage& p) {
  json items = json::array();
  for (const auto& l : p.items) items.push_back(to_json(l));
  return {{"items", std::move(items)},
          {"next_cursor", p.next_cursor.empty() ? json(nullptr) : json(p.next_cursor)}};
}

Result<LeasePage> lease_page_from_json(const json& j) {
  JsonReader r(j, "");
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  LeasePage p;
  if (r.find("items") == nullptr) return r.missing("items");
  ARMHIVE_RETURN_IF_ERROR(r.objects("items", p.items, parse_lease));
  ARMHIVE_RETURN_IF_ERROR(r.str("next_cursor", p.next_cursor));
  return p;
}

json to_json(const Problem& p) {
  json j = {{"type", p.type}, {"title", p.title}, {"status", p.status}, {"detail", p.detail}};
  if (!p.field.empty()) j["field"] = p.field;
  return j;
}

Result<Problem> problem_from_json(const json& j) {
  JsonReader r(j, "");
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  Problem p;
  ARMHIVE_RETURN_IF_ERROR(r.str("type", p.type));
  ARMHIVE_RETURN_IF_ERROR(r.str("title", p.title));
  ARMHIVE_RETURN_IF_ERROR(r.integer("status", p.status));
  ARMHIVE_RETURN_IF_ERROR(r.str("detail", p.detail));
  ARMHIVE_RETURN_IF_ERROR(r.str("field", p.field));
  return p;
}

json to_json(const ExecResultDto& r) {
  json j = {{"exit_code", r.exit_code},
            {"signal", r.signal},
            {"timed_out", r.timed_out},
            {"stdout_truncated", r.out_truncated}};
  put_bytes(j, "stdout", r.out);
  put_bytes(j, "stderr", r.err);
  return j;
}

Result<ExecResultDto> exec_result_from_json(const json& j) {
  JsonReader r(j, "");
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ExecResultDto out;
  ARMHIVE_RETURN_IF_ERROR(r.integer("exit_code", out.exit_code, true));
  ARMHIVE_RETURN_IF_ERROR(r.integer("signal", out.signal));
  ARMHIVE_RETURN_IF_ERROR(r.boolean("timed_out", out.timed_out));
  ARMHIVE_RETURN_IF_ERROR(r.boolean("stdout_truncated", out.out_truncated));
  ARMHIVE_RETURN_IF_ERROR(get_bytes(r, "stdout", out.out));
  ARMHIVE_RETURN_IF_ERROR(get_bytes(r, "stderr", out.err));
  return out;
}

std::string_view problem_title(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "OK";
    case ErrorCode::kInvalidArgument:
      return "Invalid request";
    case ErrorCode::kUnauthenticated:
      return "Authentication required";
    case ErrorCode::kPermissionDenied:
      return "Permission denied";
    case ErrorCode::kNotFound:
      return "Not found";
    case ErrorCode::kMethodNotAllowed:
      return "Method not allowed";
    case ErrorCode::kConflict:
      return "Conflict";
    case ErrorCode::kRequestTimeout:
      return "Request not received in time";
    case ErrorCode::kPayloadTooLarge:
      return "Request body too large";
    case ErrorCode::kUnsupportedMediaType:
      return "Unsupported media type";
    case ErrorCode::kUnprocessable:
      return "Request cannot be satisfied";
    case ErrorCode::kResourceExhausted:
      return "Quota or capacity exhausted";
    case ErrorCode::kInternal:
      return "Internal server error";
    case ErrorCode::kUnavailable:
      return "Service unavailable";
    case ErrorCode::kTimeout:
      return "Timed out";
  }
  return "Error";
}

Problem problem_from_status(const Status& status) {
  Problem p;
  p.type = std::string(kProblemTypeBase) + std::string(code_name(status.code()));
  p.title = std::string(problem_title(status.code()));
  p.status = http_status(status.code());
  p.detail = status.message();
  if (!status.context().empty()) p.detail += " [" + status.context() + "]";
  p.field = status.field();
  if (!p.field.empty() && p.detail.find(p.field) == std::string::npos) {
    p.detail = p.field + ": " + p.detail;
  }
  return p;
}

}  // namespace armhive
