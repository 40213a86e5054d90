// HTML of the memory, crypto and storage suites (suite_figures.h).
#include <map>

#include "daemon/bench/suite_figures.h"
#include "daemon/bench/svg.h"

namespace armhive {
namespace {

using nlohmann::json;

std::string esc(const std::string& s) { return xml_escape(s); }

std::string value_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "unknown";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_float()) return svg_num(v.get<double>(), 2);
  if (v.is_array()) {
    std::string s;
    for (const auto& e : v) s += (s.empty() ? "" : ", ") + value_text(e);
    return s;
  }
  return v.dump();
}

// Nested objects (e.g. "backing") become "backing host_filesystem" rows.
void settings_rows(const json& obj, const std::string& prefix, std::string& out) {
  for (const auto& [k, v] : obj.items()) {
    std::string name = prefix.empty() ? k : prefix + " " + k;
    if (v.is_object() && k != "last_level_cache") {
      settings_rows(v, name, out);
      continue;
    }
    std::string text = value_text(v);
    if (k == "last_level_cache" && v.is_object()) {
      text = std::to_string(v.value("bytes", uint64_t{0}) >> 10) + " KiB" +
             (v.contains("level") ? " (L" + value_text(v["level"]) + ")" : "");
    }
    out += "<tr><th>" + esc(name) + "</th><td>" + esc(text) + "</td></tr>";
  }
}

std::string spread_text(const json& sp, int decimals) {
  return svg_num(sp.value("median", 0.0), decimals) + " (" +
         svg_num(sp.value("min", 0.0), decimals) + "\xE2\x80\x93" +
         svg_num(sp.value("max", 0.0), decimals) + ")";
}

const char* suite_title(const std::string& suite) {
  if (suite == "memory") return "Memory bandwidth (STREAM-style: armhive-stream)";
  if (suite == "crypto") return "Crypto (openssl speed, RSA sign/verify)";
  if (suite == "storage") return "Storage (fio, direct I/O)";
  return "Suite";
}

}  // namespace

std::string render_figures_section(const json& rep, const std::string& suite, bool emulated) {
  std::string s = "<h2 id=\"suite-" + esc(suite) + "\">" + esc(suite_title(suite)) + "</h2>";
  if (emulated) {
    s += "<p class=\"note\">Guest figures are EMULATED (QEMU TCG): they measure the emulator, "
         "not Arm hardware.</p>";
  }
  std::string version;
  for (const char* k : {"tool", "openssl_version", "fio_version"}) {
    if (rep.value(k, json()).is_string()) version = rep[k].get<std::string>();
  }
  s += "<table class=\"settings\">";
  if (!version.empty()) s += "<tr><th>tool version</th><td>" + esc(version) + "</td></tr>";
  settings_rows(rep.value("settings", json::object()), "", s);
  s += "</table>";
  for (const auto& sk : rep.value("skipped", json::array())) {
    s += "<p class=\"note\">Skipped: " + esc(sk.value("reason", std::string())) + "</p>";
  }

  const json& figures = rep.value("figures", json::array());
  const json& host = rep.value("host", json::object());
  const bool has_host = host.is_object() && host.value("available", false);
  // host_by_key points into host_figures, which outlives it.
  const json host_figures = has_host ? host.value("figures", json::array()) : json::array();
  std::map<std::string, const json*> host_by_key;
  for (const auto& f : host_figures) host_by_key[f.value("key", "")] = &f;
  std::map<std::string, double> ratio_by_key;
  const json& ratio = rep.value("guest_host_ratio", json::object());
  if (ratio.is_object() && ratio.value("available", false)) {
    for (const auto& r : ratio.value("ratios", json::array())) {
      if (r.value("ratio", json()).is_number()) ratio_by_key[r.value("key", "")] = r["ratio"];
    }
  }
  auto host_key = [](std::string key) {
    if (auto at = key.find(".guest."); at != std::string::npos) key.replace(at, 7, ".host.");
    return key;
  };

  s += "<table class=\"figures\"><tr><th>figure</th><th>unit</th><th>guest median "
       "(min\xE2\x80\x93max)</th><th>CV</th><th>n</th>";
  if (has_host) s += "<th>host median (min\xE2\x80\x93max)</th><th>guest/host</th>";
  s += "</tr>";
  for (const auto& f : figures) {
    const json& sp = f.value("spread", json::object());
    std::string key = f.value("key", "");
    s += "<tr><td>" + esc(f.value("label", key)) + "</td><td>" + esc(f.value("unit", "")) +
         "</td><td class=\"num\">" + spread_text(sp, 1) + "</td><td class=\"num\">" +
         svg_num(100 * sp.value("cv", 0.0), 1) + " %</td><td class=\"num\">" +
         esc(value_text(sp.value("n", json(0)))) + "</td>";
    if (has_host) {
      auto h = host_by_key.find(host_key(key));
      s += "<td class=\"num\">" +
           (h != host_by_key.end() ? spread_text(h->second->value("spread", json::object()), 1)
                                   : std::string("\xE2\x80\x93")) +
           "</td>";
      auto r = ratio_by_key.find(key);
      s += "<td class=\"num\">" +
           (r != ratio_by_key.end() ? svg_num(100 * r->second, 1) + " %"
                                    : std::string("\xE2\x80\x93")) +
           "</td>";
    }
    s += "</tr>";
  }
  s += "</table>";
  if (!has_host) {
    s += "<p class=\"note\">No host baseline, so no guest/host ratio: " +
         esc(host.value("reason", std::string("not run"))) + "</p>";
  }

  // One chart per group (and unit), in the order the groups first appear.
  std::vector<std::pair<std::string, std::string>> groups;
  std::map<std::pair<std::string, std::string>, std::vector<SvgBar>> bars;
  for (const auto& f : figures) {
    auto g = std::pair{f.value("group", ""), f.value("unit", "")};
    if (!bars.count(g)) groups.push_back(g);
    const json& sp = f.value("spread", json::object());
    std::string key = f.value("key", "");
    auto r = ratio_by_key.find(key);
    bars[g].push_back({(has_host ? "guest " : "") + f.value("name", key), sp.value("median", 0.0),
                       sp.value("min", 0.0), sp.value("max", 0.0),
                       r != ratio_by_key.end() ? "(" + svg_num(100 * r->second, 0) + " %)" : ""});
    if (auto h = host_by_key.find(host_key(key)); h != host_by_key.end()) {
      const json& hs = h->second->value("spread", json::object());
      bars[g].push_back({"host " + f.value("name", key), hs.value("median", 0.0),
                         hs.value("min", 0.0), hs.value("max", 0.0), ""});
    }
  }
  std::string charts;
  for (const auto& g : groups) {
    std::string title = g.first + " (" + g.second + ", median, min\xE2\x80\x93max)";
    charts += "<div>" + svg_bar_chart(title, g.second, bars[g]) + "</div>";
  }
  s += "<div class=\"charts\">" + charts + "</div>";
  return s;
}

}  // namespace armhive
