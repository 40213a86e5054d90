// HTML rendering of report.h: render_benchmark_html(). Everything user-controlled goes through
// xml_escape; the page is well-formed XML so it can be checked with an XML parser.
#include <algorithm>
#include <cmath>
#include <map>

#include "daemon/bench/compare_settings.h"
#include "daemon/bench/report.h"
#include "daemon/bench/suite_figures.h"
#include "daemon/bench/svg.h"

namespace armhive {
namespace {

using nlohmann::json;

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1400px}"
    "h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}"
    "h3{font-size:15px}"
    "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;"
    "text-align:left;font-size:13px}th{background:#f2f2f2}td.num{text-align:right}"
    ".badge{display:inline-block;padding:3px 10px;border-radius:4px;font-weight:bold;"
    "font-size:13px;margin-left:8px}"
    ".emulated{background:#b00020;color:#fff}.native{background:#2e7d32;color:#fff}"
    ".failed{background:#b00020;color:#fff}.ok{background:#2e7d32;color:#fff}"
    ".pending{background:#f9a825;color:#000}"
    ".note{background:#fff3cd;border:1px solid #e0c060;padding:6px 10px;font-size:13px}"
    ".charts{display:flex;flex-wrap:wrap;gap:12px}svg.chart{border:1px solid #ddd}"
    "tr.differs td{background:#fff3cd}tr.blocking td{background:#f8d7da}";

std::string esc(const std::string& s) { return xml_escape(s); }

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

std::string cpus_text(const json& j) {
  if (!j.is_array() || j.empty()) return "not pinned";
  std::string s;
  for (const auto& v : j) {
    if (!s.empty()) s += ",";
    s += v.dump();
  }
  return s;
}

std::string row(const std::string& k, const std::string& v) {
  return "<tr><th>" + esc(k) + "</th><td>" + esc(v) + "</td></tr>";
}

std::string state_badge(const BenchmarkRun& r) {
  const char* cls = r.state == BenchmarkState::kSucceeded ? "ok"
                    : r.state == BenchmarkState::kFailed  ? "failed"
                                                          : "pending";
  return "<span class=\"badge " + std::string(cls) + "\">" + esc(std::string(to_string(r.state))) +
         "</span>";
}

std::string emulated_badge(const json& report) {
  if (report.value("emulated", false)) {
    return "<span class=\"badge emulated\" id=\"emulated-badge\">EMULATED</span>";
  }
  if (report.contains("emulated")) return "<span class=\"badge native\">native (KVM)</span>";
  return "";
}

std::string run_title(const BenchmarkRun& r) {
  return r.vm_name + " (" + r.pool + " @ " + r.host + ")";
}

std::string settings_table(const BenchmarkRun& r) {
  const json& rep = r.report;
  json st = rep.value("settings", json::object());
  std::string s = "<table class=\"settings\">";
  s += row("run", r.id);
  s += row("lease", r.lease_id);
  s += row("owner", r.owner);
  s += row("VM", r.vm_name);
  s += row("pool", r.pool);
  s +=
      row("host", r.host + (str(st, "host_arch").empty() ? "" : " (" + str(st, "host_arch") + ")"));
  s += row("guest", str(st, "guest_arch") + ", " + str(st, "vcpus") + " vCPU");
  s += row("pinned host cores", cpus_text(st.value("pinned_cpus", json::array())));
  s += row("housekeeping cores", cpus_text(st.value("housekeeping_cpus", json::array())));
  s += row("configured MTU", str(st, "mtu"));
  json net =
      r.request.suites.empty() || std::count(r.request.suites.begin(), r.request.suites.end(),
                                             std::string(kSuiteNetwork))
          ? json(to_json(r.request)["network"])
          : json(nullptr);
  if (!net.is_null()) {
    std::string mtus = net["mtus"].empty() ? "as configured" : cpus_text(net["mtus"]);
    s += row("tested MTUs", mtus);
    s += row("iperf3 streams (-P)", str(net, "streams"));
    s += row("duration / interval",
             str(net, "duration_s") + " s / " + str(net, "interval_s") + " s");
    s += row("client ports (--cport)", str(net, "cport") + " ...");
    s += row("both directions (-R)", net.value("both_directions", true) ? "yes" : "no");
    if (auto n = rep.find("network"); n != rep.end() && n->is_object()) {
      s += row("iperf3 (host client / guest server)",
               str(*n, "iperf3_version") + " / " + str(*n, "guest_iperf3_version"));
    }
  }
  if (auto c = rep.find("compression"); c != rep.end() && c->is_object()) {
    s += row("zstd version (guest)", str(*c, "zstd_version"));
    s += row("zstd level / repeats", str(*c, "level") + " / " + str(*c, "repeats"));
    json corpus = c->value("corpus", json::object());
    std::string cs = str(corpus, "path") + ", " + str(corpus, "bytes") + " bytes";
    if (!str(corpus, "seed").empty()) cs += ", seed " + str(corpus, "seed");
    if (!str(corpus, "sha256").empty()) cs += ", sha256 " + str(corpus, "sha256");
    if (!str(corpus, "description").empty()) cs += " (" + str(corpus, "description") + ")";
    s += row("corpus", cs);
  }
  s += row("emulated", rep.value("emulated", false) ? "yes: " + str(rep, "emulation_note") : "no");
  s += row("created", to_rfc3339(r.created_at));
  if (to_unix_ms(r.finished_at) != 0) s += row("finished", to_rfc3339(r.finished_at));
  s += "</table>";
  return s;
}

// "vm" for host CPUs pinned to the VM, "hk" for housekeeping ones (IRQs, emulator threads).
std::string core_role(const json& settings, int cpu) {
  auto has = [&](const char* key) {
    for (const auto& c : settings.value(key, json::array())) {
      if (c.is_number_integer() && c.get<int>() == cpu) return true;
    }
    return false;
  };
  return has("pinned_cpus") ? "vm" : has("housekeeping_cpus") ? "hk" : "";
}

std::string network_section(const json& net, const json& settings) {
  std::string s = "<h2>Network (iperf3)</h2>";
  std::vector<SvgBar> totals;
  std::string table =
      "<table><tr><th>direction</th><th>MTU</th><th>path MTU</th><th>streams</th>"
      "<th>Gbit/s (received)</th><th>retransmits</th><th>iperf3 CPU client/server %</th></tr>";
  std::string charts;
  for (const auto& run : net.value("runs", json::array())) {
    std::string dir = str(run, "direction");
    std::string mtu = str(run, "mtu");
    std::string name = dir + ", MTU " + mtu;
    const json& total = run.at("total");
    double gbps = total.value("received_bits_per_second", 0.0) / 1e9;
    totals.push_back({name, gbps, std::nullopt, std::nullopt, ""});
    json cpu = run.value("iperf3_cpu_percent", json());
    table += "<tr><td>" + esc(dir) + "</td><td class=\"num\">" + esc(mtu) +
             "</td><td class=\"num\">" + esc(str(run, "path_mtu")) + "</td><td class=\"num\">" +
             esc(str(run, "streams")) + "</td><td class=\"num\">" + svg_num(gbps, 3) +
             "</td><td class=\"num\">" + esc(str(total, "retransmits")) +
             "</td><td class=\"num\">" +
             (cpu.is_object() ? svg_num(cpu.value("client_total", 0.0), 1) + " / " +
                                    svg_num(cpu.value("server_total", 0.0), 1)
                              : std::string("\xE2\x80\x93")) +
             "</td></tr>";

    // Throughput per interval per stream, plus the sum.
    std::map<int, SvgLineSeries> per_port;
    SvgLineSeries sum{"sum", {}, true};
    for (const auto& iv : run.value("intervals", json::array())) {
      double t = iv.value("end", 0.0);
      for (const auto& st : iv.value("streams", json::array())) {
        int port = st.value("port", 0);
        auto& ls = per_port[port];
        if (ls.name.empty()) ls.name = "port " + std::to_string(port);
        ls.points.emplace_back(t, st.value("bits_per_second", 0.0) / 1e9);
      }
      sum.points.emplace_back(t, iv.at("sum").value("bits_per_second", 0.0) / 1e9);
    }
    std::vector<SvgLineSeries> series;
    for (auto& [port, ls] : per_port) series.push_back(std::move(ls));
    series.push_back(std::move(sum));
    charts += "<div>" +
              svg_line_chart("Throughput per interval: " + name, "seconds", "Gbit/s", series) +
              "</div>";

    // Host CPU split during the run, one stacked bar per core.
    const json& hc = run.value("host_cpu", json::object());
    if (hc.value("available", false)) {
      std::vector<SvgStackedBar> bars;
      for (const auto& c : hc.value("cores", json::array())) {
        bars.push_back({"cpu" + str(c, "cpu"),
                        core_role(settings, c.value("cpu", -1)),
                        {c.value("user", 0.0), c.value("system", 0.0), c.value("irq", 0.0),
                         c.value("softirq", 0.0), c.value("other", 0.0), c.value("idle", 0.0)}});
      }
      charts += "<div>" +
                svg_stacked_bars("Host CPU split: " + name,
                                 {"user", "system", "irq", "softirq", "steal", "idle"}, bars) +
                "</div>";
    } else {
      charts += "<p class=\"note\">Host CPU split for " + esc(name) +
                " not available: " + esc(str(hc, "reason")) + "</p>";
    }
  }
  table += "</table>";
  s += table;
  if (totals.size() > 1) {
    s += "<div class=\"charts\">" +
         svg_bar_chart("Received throughput by direction and MTU", "Gbit/s", totals) + "</div>";
  }
  s += "<div class=\"charts\">" + charts + "</div>";
  s += "<p>Host CPU split: user includes nice, idle includes iowait; under each core, "
       "<b>vm</b> marks a core pinned to this VM, <b>hk</b> a housekeeping core.</p>";
  return s;
}

std::string compression_series_rows(const json& list, const std::string& where) {
  std::string s;
  for (const auto& r : list) {
    auto spread = [&](const char* k) {
      const json& sp = r.at(k);
      return svg_num(sp.value("median", 0.0), 1) + " (" + svg_num(sp.value("min", 0.0), 1) +
             "\xE2\x80\x93" + svg_num(sp.value("max", 0.0), 1) + ", CV " +
             svg_num(100 * sp.value("cv", 0.0), 1) + " %)";
    };
    s += "<tr><td>" + esc(where) + "</td><td class=\"num\">" + esc(str(r, "threads")) +
         "</td><td class=\"num\">" + esc(str(r, "input_bytes")) + "</td><td class=\"num\">" +
         esc(str(r, "compressed_bytes")) + "</td><td class=\"num\">" +
         svg_num(r.value("ratio", 0.0), 3) + "</td><td class=\"num\">" + spread("compress_mb_s") +
         "</td><td class=\"num\">" + spread("decompress_mb_s") + "</td></tr>";
  }
  return s;
}

std::string compression_section(const json& c, bool emulated) {
  std::string s = "<h2>Compression (zstd -b" + esc(str(c, "level")) + ")</h2>";
  if (emulated) {
    s += "<p class=\"note\">Guest figures are EMULATED (QEMU TCG): they measure the emulator, "
         "not Arm hardware.</p>";
  }
  s += "<table><tr><th>where</th><th>threads</th><th>input bytes</th><th>compressed bytes</th>"
       "<th>ratio</th><th>compress MB/s median (min\xE2\x80\x93max, CV)</th>"
       "<th>decompress MB/s median (min\xE2\x80\x93max, CV)</th></tr>";
  s += compression_series_rows(c.value("guest", json::array()), "guest");
  json host = c.value("host", json::object());
  if (host.value("available", false))
    s += compression_series_rows(host.value("results", json::array()), "host");
  s += "</table>";
  if (!host.value("available", false)) {
    s += "<p class=\"note\">No host run: " + esc(str(host, "reason")) + "</p>";
  }
  json ratio = c.value("guest_host_ratio", json::object());
  if (ratio.value("available", false)) {
    s += "<table><tr><th>guest/host "
         "ratio</th><th>threads</th><th>compress</th><th>decompress</th></tr>";
    for (const auto& r : ratio.value("by_threads", json::array())) {
      s += "<tr><td></td><td class=\"num\">" + esc(str(r, "threads")) + "</td><td class=\"num\">" +
           svg_num(r.value("compress", 0.0), 3) + "</td><td class=\"num\">" +
           svg_num(r.value("decompress", 0.0), 3) + "</td></tr>";
    }
    s += "</table>";
  } else if (ratio.contains("reason") && str(ratio, "reason") != str(host, "reason")) {
    s += "<p class=\"note\">No guest/host ratio: " + esc(str(ratio, "reason")) + "</p>";
  }
  std::string charts;
  for (const auto& metric :
       {std::pair{"compress_mb_s", "zstd compress MB/s (median, min\xE2\x80\x93max)"},
        std::pair{"decompress_mb_s", "zstd decompress MB/s (median, min\xE2\x80\x93max)"}}) {
    // Named copies, not a structured binding: lambdas below capture the key (clang < 16
    // refuses to capture structured bindings).
    const char* k = metric.first;
    const char* title = metric.second;
    std::vector<SvgBar> bars;
    auto add = [&](const json& list, const std::string& where) {
      for (const auto& r : list) {
        const json& sp = r.at(k);
        bars.push_back({where + " -T" + str(r, "threads"), sp.value("median", 0.0),
                        sp.value("min", 0.0), sp.value("max", 0.0), ""});
      }
    };
    add(c.value("guest", json::array()), "guest");
    if (host.value("available", false)) add(host.value("results", json::array()), "host");
    charts += "<div>" + svg_bar_chart(title, "MB/s", bars) + "</div>";
  }
  s += "<div class=\"charts\">" + charts + "</div>";
  return s;
}

std::string sensors_section(const json& sensors) {
  std::string s = "<h2>Host temperature sensors</h2>";
  const json& before = sensors.value("before", json::array());
  const json& after = sensors.value("after", json::array());
  if (before.empty() && after.empty()) {
    return s + "<p class=\"note\">No temperature sensors: " +
           esc(sensors.value("note", std::string("the host exposes none"))) + "</p>";
  }
  std::map<std::string, std::pair<json, json>> by_id;
  std::vector<std::string> order;
  for (const auto& r : before) {
    if (!by_id.count(str(r, "id"))) order.push_back(str(r, "id"));
    by_id[str(r, "id")].first = r;
  }
  for (const auto& r : after) {
    if (!by_id.count(str(r, "id"))) order.push_back(str(r, "id"));
    by_id[str(r, "id")].second = r;
  }
  auto cell = [](const json& r) {
    if (!r.is_object()) return std::string("absent");
    if (r.value("celsius", json()).is_number())
      return svg_num(r["celsius"].get<double>(), 1) +
             " \xC2\xB0"
             "C";
    return "unreadable" +
           (r.contains("error") ? ": " + r["error"].get<std::string>() : std::string());
  };
  s += "<table><tr><th>sensor</th><th>label</th><th>before</th><th>after</th></tr>";
  for (const auto& id : order) {
    const auto& [b, a] = by_id[id];
    std::string label = b.is_object() ? str(b, "label") : str(a, "label");
    s += "<tr><td>" + esc(id) + "</td><td>" + esc(label) + "</td><td class=\"num\">" +
         esc(cell(b)) + "</td><td class=\"num\">" + esc(cell(a)) + "</td></tr>";
  }
  return s + "</table>";
}

std::string page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\"><head>"
         "<meta charset=\"utf-8\"/><title>" +
         esc(title) + "</title><style>" + kStyle + "</style></head><body>" + body +
         "</body></html>\n";
}

