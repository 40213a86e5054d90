#include "daemon/bench/compare_settings.h"

#include <functional>
#include <set>

namespace armhive {
namespace {

using nlohmann::json;

const std::string kAbsent = "\xE2\x80\x93";

std::string text(const json& v) {
  if (v.is_null()) return kAbsent;
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string s;
    for (const auto& e : v) s += (s.empty() ? "" : ",") + text(e);
    return s.empty() ? "none" : s;
  }
  return v.dump();
}

// The value at a "/"-separated path of the report, or absent.
std::string at_path(const json& report, const std::string& path) {
  json::json_pointer p;
  try {
    p = json::json_pointer("/" + path);
  } catch (const json::exception&) {
    return kAbsent;
  }
  if (!report.contains(p)) return kAbsent;
  return text(report.at(p));
}

bool has_suite(const BenchmarkRun& r, const std::string& suite) {
  for (const auto& s : r.request.suites)
    if (s == suite) return true;
  return false;
}

}  // namespace

std::vector<SettingLine> line_up_settings(const std::vector<BenchmarkRun>& runs) {
  struct Source {
    std::string name;
    std::string suite;  // empty: every run
    bool blocking;
    std::function<std::string(const BenchmarkRun&)> value;
  };
  auto report = [](std::string path) {
    return [path](const BenchmarkRun& r) { return at_path(r.report, path); };
  };
  const std::vector<Source> sources = {
      {"host", "", false, [](const BenchmarkRun& r) { return r.host; }},
      {"host architecture", "", false, report("settings/host_arch")},
      {"emulated (TCG)", "", false, report("emulated")},
      {"vCPUs", "", false, report("settings/vcpus")},
      {"pinned cores", "", false, report("settings/pinned_cpus")},
      {"MTU", "network", false, report("settings/mtu")},
      {"iperf3 streams", "network", false,
       [](const BenchmarkRun& r) { return std::to_string(r.request.network.streams); }},
      {"iperf3 version (host client)", "network", true, report("network/iperf3_version")},
      {"iperf3 version (guest server)", "network", true, report("network/guest_iperf3_version")},
      {"zstd version", "compression", true, report("compression/zstd_version")},
      {"zstd level", "compression", false, report("compression/level")},
      {"corpus sha256", "compression", true, report("compression/corpus/sha256")},
      {"corpus bytes", "compression", true, report("compression/corpus/bytes")},
      {"armhive-stream version", "memory", true, report("memory/tool")},
      {"memory array MiB", "memory", false, report("memory/settings/array_mib")},
      {"memory iterations", "memory", false, report("memory/settings/iterations")},
      {"memory last-level cache bytes", "memory", false,
       report("memory/settings/last_level_cache/bytes")},
      {"openssl version", "crypto", true, report("crypto/openssl_version")},
      {"openssl seconds", "crypto", false, report("crypto/settings/seconds")},
      {"fio version", "storage", true, report("storage/fio_version")},
      {"storage file MiB", "storage", false, report("storage/settings/file_mib")},
      {"storage block KiB", "storage", false, report("storage/settings/block_kib")},
      {"storage queue depth", "storage", false, report("storage/settings/queue_depth")},
      {"disk format", "storage", false, report("storage/settings/backing/format")},
      {"disk host filesystem", "storage", false,
       report("storage/settings/backing/host_filesystem")},
      {"disk guest filesystem", "storage", false,
       report("storage/settings/backing/guest_filesystem")},
  };
  std::vector<SettingLine> lines;
  for (const auto& src : sources) {
    SettingLine line{src.name, {}, false, false};
    std::set<std::string> seen;
    bool any = false;
    for (const auto& r : runs) {
      bool applies = src.suite.empty() || has_suite(r, src.suite);
      std::string v = applies ? src.value(r) : kAbsent;
      line.values.push_back(v);
      if (v != kAbsent) {
        seen.insert(v);
        any = true;
      }
    }
    if (!any) continue;
    line.differs = seen.size() > 1;
    line.blocking = line.differs && src.blocking;
    lines.push_back(std::move(line));
  }
  return lines;
}

json settings_json(const std::vector<SettingLine>& lines) {
  json out = json::array();
  for (const auto& l : lines) {
    out.push_back(
        {{"name", l.name}, {"values", l.values}, {"differs", l.differs}, {"blocking", l.blocking}});
  }
  return out;
}

json incomparable_json(const std::vector<SettingLine>& lines) {
  json out = json::array();
  for (const auto& l : lines) {
    if (!l.blocking) continue;
    std::string vs;
    for (const auto& v : l.values) vs += (vs.empty() ? "" : " vs ") + v;
    out.push_back(l.name + ": " + vs);
  }
  return out;
}

}  // namespace armhive
