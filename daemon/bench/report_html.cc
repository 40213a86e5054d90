// HTML rendering of report.h: render_benchmark_html(), written through XmlWriter (HTML syntax):
// everything user-controlled is escaped by it, and the page is well-formed XML so it can be
// checked with an XML parser.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>

#include "base/xml_writer.h"
#include "daemon/bench/report.h"
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
    ".charts{display:flex;flex-wrap:wrap;gap:12px}svg.chart{border:1px solid #ddd}";

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

constexpr const char* kDash = "\xE2\x80\x93";

// <tr><th>k</th><td>v</td></tr>
void row(XmlWriter& w, const std::string& k, const std::string& v) {
  w.start("tr").element("th", k).element("td", v).end();
}

// <td class="num">v</td>
void num_cell(XmlWriter& w, const std::string& v) {
  w.start("td").attr("class", "num").text(v).end();
}

void header_row(XmlWriter& w, std::initializer_list<const char*> names) {
  w.start("tr");
  for (const char* n : names) w.element("th", n);
  w.end();
}

void note(XmlWriter& w, const std::string& text) {
  w.start("p").attr("class", "note").text(text).end();
}

void state_badge(XmlWriter& w, const BenchmarkRun& r) {
  const char* cls = r.state == BenchmarkState::kSucceeded ? "ok"
                    : r.state == BenchmarkState::kFailed  ? "failed"
                                                          : "pending";
  w.start("span")
      .attr("class", std::string("badge ") + cls)
      .text(std::string(to_string(r.state)))
      .end();
}

void emulated_badge(XmlWriter& w, const json& report) {
  if (report.value("emulated", false)) {
    w.start("span").attr("class", "badge emulated").attr("id", "emulated-badge");
    w.text("EMULATED").end();
  } else if (report.contains("emulated")) {
    w.start("span").attr("class", "badge native").text("native (KVM)").end();
  }
}

std::string run_title(const BenchmarkRun& r) {
  return r.vm_name + " (" + r.pool + " @ " + r.host + ")";
}

