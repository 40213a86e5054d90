#include "daemon/bench/benchmark_service.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <set>

#include "base/json_reader.h"

namespace armhive {
namespace {

using nlohmann::json;

Status in_range(std::string field, int v, int lo, int hi) {
  if (v < lo || v > hi) {
    return invalid_argument(std::move(field), "must be between " + std::to_string(lo) + " and " +
                                                  std::to_string(hi) + ", got " +
                                                  std::to_string(v));
  }
  return Status::ok();
}

// Parses what to_rfc3339 writes ("2026-11-30T01:02:03.456Z"); also accepts no fraction.
std::optional<TimePoint> parse_rfc3339(const std::string& s) {
  std::tm tm{};
  int ms = 0;
  int n = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6) {
    return std::nullopt;
  }
  std::string rest = s.substr(static_cast<size_t>(n));
  if (!rest.empty() && rest[0] == '.') {
    if (std::sscanf(rest.c_str(), ".%3d", &ms) != 1) return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  std::time_t secs = timegm(&tm);
  return from_unix_ms(static_cast<int64_t>(secs) * 1000 + ms);
}

}  // namespace

std::string_view to_string(BenchmarkState s) {
  switch (s) {
    case BenchmarkState::kQueued:
      return "queued";
    case BenchmarkState::kRunning:
      return "running";
    case BenchmarkState::kSucceeded:
      return "succeeded";
    case BenchmarkState::kFailed:
      return "failed";
  }
  return "unknown";
}

std::optional<BenchmarkState> benchmark_state_from_string(std::string_view s) {
  for (auto st : {BenchmarkState::kQueued, BenchmarkState::kRunning, BenchmarkState::kSucceeded,
                  BenchmarkState::kFailed}) {
    if (to_string(st) == s) return st;
  }
  return std::nullopt;
}

Status validate_benchmark_request(const BenchmarkRequest& r) {
  if (r.lease_id.empty()) return invalid_argument("lease_id", "must be set");
  std::set<std::string> seen;
  for (const auto& s : r.suites) {
    if (s != kSuiteNetwork && s != kSuiteCompression) {
      return invalid_argument("suites", "unknown suite \"" + s + "\" (network, compression)");
    }
    if (!seen.insert(s).second)
      return invalid_argument("suites", "suite \"" + s + "\" given twice");
  }
  const auto& n = r.network;
  ARMHIVE_RETURN_IF_ERROR(in_range("network.streams", n.streams, 1, 128));
  ARMHIVE_RETURN_IF_ERROR(in_range("network.duration_s", n.duration_s, 1, 600));
  ARMHIVE_RETURN_IF_ERROR(in_range("network.interval_s", n.interval_s, 1, 60));
  if (n.interval_s > n.duration_s) {
    return invalid_argument("network.interval_s", "must not exceed network.duration_s");
  }
  ARMHIVE_RETURN_IF_ERROR(in_range("network.cport", n.cport, 1024, 65536 - n.streams));
  if (n.mtus.size() > 4) return invalid_argument("network.mtus", "at most 4 MTUs");
  std::set<int> mtus;
  for (int m : n.mtus) {
    ARMHIVE_RETURN_IF_ERROR(in_range("network.mtus", m, 576, 9216));
    if (!mtus.insert(m).second) return invalid_argument("network.mtus", "MTU given twice");
  }
  const auto& c = r.compression;
  ARMHIVE_RETURN_IF_ERROR(in_range("compression.level", c.level, 1, 19));
  ARMHIVE_RETURN_IF_ERROR(in_range("compression.repeats", c.repeats, 1, 50));
  return Status::ok();
}

Result<BenchmarkRequest> benchmark_request_from_json(const json& body) {
  BenchmarkRequest r;
  if (body.is_null()) return r;
  if (!body.is_object()) return invalid_argument("body", "must be a JSON object");
  const JsonReader top(body, "");
  ARMHIVE_RETURN_IF_ERROR(top.only({"suites", "network", "compression"}));
  ARMHIVE_RETURN_IF_ERROR(top.str_list("suites", r.suites));
  if (const json* net = top.find("network")) {
    const JsonReader n(*net, "network");
    ARMHIVE_RETURN_IF_ERROR(n.require_object());
    ARMHIVE_RETURN_IF_ERROR(
        n.only({"streams", "duration_s", "interval_s", "cport", "both_directions", "mtus"}));
    auto& o = r.network;
    ARMHIVE_RETURN_IF_ERROR(n.integer("streams", o.streams));
    ARMHIVE_RETURN_IF_ERROR(n.integer("duration_s", o.duration_s));
    ARMHIVE_RETURN_IF_ERROR(n.integer("interval_s", o.interval_s));
    ARMHIVE_RETURN_IF_ERROR(n.integer("cport", o.cport));
    ARMHIVE_RETURN_IF_ERROR(n.boolean("both_directions", o.both_directions));
    ARMHIVE_RETURN_IF_ERROR(n.int_list("mtus", o.mtus));
  }
  if (const json* comp = top.find("compression")) {
    const JsonReader c(*comp, "compression");
    ARMHIVE_RETURN_IF_ERROR(c.require_object());
    ARMHIVE_RETURN_IF_ERROR(c.only({"level", "repeats", "multi_thread"}));
    auto& o = r.compression;
    ARMHIVE_RETURN_IF_ERROR(c.integer("level", o.level));
    ARMHIVE_RETURN_IF_ERROR(c.integer("repeats", o.repeats));
    ARMHIVE_RETURN_IF_ERROR(c.boolean("multi_thread", o.multi_thread));
  }
  // lease_id is the caller's; validate everything else now.
  BenchmarkRequest probe = r;
  probe.lease_id = "x";
  ARMHIVE_RETURN_IF_ERROR(validate_benchmark_request(probe));
  return r;
}

json to_json(const BenchmarkRequest& r) {
  return json{
      {"suites", r.suites},
      {"network",
       {{"streams", r.network.streams},
        {"duration_s", r.network.duration_s},
        {"interval_s", r.network.interval_s},
        {"cport", r.network.cport},
        {"both_directions", r.network.both_directions},
        {"mtus", r.network.mtus}}},
      {"compression",
       {{"level", r.compression.level},
        {"repeats", r.compression.repeats},
        {"multi_thread", r.compression.multi_thread}}},
  };
}

json to_json(const BenchmarkRun& run) {
  json j{
      {"id", run.id},
      {"lease_id", run.lease_id},
      {"owner", run.owner},
      {"vm_name", run.vm_name},
      {"pool", run.pool},
      {"host", run.host},
      {"state", std::string(to_string(run.state))},
      {"error", run.error},
      {"created_at", to_rfc3339(run.created_at)},
      {"finished_at", nullptr},
      {"request", to_json(run.request)},
      {"report", run.report},
  };
  if (to_unix_ms(run.finished_at) != 0) j["finished_at"] = to_rfc3339(run.finished_at);
  return j;
}

Result<BenchmarkRun> benchmark_run_from_json(const json& j) {
  if (!j.is_object()) return invalid_argument("run", "must be a JSON object");
  BenchmarkRun run;
  try {
    run.id = j.at("id").get<std::string>();
    run.lease_id = j.at("lease_id").get<std::string>();
    run.owner = j.value("owner", "");
    run.vm_name = j.value("vm_name", "");
    run.pool = j.value("pool", "");
    run.host = j.value("host", "");
    auto state = benchmark_state_from_string(j.at("state").get<std::string>());
    if (!state) return invalid_argument("state", "unknown benchmark state");
    run.state = *state;
    run.error = j.value("error", "");
    auto created = parse_rfc3339(j.at("created_at").get<std::string>());
    if (!created) return invalid_argument("created_at", "not an RFC 3339 time");
    run.created_at = *created;
    if (j.contains("finished_at") && j["finished_at"].is_string()) {
      auto finished = parse_rfc3339(j["finished_at"].get<std::string>());
      if (!finished) return invalid_argument("finished_at", "not an RFC 3339 time");
      run.finished_at = *finished;
    }
    if (j.contains("request")) {
      ARMHIVE_ASSIGN_OR_RETURN(run.request, benchmark_request_from_json(j["request"]));
    }
    run.request.lease_id = run.lease_id;
    run.request.owner = run.owner;
    if (j.contains("report")) run.report = j["report"];
  } catch (const json::exception& e) {
    return invalid_argument("run", std::string("malformed benchmark run: ") + e.what());
  }
  return run;
}

}  // namespace armhive
