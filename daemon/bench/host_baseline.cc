#include "daemon/bench/host_baseline.h"

#include <map>

#include "daemon/bench/benchmark_service.h"

namespace armhive {

using nlohmann::json;

HostBaselineDecision decide_host_baseline(const LeaseTarget& t, std::string_view suite) {
  if (t.remote_host) {
    return {false, "the VM runs on host " + t.host +
                       ", not on armhived's machine: host baselines run only where armhived runs"};
  }
  if (t.emulated) {
    return {false, "the guest (" + t.guest_arch + ") is emulated by QEMU TCG on this " +
                       t.host_arch +
                       " host: a guest/host ratio would measure the emulator, not the VM"};
  }
  if (t.host_arch != t.guest_arch) {
    return {false, "the host architecture (" + t.host_arch + ") differs from the guest's (" +
                       t.guest_arch + ")"};
  }
  if (suite == kSuiteCompression && t.host_corpus_path.empty())
    return {false, "the corpus is not available on the host"};
  if (suite == kSuiteMemory && t.host_stream_path.empty())
    return {false, "armhive-stream is not installed on the host (host_stream_path)"};
  if (suite == kSuiteStorage && t.host_scratch_dir.empty()) {
    return {false,
            "no scratch directory on the filesystem holding the VM's disk (host_scratch_dir)"};
  }
  return {true, ""};
}

HostBaselineDecision versions_comparable(std::string_view tool, const std::string& guest_version,
                                         const std::string& host_version) {
  if (host_version.empty()) {
    return {false, std::string(tool) + " is not installed on the host (or printed no version)"};
  }
  if (guest_version != host_version) {
    return {false, std::string(tool) + " " + guest_version + " in the guest, " + host_version +
                       " on the host: different versions measure different code"};
  }
  return {true, ""};
}

json guest_host_ratios(const json& guest_figures, const json& host_figures) {
  std::map<std::string, const json*> host;
  if (host_figures.is_array()) {
    for (const auto& f : host_figures) {
      if (f.is_object() && f.contains("key") && f["key"].is_string())
        host[f["key"].get<std::string>()] = &f;
    }
  }
  auto median = [](const json& f) -> std::optional<double> {
    auto sp = f.find("spread");
    if (sp == f.end() || !sp->is_object()) return std::nullopt;
    auto m = sp->find("median");
    if (m == sp->end() || !m->is_number()) return std::nullopt;
    return m->get<double>();
  };
  json ratios = json::array();
  if (guest_figures.is_array()) {
    for (const auto& g : guest_figures) {
      if (!g.is_object() || !g.contains("key") || !g["key"].is_string()) continue;
      std::string key = g["key"].get<std::string>();
      std::string host_key = key;
      if (auto at = host_key.find(".guest."); at != std::string::npos) {
        host_key.replace(at, 7, ".host.");
      }
      json ratio = nullptr;
      auto h = host.find(host_key);
      auto gm = median(g);
      if (h != host.end() && gm) {
        auto hm = median(*h->second);
        bool higher = g.value("higher_is_better", true);
        if (hm && *hm > 0 && *gm > 0) ratio = higher ? *gm / *hm : *hm / *gm;
      }
      ratios.push_back({{"key", key}, {"label", g.value("label", key)}, {"ratio", ratio}});
    }
  }
  return {{"available", true}, {"ratios", ratios}};
}

json baseline_unavailable(const std::string& reason) {
  return {{"available", false}, {"reason", reason}};
}

}  // namespace armhive