std::string single_report(const BenchmarkRun& r) {
  const json& rep = r.report;
  bool emulated = rep.value("emulated", false);
  std::string body = "<h1>Benchmark " + esc(r.id) + ": " + esc(run_title(r)) + state_badge(r) +
                     emulated_badge(rep) + "</h1>";
  if (emulated) {
    body += "<p class=\"note\" id=\"emulation-note\">EMULATED: " + esc(str(rep, "emulation_note")) +
            "</p>";
  }
  if (!r.error.empty()) body += "<p class=\"note\">Failed: " + esc(r.error) + "</p>";
  body += "<h2>Settings</h2>" + settings_table(r);
  if (auto n = rep.find("network"); n != rep.end() && n->is_object()) {
    body += network_section(*n, rep.value("settings", json::object()));
  }
  if (auto c = rep.find("compression"); c != rep.end() && c->is_object())
    body += compression_section(*c, emulated);
  for (const char* suite : {"memory", "crypto", "storage"}) {
    if (auto it = rep.find(suite); it != rep.end() && it->is_object())
      body += render_figures_section(*it, suite, emulated);
  }
  if (auto se = rep.find("sensors"); se != rep.end() && se->is_object())
    body += sensors_section(*se);
  return page("armhive benchmark " + r.id + " " + run_title(r), body);
}