void settings_table(XmlWriter& w, const BenchmarkRun& r) {
  const json& rep = r.report;
  json st = rep.value("settings", json::object());
  w.start("table").attr("class", "settings");
  row(w, "run", r.id);
  row(w, "lease", r.lease_id);
  row(w, "owner", r.owner);
  row(w, "VM", r.vm_name);
  row(w, "pool", r.pool);
  row(w, "host", r.host + (str(st, "host_arch").empty() ? "" : " (" + str(st, "host_arch") + ")"));
  row(w, "guest", str(st, "guest_arch") + ", " + str(st, "vcpus") + " vCPU");
  row(w, "pinned host cores", cpus_text(st.value("pinned_cpus", json::array())));
  row(w, "housekeeping cores", cpus_text(st.value("housekeeping_cpus", json::array())));
  row(w, "configured MTU", str(st, "mtu"));
  json net =
      r.request.suites.empty() || std::count(r.request.suites.begin(), r.request.suites.end(),
                                             std::string(kSuiteNetwork))
          ? json(to_json(r.request)["network"])
          : json(nullptr);
  if (!net.is_null()) {
    std::string mtus = net["mtus"].empty() ? "as configured" : cpus_text(net["mtus"]);
    row(w, "tested MTUs", mtus);
    row(w, "iperf3 streams (-P)", str(net, "streams"));
    row(w, "duration / interval", str(net, "duration_s") + " s / " + str(net, "interval_s") + " s");
    row(w, "client ports (--cport)", str(net, "cport") + " ...");
    row(w, "both directions (-R)", net.value("both_directions", true) ? "yes" : "no");
    if (auto n = rep.find("network"); n != rep.end() && n->is_object()) {
      row(w, "iperf3 (host client / guest server)",
          str(*n, "iperf3_version") + " / " + str(*n, "guest_iperf3_version"));
    }
  }
  if (auto c = rep.find("compression"); c != rep.end() && c->is_object()) {
    row(w, "zstd version (guest)", str(*c, "zstd_version"));
    row(w, "zstd level / repeats", str(*c, "level") + " / " + str(*c, "repeats"));
    json corpus = c->value("corpus", json::object());
    std::string cs = str(corpus, "path") + ", " + str(corpus, "bytes") + " bytes";
    if (!str(corpus, "seed").empty()) cs += ", seed " + str(corpus, "seed");
    if (!str(corpus, "sha256").empty()) cs += ", sha256 " + str(corpus, "sha256");
    if (!str(corpus, "description").empty()) cs += " (" + str(corpus, "description") + ")";
    row(w, "corpus", cs);
  }
  row(w, "emulated", rep.value("emulated", false) ? "yes: " + str(rep, "emulation_note") : "no");
  row(w, "created", to_rfc3339(r.created_at));
  if (to_unix_ms(r.finished_at) != 0) row(w, "finished", to_rfc3339(r.finished_at));
  w.end();
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

// One run of the network suite: its chart(s) inside <div>s, written into the charts writer.
struct NetworkRunCharts {
  std::vector<SvgLineSeries> series;
  std::string name;
  std::vector<SvgStackedBar> cpu_bars;
  bool cpu_available = false;
  std::string cpu_reason;
};

void network_section(XmlWriter& w, const json& net, const json& settings) {
  w.element("h2", "Network (iperf3)");
  std::vector<SvgBar> totals;
  std::vector<NetworkRunCharts> runs;
  w.start("table");
  header_row(w, {"direction", "MTU", "path MTU", "streams", "Gbit/s (received)", "retransmits",
                 "iperf3 CPU client/server %"});
  for (const auto& run : net.value("runs", json::array())) {
    std::string dir = str(run, "direction");
    std::string mtu = str(run, "mtu");
    std::string name = dir + ", MTU " + mtu;
    const json& total = run.at("total");
    double gbps = total.value("received_bits_per_second", 0.0) / 1e9;
    totals.push_back({name, gbps, std::nullopt, std::nullopt, ""});
    json cpu = run.value("iperf3_cpu_percent", json());
    w.start("tr").element("td", dir);
    num_cell(w, mtu);
    num_cell(w, str(run, "path_mtu"));
    num_cell(w, str(run, "streams"));
    num_cell(w, svg_num(gbps, 3));
    num_cell(w, str(total, "retransmits"));
    num_cell(w, cpu.is_object() ? svg_num(cpu.value("client_total", 0.0), 1) + " / " +
                                      svg_num(cpu.value("server_total", 0.0), 1)
                                : std::string(kDash));
    w.end();

    NetworkRunCharts charts;
    charts.name = name;
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
    for (auto& [port, ls] : per_port) charts.series.push_back(std::move(ls));
    charts.series.push_back(std::move(sum));

    // Host CPU split during the run, one stacked bar per core.
    const json& hc = run.value("host_cpu", json::object());
    charts.cpu_available = hc.value("available", false);
    charts.cpu_reason = str(hc, "reason");
    if (charts.cpu_available) {
      for (const auto& c : hc.value("cores", json::array())) {
        charts.cpu_bars.push_back(
            {"cpu" + str(c, "cpu"),
             core_role(settings, c.value("cpu", -1)),
             {c.value("user", 0.0), c.value("system", 0.0), c.value("irq", 0.0),
              c.value("softirq", 0.0), c.value("other", 0.0), c.value("idle", 0.0)}});
      }
    }
    runs.push_back(std::move(charts));
  }
  w.end();  // table
  if (totals.size() > 1) {
    w.start("div").attr("class", "charts");
    write_svg_bar_chart(w, "Received throughput by direction and MTU", "Gbit/s", totals);
    w.end();
  }
  w.start("div").attr("class", "charts");
  for (const NetworkRunCharts& c : runs) {
    w.start("div");
    write_svg_line_chart(w, "Throughput per interval: " + c.name, "seconds", "Gbit/s", c.series);
    w.end();
    if (c.cpu_available) {
      w.start("div");
      write_svg_stacked_bars(w, "Host CPU split: " + c.name,
                             {"user", "system", "irq", "softirq", "steal", "idle"}, c.cpu_bars);
      w.end();
    } else {
      note(w, "Host CPU split for " + c.name + " not available: " + c.cpu_reason);
    }
  }
  w.end();
  w.start("p").text("Host CPU split: user includes nice, idle includes iowait; under each core, ");
  w.element("b", "vm").text(" marks a core pinned to this VM, ");
  w.element("b", "hk").text(" a housekeeping core.").end();
}

void compression_series_rows(XmlWriter& w, const json& list, const std::string& where) {
  for (const auto& r : list) {
    auto spread = [&](const char* k) {
      const json& sp = r.at(k);
      return svg_num(sp.value("median", 0.0), 1) + " (" + svg_num(sp.value("min", 0.0), 1) + kDash +
             svg_num(sp.value("max", 0.0), 1) + ", CV " + svg_num(100 * sp.value("cv", 0.0), 1) +
             " %)";
    };
    w.start("tr").element("td", where);
    num_cell(w, str(r, "threads"));
    num_cell(w, str(r, "input_bytes"));
    num_cell(w, str(r, "compressed_bytes"));
    num_cell(w, svg_num(r.value("ratio", 0.0), 3));
    num_cell(w, spread("compress_mb_s"));
    num_cell(w, spread("decompress_mb_s"));
    w.end();
  }
}

void compression_section(XmlWriter& w, const json& c, bool emulated) {
  w.element("h2", "Compression (zstd -b" + str(c, "level") + ")");
  if (emulated) {
    note(w, "Guest figures are EMULATED (QEMU TCG): they measure the emulator, not Arm hardware.");
  }
  w.start("table");
  header_row(w, {"where", "threads", "input bytes", "compressed bytes", "ratio",
                 "compress MB/s median (min\xE2\x80\x93max, CV)",
                 "decompress MB/s median (min\xE2\x80\x93max, CV)"});
  compression_series_rows(w, c.value("guest", json::array()), "guest");
  json host = c.value("host", json::object());
  if (host.value("available", false))
    compression_series_rows(w, host.value("results", json::array()), "host");
  w.end();
  if (!host.value("available", false)) note(w, "No host run: " + str(host, "reason"));
  json ratio = c.value("guest_host_ratio", json::object());
  if (ratio.value("available", false)) {
    w.start("table");
    header_row(w, {"guest/host ratio", "threads", "compress", "decompress"});
    for (const auto& r : ratio.value("by_threads", json::array())) {
      w.start("tr").element("td", "");
      num_cell(w, str(r, "threads"));
      num_cell(w, svg_num(r.value("compress", 0.0), 3));
      num_cell(w, svg_num(r.value("decompress", 0.0), 3));
      w.end();
    }
    w.end();
  } else if (ratio.contains("reason") && str(ratio, "reason") != str(host, "reason")) {
    note(w, "No guest/host ratio: " + str(ratio, "reason"));
  }
  w.start("div").attr("class", "charts");
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
    w.start("div");
    write_svg_bar_chart(w, title, "MB/s", bars);
    w.end();
  }
  w.end();
}

