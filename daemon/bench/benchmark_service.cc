#include "daemon/bench/benchmark_service.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <set>

namespace armhive {
namespace {

using nlohmann::json;

Status check_members(const json& obj, std::string_view prefix,
                     std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : obj.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string field = prefix.empty() ? key : std::string(prefix) + "." + key;
      return invalid_argument(field, "unknown member");
    }
  }
  return Status::ok();
}

Status read_int(const json& obj, std::string_view prefix, const char* key, int& out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::ok();
  std::string field = std::string(prefix) + "." + key;
  if (!it->is_number_integer()) return invalid_argument(field, "must be an integer");
  int64_t v = it->get<int64_t>();
  if (v < -1'000'000 || v > 1'000'000) return invalid_argument(field, "out of range");
  out = static_cast<int>(v);
  return Status::ok();
}

Status read_bool(const json& obj, std::string_view prefix, const char* key, bool& out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::ok();
  if (!it->is_boolean())
    return invalid_argument(std::string(prefix) + "." + key, "must be a boolean");
  out = it->get<bool>();
  return Status::ok();
}

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
    if (s != kSuiteNetwork && s != kSuiteCompression && s != kSuiteMemory && s != kSuiteCrypto &&
        s != kSuiteStorage) {
      return invalid_argument("suites", "unknown suite \"" + s.substr(0, 40) +
                                            "\" (network, compression, memory, crypto, storage)");
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
  const auto& m = r.memory;
  ARMHIVE_RETURN_IF_ERROR(in_range("memory.array_mib", m.array_mib, 8, 4096));
  ARMHIVE_RETURN_IF_ERROR(in_range("memory.iterations", m.iterations, 1, 100));
  ARMHIVE_RETURN_IF_ERROR(in_range("memory.repeats", m.repeats, 1, 50));
  const auto& k = r.crypto;
  ARMHIVE_RETURN_IF_ERROR(in_range("crypto.seconds", k.seconds, 1, 30));
  ARMHIVE_RETURN_IF_ERROR(in_range("crypto.repeats", k.repeats, 1, 50));
  const auto& st = r.storage;
  ARMHIVE_RETURN_IF_ERROR(in_range("storage.file_mib", st.file_mib, 16, 1024));
  ARMHIVE_RETURN_IF_ERROR(in_range("storage.block_kib", st.block_kib, 4, 16384));
  if (static_cast<int64_t>(st.block_kib) > int64_t{st.file_mib} * 1024) {
    return invalid_argument("storage.block_kib", "must not exceed storage.file_mib");
  }
  ARMHIVE_RETURN_IF_ERROR(in_range("storage.queue_depth", st.queue_depth, 1, 256));
  ARMHIVE_RETURN_IF_ERROR(in_range("storage.random_seconds", st.random_seconds, 1, 120));
  ARMHIVE_RETURN_IF_ERROR(in_range("storage.repeats", st.repeats, 1, 50));
  return Status::ok();
}

Status validate_memory_array(const MemoryOptions& options, uint64_t llc_bytes) {
  const uint64_t array = static_cast<uint64_t>(options.array_mib) << 20;
  if (llc_bytes != 0 && array < 4 * llc_bytes) {
    uint64_t need_mib = (4 * llc_bytes + (1 << 20) - 1) >> 20;
    return invalid_argument("memory.array_mib",
                            std::to_string(options.array_mib) +
                                " MiB per array is not well above the host's last-level cache (" +
                                std::to_string(llc_bytes >> 10) + " KiB): give at least " +
                                std::to_string(need_mib) + " (4x the cache)");
  }
  return Status::ok();
}

