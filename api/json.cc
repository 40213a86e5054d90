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

#define AH_TRY(expr) ARMHIVE_RETURN_IF_ERROR(expr)

Result<int64_t> ttl_from_json(const json& v, const std::string& field) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kMaxTtlSeconds)) {
      return invalid_argument(field,
                              "must be at most 30 days (" + std::to_string(kMaxTtlSeconds) + " s)");
    }
    int64_t s = v.get<int64_t>();
    AH_TRY(check_ttl(field, s));
    return s;
  }
  if (v.is_string()) {
    ARMHIVE_ASSIGN_OR_RETURN(int64_t s, parse_duration(field, v.get<std::string>()));
    AH_TRY(check_ttl(field, s));
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
  AH_TRY(r.str(key, text));
  AH_TRY(r.str(key + "_base64", b64));
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
  AH_TRY(r.require_object());
  AH_TRY(r.str("name", vm.name));
  AH_TRY(r.str("address", vm.address));
  AH_TRY(r.str("login_user", vm.login_user));
  AH_TRY(r.int_list("cpus", vm.cpus));
  AH_TRY(r.str("host", vm.host));
  return Status::ok();
}

Status parse_ssh(const json& j, const std::string& prefix, SshDto& ssh) {
  JsonReader r(j, prefix);
  AH_TRY(r.require_object());
  AH_TRY(r.str("user", ssh.user));
  AH_TRY(r.str("host", ssh.host));
  AH_TRY(r.integer("port", ssh.port));
  AH_TRY(r.str("command", ssh.command));
  AH_TRY(r.str_list("host_keys", ssh.host_keys));
  AH_TRY(r.str("known_hosts", ssh.known_hosts));
  AH_TRY(r.str("host_key_alias", ssh.host_key_alias));
  return Status::ok();
}

Status parse_forward(const json& j, const std::string& prefix, PortForwardDto& f) {
  JsonReader r(j, prefix);
  AH_TRY(r.require_object());
  AH_TRY(r.integer("guest_port", f.guest_port));
  AH_TRY(r.str("host", f.host));
  AH_TRY(r.integer("port", f.port));
  return Status::ok();
}

Status parse_transition(const json& j, const std::string& prefix, TransitionDto& t) {
  JsonReader r(j, prefix);
  AH_TRY(r.require_object());
  AH_TRY(r.str("from", t.from));
  AH_TRY(r.str("to", t.to));
  AH_TRY(r.str("at", t.at));
  AH_TRY(r.str("reason", t.reason));
  return Status::ok();
}

Status parse_lease(const json& j, const std::string& prefix, LeaseDto& l) {
  JsonReader r(j, prefix);
  AH_TRY(r.require_object());
  AH_TRY(r.str("id", l.id, true));
  AH_TRY(r.str("pool", l.pool));
  AH_TRY(r.str("owner", l.owner));
  AH_TRY(r.str("state", l.state, true));
  AH_TRY(r.str("reason", l.reason));
  AH_TRY(r.str("purpose", l.purpose));
  AH_TRY(r.str_map("labels", l.labels));
  AH_TRY(r.str("created_at", l.created_at));
  AH_TRY(r.opt_str("ready_at", l.ready_at));
  AH_TRY(r.str("expires_at", l.expires_at));
  AH_TRY(r.opt_str("ended_at", l.ended_at));
  AH_TRY(r.integer("ttl_seconds", l.ttl_seconds));
  AH_TRY(r.boolean("warm_handout", l.warm_handout));
  if (const json* vm = r.find("vm")) {
    VmDto v;
    AH_TRY(parse_vm(*vm, r.field("vm"), v));
    l.vm = std::move(v);
  }
  if (const json* ssh = r.find("ssh")) {
    SshDto s;
    AH_TRY(parse_ssh(*ssh, r.field("ssh"), s));
    l.ssh = std::move(s);
  }
  AH_TRY(r.objects("forwards", l.forwards, parse_forward));
  if (const json* startup = r.find("startup")) {
    StartupStatusDto s;
    AH_TRY(parse_startup_status(*startup, r.field("startup"), s));
    l.startup = std::move(s);
  }
  if (const json* queue = r.find("queue")) {
    JsonReader q(*queue, r.field("queue"));
    AH_TRY(q.require_object());
    LeaseQueueDto dto;
    AH_TRY(q.integer("position", dto.position, true));
    AH_TRY(q.str("reason", dto.reason, true));
    l.queue = std::move(dto);
  }
  if (const json* usage = r.find("usage")) {
    JsonReader u(*usage, r.field("usage"));
    AH_TRY(u.require_object());
    LeaseUsageDto dto;
    AH_TRY(u.number("cpu_seconds", dto.cpu_seconds));
    AH_TRY(u.number("wall_seconds", dto.wall_seconds));
    AH_TRY(u.integer("peak_memory_bytes", dto.peak_memory_bytes));
    AH_TRY(u.integer("disk_write_bytes", dto.disk_write_bytes));
    AH_TRY(u.integer("net_rx_bytes", dto.net_rx_bytes));
    AH_TRY(u.integer("net_tx_bytes", dto.net_tx_bytes));
    AH_TRY(u.str("sampled_at", dto.sampled_at));
    AH_TRY(u.boolean("final", dto.final));
    l.usage = std::move(dto);
  }
  AH_TRY(r.objects("history", l.history, parse_transition));
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
  AH_TRY(r.require_object());
  AH_TRY(r.only({"pool", "ttl", "ssh_keys", "labels", "purpose", "ports", "startup"}));
  LeaseCreateRequest out;
  AH_TRY(r.str("pool", out.pool, true));
  AH_TRY(check_name("pool", out.pool));
  if (const json* ttl = r.find("ttl")) {
    ARMHIVE_ASSIGN_OR_RETURN(int64_t s, ttl_from_json(*ttl, "ttl"));
    out.ttl_seconds = s;
  }
  AH_TRY(r.str_list("ssh_keys", out.ssh_keys));
  if (out.ssh_keys.size() > kMaxSshKeys) {
    return invalid_argument("ssh_keys", "at most " + std::to_string(kMaxSshKeys) + " keys");
  }
  for (size_t i = 0; i < out.ssh_keys.size(); ++i) {
    AH_TRY(check_ssh_key("ssh_keys[" + std::to_string(i) + "]", out.ssh_keys[i]));
  }
  AH_TRY(r.str_map("labels", out.labels));
  AH_TRY(check_labels("labels", out.labels));
  AH_TRY(r.str("purpose", out.purpose));
  if (out.purpose != "ci" && out.purpose != "dev") {
    return invalid_argument("purpose", "must be \"ci\" or \"dev\"");
  }
  AH_TRY(r.int_list("ports", out.ports));
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
  AH_TRY(r.require_object());
  AH_TRY(r.only({"ttl"}));
  const json* ttl = r.find("ttl");
  if (ttl == nullptr) return r.missing("ttl");
  LeaseRenewRequest out;
  ARMHIVE_ASSIGN_OR_RETURN(out.ttl_seconds, ttl_from_json(*ttl, "ttl"));
  return out;
}