void sensors_section(XmlWriter& w, const json& sensors) {
  w.element("h2", "Host temperature sensors");
  const json& before = sensors.value("before", json::array());
  const json& after = sensors.value("after", json::array());
  if (before.empty() && after.empty()) {
    note(w,
         "No temperature sensors: " + sensors.value("note", std::string("the host exposes none")));
    return;
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
  w.start("table");
  header_row(w, {"sensor", "label", "before", "after"});
  for (const auto& id : order) {
    const auto& [b, a] = by_id[id];
    std::string label = b.is_object() ? str(b, "label") : str(a, "label");
    w.start("tr").element("td", id).element("td", label);
    num_cell(w, cell(b));
    num_cell(w, cell(a));
    w.end();
  }
  w.end();
}

// Opens the page: doctype, <html>, the head with title and style, <body> (finish() closes them).
void open_page(XmlWriter& w, const std::string& title) {
  w.doctype_html();
  w.start("html").attr("xmlns", "http://www.w3.org/1999/xhtml").attr("lang", "en");
  w.start("head");
  w.start("meta").attr("charset", "utf-8").end();
  w.element("title", title);
  w.start("style").raw(kStyle).end();
  w.end();
  w.start("body");
}

std::string close_page(XmlWriter& w) {
  std::optional<std::string> html = w.finish();
  return html ? *html + "\n" : std::string();
}

std::string single_report(const BenchmarkRun& r) {
  const json& rep = r.report;
  bool emulated = rep.value("emulated", false);
  XmlWriter w(XmlWriter::Syntax::kHtml);
  open_page(w, "armhive benchmark " + r.id + " " + run_title(r));
  w.start("h1").text("Benchmark " + r.id + ": " + run_title(r));
  state_badge(w, r);
  emulated_badge(w, rep);
  w.end();
  if (emulated) {
    w.start("p").attr("class", "note").attr("id", "emulation-note");
    w.text("EMULATED: " + str(rep, "emulation_note")).end();
  }
  if (!r.error.empty()) note(w, "Failed: " + r.error);
  w.element("h2", "Settings");
  settings_table(w, r);
  if (auto n = rep.find("network"); n != rep.end() && n->is_object()) {
    network_section(w, *n, rep.value("settings", json::object()));
  }
  if (auto c = rep.find("compression"); c != rep.end() && c->is_object())
    compression_section(w, *c, emulated);
  if (auto se = rep.find("sensors"); se != rep.end() && se->is_object()) sensors_section(w, *se);
  return close_page(w);
}

std::string comparison(const std::vector<BenchmarkRun>& runs) {
  json cmp = compare_benchmark_runs(runs);
  XmlWriter w(XmlWriter::Syntax::kHtml);
  open_page(w, "armhive benchmark comparison");
  w.element("h1", "Benchmark comparison (" + std::to_string(runs.size()) + " runs)");
  bool any_emulated = false;
  w.start("table");
  header_row(w, {"#", "run", "VM", "pool", "host", "state", "mode"});
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    any_emulated |= r.report.value("emulated", false);
    w.start("tr");
    num_cell(w, std::to_string(i + 1));
    w.element("td", r.id).element("td", r.vm_name).element("td", r.pool).element("td", r.host);
    w.start("td");
    state_badge(w, r);
    w.end().start("td");
    emulated_badge(w, r.report);
    w.end().end();
  }
  w.end();
  if (any_emulated) {
    note(w, "Runs marked EMULATED ran under QEMU TCG: compare them only with each other.");
  }
  // The settings that make figures (in)comparable, side by side.
  w.element("h2", "Key settings");
  w.start("table").start("tr").element("th", "setting");
  for (size_t i = 0; i < runs.size(); ++i) w.element("th", std::to_string(i + 1));
  w.end();
  auto setting_row = [&](const std::string& name, auto value_of) {
    w.start("tr").element("th", name);
    for (const auto& r : runs) w.element("td", value_of(r));
    w.end();
  };
  auto settings = [](const BenchmarkRun& r) { return r.report.value("settings", json::object()); };
  auto has = [](const BenchmarkRun& r, std::string_view suite) {
    return std::find(r.request.suites.begin(), r.request.suites.end(), std::string(suite)) !=
           r.request.suites.end();
  };
  setting_row("host", [&](const BenchmarkRun& r) {
    return r.host + " (" + str(settings(r), "host_arch") + ")";
  });
  setting_row("vCPUs / pinned cores", [&](const BenchmarkRun& r) {
    return str(settings(r), "vcpus") + " / " +
           cpus_text(settings(r).value("pinned_cpus", json::array()));
  });
  setting_row("emulated", [](const BenchmarkRun& r) {
    return std::string(r.report.value("emulated", false) ? "EMULATED" : "no");
  });
  setting_row("suites", [](const BenchmarkRun& r) {
    std::string s;
    for (const auto& x : r.request.suites) s += (s.empty() ? "" : ", ") + x;
    return s;
  });
  setting_row("iperf3 streams / duration", [&](const BenchmarkRun& r) {
    return has(r, kSuiteNetwork) ? std::to_string(r.request.network.streams) + " / " +
                                       std::to_string(r.request.network.duration_s) + " s"
                                 : std::string(kDash);
  });
  setting_row("MTU", [&](const BenchmarkRun& r) {
    if (!has(r, kSuiteNetwork)) return std::string(kDash);
    return r.request.network.mtus.empty() ? str(settings(r), "mtu")
                                          : cpus_text(json(r.request.network.mtus));
  });
  setting_row("zstd version / level", [&](const BenchmarkRun& r) {
    if (!has(r, kSuiteCompression)) return std::string(kDash);
    json c = r.report.value("compression", json::object());
    return str(c, "zstd_version") + " / " + std::to_string(r.request.compression.level);
  });
  w.end();

  w.element("h2", "Metrics (ratio vs run 1)");
  w.start("table").start("tr").element("th", "metric");
  for (size_t i = 0; i < runs.size(); ++i)
    w.element("th", std::to_string(i + 1) + ": " + runs[i].vm_name);
  w.end();
  struct Chart {
    std::string title, unit;
    std::vector<SvgBar> bars;
  };
  std::vector<Chart> charts;
  for (const auto& m : cmp["metrics"]) {
    w.start("tr").element("td", m["label"].get<std::string>());
    std::vector<SvgBar> bars;
    for (size_t i = 0; i < runs.size(); ++i) {
      const json& v = m["values"][i];
      const json& ratio = m["ratios"][i];
      const bool count = m["unit"] == "count";
      std::string cell = v.is_number() ? svg_num(v.get<double>(), count ? 0 : 3) : kDash;
      std::string ann = ratio.is_number() ? "\xC3\x97" + svg_num(ratio.get<double>(), 2) : "";
      if (i > 0 && !ann.empty()) cell += " (" + ann + ")";
      num_cell(w, cell);
      SvgBar bar{std::to_string(i + 1) + ": " + runs[i].vm_name,
                 v.is_number() ? v.get<double>() : 0.0, std::nullopt, std::nullopt,
                 i > 0 ? ann : ""};
      bar.missing = !v.is_number();
      bar.integer = count;
      bars.push_back(bar);
    }
    w.end();
    if (m["unit"] != "count" && m["unit"] != "x") {
      charts.push_back({m["label"].get<std::string>(), m["unit"].get<std::string>(), bars});
    }
  }
  w.end();
  w.element("h2", "VMs side by side");
  w.start("div").attr("class", "charts");
  for (const Chart& c : charts) {
    w.start("div");
    write_svg_bar_chart(w, c.title, c.unit, c.bars);
    w.end();
  }
  w.end();
  for (const auto& r : runs) {
    w.element("h2", "Settings: " + r.id + " " + run_title(r));
    settings_table(w, r);
  }
  return close_page(w);
}

}  // namespace

std::string render_benchmark_html(const std::vector<BenchmarkRun>& runs) {
  if (runs.size() == 1) return single_report(runs.front());
  return comparison(runs);
}

}  // namespace armhive