Result<BenchmarkRequest> benchmark_request_from_json(const json& body) {
  BenchmarkRequest r;
  if (body.is_null()) return r;
  if (!body.is_object()) return invalid_argument("body", "must be a JSON object");
  ARMHIVE_RETURN_IF_ERROR(
      check_members(body, "", {"suites", "network", "compression", "memory", "crypto", "storage"}));
  if (auto it = body.find("suites"); it != body.end()) {
    if (!it->is_array()) return invalid_argument("suites", "must be an array of strings");
    for (const auto& s : *it) {
      if (!s.is_string()) return invalid_argument("suites", "must be an array of strings");
      r.suites.push_back(s.get<std::string>());
    }
  }
  if (auto it = body.find("network"); it != body.end()) {
    if (!it->is_object()) return invalid_argument("network", "must be an object");
    ARMHIVE_RETURN_IF_ERROR(
        check_members(*it, "network",
                      {"streams", "duration_s", "interval_s", "cport", "both_directions", "mtus"}));
    auto& n = r.network;
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "network", "streams", n.streams));
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "network", "duration_s", n.duration_s));
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "network", "interval_s", n.interval_s));
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "network", "cport", n.cport));
    ARMHIVE_RETURN_IF_ERROR(read_bool(*it, "network", "both_directions", n.both_directions));
    if (auto m = it->find("mtus"); m != it->end()) {
      if (!m->is_array()) return invalid_argument("network.mtus", "must be an array of integers");
      for (const auto& v : *m) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 100000) {
          return invalid_argument("network.mtus", "must be an array of integers");
        }
        n.mtus.push_back(static_cast<int>(v.get<int64_t>()));
      }
    }
  }
  if (auto it = body.find("compression"); it != body.end()) {
    if (!it->is_object()) return invalid_argument("compression", "must be an object");
    ARMHIVE_RETURN_IF_ERROR(
        check_members(*it, "compression", {"level", "repeats", "multi_thread"}));
    auto& c = r.compression;
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "compression", "level", c.level));
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "compression", "repeats", c.repeats));
    ARMHIVE_RETURN_IF_ERROR(read_bool(*it, "compression", "multi_thread", c.multi_thread));
  }
  if (auto it = body.find("memory"); it != body.end()) {
    if (!it->is_object()) return invalid_argument("memory", "must be an object");
    ARMHIVE_RETURN_IF_ERROR(
        check_members(*it, "memory", {"array_mib", "iterations", "repeats", "multi_thread"}));
    auto& m = r.memory;
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "memory", "array_mib", m.array_mib));
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "memory", "iterations", m.iterations));
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "memory", "repeats", m.repeats));
    ARMHIVE_RETURN_IF_ERROR(read_bool(*it, "memory", "multi_thread", m.multi_thread));
  }
  if (auto it = body.find("crypto"); it != body.end()) {
    if (!it->is_object()) return invalid_argument("crypto", "must be an object");
    ARMHIVE_RETURN_IF_ERROR(check_members(*it, "crypto", {"seconds", "repeats", "multi_thread"}));
    auto& k = r.crypto;
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "crypto", "seconds", k.seconds));
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "crypto", "repeats", k.repeats));
    ARMHIVE_RETURN_IF_ERROR(read_bool(*it, "crypto", "multi_thread", k.multi_thread));
  }
  if (auto it = body.find("storage"); it != body.end()) {
    if (!it->is_object()) return invalid_argument("storage", "must be an object");
    ARMHIVE_RETURN_IF_ERROR(check_members(
        *it, "storage", {"file_mib", "block_kib", "queue_depth", "random_seconds", "repeats"}));
    auto& st = r.storage;
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "storage", "file_mib", st.file_mib));
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "storage", "block_kib", st.block_kib));
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "storage", "queue_depth", st.queue_depth));
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "storage", "random_seconds", st.random_seconds));
    ARMHIVE_RETURN_IF_ERROR(read_int(*it, "storage", "repeats", st.repeats));
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
      {"memory",
       {{"array_mib", r.memory.array_mib},
        {"iterations", r.memory.iterations},
        {"repeats", r.memory.repeats},
        {"multi_thread", r.memory.multi_thread}}},
      {"crypto",
       {{"seconds", r.crypto.seconds},
        {"repeats", r.crypto.repeats},
        {"multi_thread", r.crypto.multi_thread}}},
      {"storage",
       {{"file_mib", r.storage.file_mib},
        {"block_kib", r.storage.block_kib},
        {"queue_depth", r.storage.queue_depth},
        {"random_seconds", r.storage.random_seconds},
        {"repeats", r.storage.repeats}}},
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