std::string comparison(const std::vector<BenchmarkRun>& runs) {
  json cmp = compare_benchmark_runs(runs);
  std::string body = "<h1>Benchmark comparison (" + std::to_string(runs.size()) + " runs)</h1>";
  bool any_emulated = false;
  body +=
      "<table><tr><th>#</th><th>run</th><th>VM</th><th>pool</th><th>host</th><th>state</"
      "th><th>mode</th></tr>";
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    any_emulated |= r.report.value("emulated", false);
    body += "<tr><td class=\"num\">" + std::to_string(i + 1) + "</td><td>" + esc(r.id) +
            "</td><td>" + esc(r.vm_name) + "</td><td>" + esc(r.pool) + "</td><td>" + esc(r.host) +
            "</td><td>" + state_badge(r) + "</td><td>" + emulated_badge(r.report) + "</td></tr>";
  }
  body += "</table>";
  if (any_emulated) {
    body +=
        "<p class=\"note\">Runs marked EMULATED ran under QEMU TCG: compare them only with each "
        "other.</p>";
  }
  // The settings that make figures (in)comparable, side by side (compare_settings.h).
  auto lines = line_up_settings(runs);
  body += "<h2>Key settings</h2><table class=\"lineup\"><tr><th>setting</th>";
  for (size_t i = 0; i < runs.size(); ++i) body += "<th>" + std::to_string(i + 1) + "</th>";
  body += "<th></th></tr>";
  bool blocking = false;
  for (const auto& l : lines) {
    blocking |= l.blocking;
    const char* cls = l.blocking ? " class=\"blocking\"" : l.differs ? " class=\"differs\"" : "";
    body += "<tr" + std::string(cls) + "><th>" + esc(l.name) + "</th>";
    for (const auto& v : l.values) body += "<td>" + esc(v) + "</td>";
    body += std::string("<td>") +
            (l.blocking  ? "differs: not comparable"
             : l.differs ? "differs"
                         : "") +
            "</td></tr>";
  }
  body += "</table>";
  if (blocking) {
    body +=
        "<p class=\"note\" id=\"incomparable\">The runs used different corpora or tool "
        "versions (marked red): their figures do not measure the same work.</p>";
  }
  body += "<h2>Metrics (ratio vs run 1)</h2><table><tr><th>metric</th>";
  for (size_t i = 0; i < runs.size(); ++i)
    body += "<th>" + std::to_string(i + 1) + ": " + esc(runs[i].vm_name) + "</th>";
  body += "</tr>";
  std::string charts;
  for (const auto& m : cmp["metrics"]) {
    body += "<tr><td>" + esc(m["label"].get<std::string>()) + "</td>";
    std::vector<SvgBar> bars;
    for (size_t i = 0; i < runs.size(); ++i) {
      const json& v = m["values"][i];
      const json& ratio = m["ratios"][i];
      const bool count = m["unit"] == "count";
      std::string cell = v.is_number() ? svg_num(v.get<double>(), count ? 0 : 3) : "\xE2\x80\x93";
      std::string ann = ratio.is_number() ? "\xC3\x97" + svg_num(ratio.get<double>(), 2) : "";
      if (i > 0 && !ann.empty()) cell += " (" + ann + ")";
      body += "<td class=\"num\">" + esc(cell) + "</td>";
      SvgBar bar{std::to_string(i + 1) + ": " + runs[i].vm_name,
                 v.is_number() ? v.get<double>() : 0.0, std::nullopt, std::nullopt,
                 i > 0 ? ann : ""};
      bar.missing = !v.is_number();
      bar.integer = count;
      bars.push_back(bar);
    }
    body += "</tr>";
    if (m["unit"] != "count" && m["unit"] != "x") {
      charts += "<div>" +
                svg_bar_chart(m["label"].get<std::string>(), m["unit"].get<std::string>(), bars) +
                "</div>";
    }
  }
  body += "</table><h2>VMs side by side</h2><div class=\"charts\">" + charts + "</div>";
  for (const auto& r : runs) {
    body += "<h2>Settings: " + esc(r.id) + " " + esc(run_title(r)) + "</h2>" + settings_table(r);
  }
  return page("armhive benchmark comparison", body);
}

}  // namespace

std::string render_benchmark_html(const std::vector<BenchmarkRun>& runs) {
  if (runs.size() == 1) return single_report(runs.front());
  return comparison(runs);
}

}  // namespace armhive
