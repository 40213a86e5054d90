// HTML of the memory, crypto and storage suites (suite_figures.h), written through XmlWriter:
// every text is escaped by it.
#include <map>

#include "base/xml_writer.h"
#include "daemon/bench/suite_figures.h"
#include "daemon/bench/svg.h"

namespace armhive {
namespace {

using nlohmann::json;

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
void settings_rows(XmlWriter& w, const json& obj, const std::string& prefix) {
  for (const auto& [k, v] : obj.items()) {
    std::string name = prefix.empty() ? k : prefix + " " + k;
    if (v.is_object() && k != "last_level_cache") {
      settings_rows(w, v, name);
      continue;
    }
    std::string text = value_text(v);
    if (k == "last_level_cache" && v.is_object()) {
      text = std::to_string(v.value("bytes", uint64_t{0}) >> 10) + " KiB" +
             (v.contains("level") ? " (L" + value_text(v["level"]) + ")" : "");
    }
    w.start("tr").element("th", name).element("td", text).end();
  }
}

void note(XmlWriter& w, const std::string& text) {
  w.start("p").attr("class", "note").text(text).end();
}

void num_cell(XmlWriter& w, const std::string& text) {
  w.start("td").attr("class", "num").text(text).end();
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

void write_figures_section(XmlWriter& w, const json& rep, const std::string& suite, bool emulated) {
  w.start("h2").attr("id", "suite-" + suite).text(suite_title(suite)).end();
  if (emulated) {
    note(w, "Guest figures are EMULATED (QEMU TCG): they measure the emulator, not Arm hardware.");
  }
  std::string version;
  for (const char* k : {"tool", "openssl_version", "fio_version"}) {
    if (rep.value(k, json()).is_string()) version = rep[k].get<std::string>();
  }
  w.start("table").attr("class", "settings");
  if (!version.empty()) w.start("tr").element("th", "tool version").element("td", version).end();
  settings_rows(w, rep.value("settings", json::object()), "");
  w.end();
  for (const auto& sk : rep.value("skipped", json::array())) {
    note(w, "Skipped: " + sk.value("reason", std::string()));
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
  const std::string dash = "\xE2\x80\x93";

  w.start("table").attr("class", "figures").start("tr");
  w.element("th", "figure").element("th", "unit");
  w.element("th", "guest median (min\xE2\x80\x93max)").element("th", "CV").element("th", "n");
  if (has_host) w.element("th", "host median (min\xE2\x80\x93max)").element("th", "guest/host");
  w.end();
  for (const auto& f : figures) {
    const json& sp = f.value("spread", json::object());
    std::string key = f.value("key", "");
    w.start("tr").element("td", f.value("label", key)).element("td", f.value("unit", ""));
    num_cell(w, spread_text(sp, 1));
    num_cell(w, svg_num(100 * sp.value("cv", 0.0), 1) + " %");
    num_cell(w, value_text(sp.value("n", json(0))));
    if (has_host) {
      auto h = host_by_key.find(host_key(key));
      num_cell(w, h != host_by_key.end()
                      ? spread_text(h->second->value("spread", json::object()), 1)
                      : dash);
      auto r = ratio_by_key.find(key);
      num_cell(w, r != ratio_by_key.end() ? svg_num(100 * r->second, 1) + " %" : dash);
    }
    w.end();
  }
  w.end();
  if (!has_host) {
    note(w, "No host baseline, so no guest/host ratio: " +
                host.value("reason", std::string("not run")));
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
  w.start("div").attr("class", "charts");
  for (const auto& g : groups) {
    w.start("div");
    write_svg_bar_chart(w, g.first + " (" + g.second + ", median, min\xE2\x80\x93max)", g.second,
                        bars[g]);
    w.end();
  }
  w.end();
}

}  // namespace armhive
