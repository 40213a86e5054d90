#include "daemon/bench/stream_parser.h"

#include <map>

#include "base/bounded_number.h"

namespace armhive {
namespace {

constexpr double kMaxMbS = 1e7;  // 10 TB/s: no memory system is that fast

std::string_view line_at(std::string_view text, size_t& pos) {
  size_t end = text.find('\n', pos);
  if (end == std::string_view::npos) end = text.size();
  std::string_view line = text.substr(pos, end - pos);
  pos = end + 1;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace

Result<StreamResult> parse_stream_output(std::string_view output) {
  std::map<std::string, std::string, std::less<>> kv;
  bool validation_ok = false;
  bool validation_failed = false;
  for (size_t pos = 0; pos < output.size();) {
    std::string_view line = line_at(output, pos);
    size_t sp = line.find(' ');
    if (line.empty() || sp == std::string_view::npos) continue;
    std::string key(line.substr(0, sp));
    std::string value(line.substr(sp + 1));
    if (key == "validation") {
      validation_ok = value == "ok";
      validation_failed = !validation_ok;
      continue;
    }
    if (!kv.emplace(key, value).second)
      return invalid_argument("memory." + key, "armhive-stream printed " + key + " twice");
  }
  if (validation_failed) {
    return Status(ErrorCode::kInternal,
                  "armhive-stream's kernels computed wrong values (validation failed): the "
                  "bandwidth figures are not trustworthy");
  }
  if (!validation_ok) {
    return invalid_argument("memory",
                            "armhive-stream output has no validation line (truncated output?)");
  }
  StreamResult r;
  auto text = [&](const char* key, std::string& out) -> Status {
    auto it = kv.find(key);
    if (it == kv.end() || it->second.empty() || it->second.size() > 200)
      return invalid_argument(std::string("memory.") + key, "missing in armhive-stream output");
    out = it->second;
    return Status::ok();
  };
  auto integer = [&](const char* key, int64_t lo, int64_t hi, auto& out) -> Status {
    auto it = kv.find(key);
    if (it == kv.end())
      return invalid_argument(std::string("memory.") + key, "missing in armhive-stream output");
    auto v = parse_bounded_int(it->second, lo, hi, key);
    if (!v.is_ok()) {
      return invalid_argument(std::string("memory.") + key,
                              "\"" + it->second.substr(0, 40) + "\" is not an integer in " +
                                  std::to_string(lo) + ".." + std::to_string(hi));
    }
    out = static_cast<std::remove_reference_t<decltype(out)>>(*v);
    return Status::ok();
  };
  auto rate = [&](const char* key, double& out) -> Status {
    auto it = kv.find(key);
    if (it == kv.end())
      return invalid_argument(std::string("memory.") + key, "missing in armhive-stream output");
    auto v = parse_bounded_double(it->second, 0, kMaxMbS, key);
    if (!v.is_ok() || *v <= 0) {
      return invalid_argument(
          std::string("memory.") + key,
          "\"" + it->second.substr(0, 40) + "\" is not a bandwidth in (0, 10^7] MB/s");
    }
    out = *v;
    return Status::ok();
  };
  ARMHIVE_RETURN_IF_ERROR(text("armhive-stream", r.version));
  ARMHIVE_RETURN_IF_ERROR(text("compiler", r.compiler));
  ARMHIVE_RETURN_IF_ERROR(text("flags", r.flags));
  ARMHIVE_RETURN_IF_ERROR(integer("array_elements", 1, int64_t{1} << 32, r.array_elements));
  ARMHIVE_RETURN_IF_ERROR(integer("array_bytes", 8, int64_t{1} << 35, r.array_bytes));
  ARMHIVE_RETURN_IF_ERROR(integer("threads", 1, 1024, r.threads));
  ARMHIVE_RETURN_IF_ERROR(integer("iterations", 1, 100, r.iterations));
  if (r.array_bytes != r.array_elements * sizeof(double)) {
    return invalid_argument("memory.array_bytes",
                            "does not match array_elements x 8 bytes (corrupt output)");
  }
  ARMHIVE_RETURN_IF_ERROR(rate("copy_mb_s", r.copy_mb_s));
  ARMHIVE_RETURN_IF_ERROR(rate("scale_mb_s", r.scale_mb_s));
  ARMHIVE_RETURN_IF_ERROR(rate("add_mb_s", r.add_mb_s));
  ARMHIVE_RETURN_IF_ERROR(rate("triad_mb_s", r.triad_mb_s));
  return r;
}

Result<std::string> parse_stream_version(std::string_view output) {
  size_t pos = 0;
  std::string_view line = line_at(output, pos);
  if (line.substr(0, 15) != "armhive-stream " || line.size() > 200) {
    return invalid_argument("memory", "no version in `armhive-stream --version` output");
  }
  return std::string(line);
}

}  // namespace armhive
