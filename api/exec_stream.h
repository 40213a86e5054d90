#pragma once

#include <string>
#include <string_view>

#include "api/types.h"
#include "base/result.h"

namespace armhive {

// The lines of a streamed exec (`POST /v1/leases/{id}/exec` with
// `Accept: application/x-ndjson`, api/openapi.yaml): any number of output lines
//   {"stream":"stdout"|"stderr","data":"<base64>"}
// then exactly one final line, the outcome
//   {"exit_code":N,"signal":S,"timed_out":B,"cancelled":B}
// or, when the exec failed after the stream began, {"error":<problem>}. Blank lines are
// keep-alives. Any thread; nothing throws.

struct ExecStreamLine {
  enum class Kind { kKeepAlive, kOutput, kResult, kError };
  Kind kind = Kind::kKeepAlive;
  std::string stream;      // kOutput: "stdout" or "stderr"
  std::string data;        // kOutput: decoded bytes
  ExecResultDto result;    // kResult (out/err empty)
  bool cancelled = false;  // kResult
  Problem error;           // kError
};

// Each ends with '\n'.
std::string exec_output_line(std::string_view stream, std::string_view data);
std::string exec_result_line(const ExecResultDto& result, bool cancelled);
std::string exec_error_line(const Problem& problem);

// One line without its '\n'. Lenient about unknown members (a newer server); anything else
// malformed is kInternal ("the server sent ...").
Result<ExecStreamLine> parse_exec_stream_line(std::string_view line);

}  // namespace armhive
