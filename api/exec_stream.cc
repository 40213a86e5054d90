#include "api/exec_stream.h"

#include "api/json.h"
#include "base/base64.h"
#include "base/json_reader.h"

namespace armhive {

using nlohmann::json;

std::string exec_output_line(std::string_view stream, std::string_view data) {
  json j = {{"stream", std::string(stream)}, {"data", base64_encode(data)}};
  return dump_json(j) + "\n";
}

std::string exec_result_line(const ExecResultDto& result, bool cancelled) {
  json j = {{"exit_code", result.exit_code},
            {"signal", result.signal},
            {"timed_out", result.timed_out},
            {"cancelled", cancelled}};
  return dump_json(j) + "\n";
}

std::string exec_error_line(const Problem& problem) {
  return dump_json(json{{"error", to_json(problem)}}) + "\n";
}

Result<ExecStreamLine> parse_exec_stream_line(std::string_view line) {
  ExecStreamLine out;
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return out;  // keep-alive
  auto parsed = parse_json(line, "exec stream line");
  if (!parsed.is_ok() || !parsed->is_object()) {
    return internal_error("the server sent an exec stream line that is not a JSON object");
  }
  const json& j = *parsed;
  auto bad = [](const Status& s) {
    return internal_error("the server sent an invalid exec stream line: " + s.to_string());
  };
  JsonReader r(j, "");
  if (r.find("stream") != nullptr) {
    out.kind = ExecStreamLine::Kind::kOutput;
    std::string b64;
    if (Status s = r.str("stream", out.stream, true); !s.is_ok()) return bad(s);
    if (out.stream != "stdout" && out.stream != "stderr") {
      return internal_error("the server sent output of an unknown stream \"" + out.stream + "\"");
    }
    if (Status s = r.str("data", b64, true); !s.is_ok()) return bad(s);
    auto data = base64_decode("data", b64);
    if (!data.is_ok()) return bad(data.status());
    out.data = std::move(*data);
    return out;
  }
  if (const json* e = r.find("error"); e != nullptr) {
    out.kind = ExecStreamLine::Kind::kError;
    auto p = problem_from_json(*e);
    if (!p.is_ok()) return bad(p.status());
    out.error = std::move(*p);
    return out;
  }
  out.kind = ExecStreamLine::Kind::kResult;
  for (Status s :
       {r.integer("exit_code", out.result.exit_code, true), r.integer("signal", out.result.signal),
        r.boolean("timed_out", out.result.timed_out), r.boolean("cancelled", out.cancelled)}) {
    if (!s.is_ok()) return bad(s);
  }
  return out;
}

}  // namespace armhive