json to_json(const SshCertificateRequest& r) { return {{"public_key", r.public_key}}; }

Result<SshCertificateRequest> ssh_certificate_request_from_json(const json& j) {
  JsonReader r(j, "");
  AH_TRY(r.require_object());
  AH_TRY(r.only({"public_key"}));
  SshCertificateRequest out;
  AH_TRY(r.str("public_key", out.public_key, /*required=*/true));
  return out;
}

json to_json(const FileTransferDto& f) {
  return {{"path", f.path}, {"kind", f.kind}, {"bytes", f.bytes}, {"sha256", f.sha256}};
}

Result<FileTransferDto> file_transfer_from_json(const json& j) {
  JsonReader r(j, "");
  AH_TRY(r.require_object());
  FileTransferDto f;
  AH_TRY(r.str("path", f.path, true));
  AH_TRY(r.str("kind", f.kind, true));
  AH_TRY(r.integer("bytes", f.bytes));
  AH_TRY(r.str("sha256", f.sha256, true));
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
  AH_TRY(r.require_object());
  SshCertificateDto c;
  AH_TRY(r.str("certificate", c.certificate, true));
  AH_TRY(r.str("user", c.user));
  AH_TRY(r.str("principal", c.principal));
  AH_TRY(r.str("key_id", c.key_id));
  AH_TRY(r.integer("serial", c.serial));
  AH_TRY(r.str("valid_after", c.valid_after));
  AH_TRY(r.str("valid_before", c.valid_before));
  return c;
}

json to_json(const ExecRequestDto& r) {
  json j = {{"argv", r.argv}, {"timeout_s", r.timeout_s}};
  if (!r.stdin_data.empty()) put_bytes(j, "stdin", r.stdin_data);
  return j;
}

Result<ExecRequestDto> exec_request_from_json(const json& j) {
  JsonReader r(j, "");
  AH_TRY(r.require_object());
  AH_TRY(r.only({"argv", "stdin", "stdin_base64", "timeout_s"}));
  ExecRequestDto out;
  if (r.find("argv") == nullptr) return r.missing("argv");
  AH_TRY(r.str_list("argv", out.argv));
  if (out.argv.empty()) return invalid_argument("argv", "must name a program");
  if (out.argv.size() > 4096) return invalid_argument("argv", "at most 4096 arguments");
  if (out.argv[0].empty()) return invalid_argument("argv[0]", "must not be empty");
  for (size_t i = 0; i < out.argv.size(); ++i) {
    if (out.argv[i].find('\0') != std::string::npos) {
      return invalid_argument("argv[" + std::to_string(i) + "]", "must not contain NUL");
    }
  }
  AH_TRY(get_bytes(r, "stdin", out.stdin_data));
  out.timeout_given = r.find("timeout_s") != nullptr;
  AH_TRY(r.integer("timeout_s", out.timeout_s));
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
  AH_TRY(parse_lease(j, "", l));
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
  AH_TRY(r.require_object());
  LeasePage p;
  if (r.find("items") == nullptr) return r.missing("items");
  AH_TRY(r.objects("items", p.items, parse_lease));
  AH_TRY(r.str("next_cursor", p.next_cursor));
  return p;
}

json to_json(const Problem& p) {
  json j = {{"type", p.type}, {"title", p.title}, {"status", p.status}, {"detail", p.detail}};
  if (!p.field.empty()) j["field"] = p.field;
  return j;
}

Result<Problem> problem_from_json(const json& j) {
  JsonReader r(j, "");
  AH_TRY(r.require_object());
  Problem p;
  AH_TRY(r.str("type", p.type));
  AH_TRY(r.str("title", p.title));
  AH_TRY(r.integer("status", p.status));
  AH_TRY(r.str("detail", p.detail));
  AH_TRY(r.str("field", p.field));
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
  AH_TRY(r.require_object());
  ExecResultDto out;
  AH_TRY(r.integer("exit_code", out.exit_code, true));
  AH_TRY(r.integer("signal", out.signal));
  AH_TRY(r.boolean("timed_out", out.timed_out));
  AH_TRY(r.boolean("stdout_truncated", out.out_truncated));
  AH_TRY(get_bytes(r, "stdout", out.out));
  AH_TRY(get_bytes(r, "stderr", out.err));
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
