#include "cli/bench_summary.h"

#include <cstdio>
#include <map>
#include <string>

#include "cli/table.h"

namespace armhive {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// "17.2 (CV 20%)" from a spread object; "-" when absent.
std::string median_cv(const nlohmann::json& spread) {
  if (!spread.is_object() || !spread.contains("median") || !spread["median"].is_number()) {
    return "-";
  }
  std::string s = fixed(spread["median"].get<double>(), 1);
  if (spread.contains("cv") && spread["cv"].is_number()) {
    s += " (CV " + fixed(spread["cv"].get<double>() * 100, 0) + "%)";
  }
  return s;
}

// The busiest host core during a run: "cpu0 97%".
std::string busiest_core(const nlohmann::json& host_cpu) {
  if (!host_cpu.is_object() || !host_cpu.value("available", false)) return "-";
  std::string best = "-";
  double best_busy = -1;
  for (const auto& core : host_cpu.value("cores", nlohmann::json::array())) {
    if (!core.contains("idle") || !core["idle"].is_number()) continue;
    double busy = 100.0 - core["idle"].get<double>();
    if (busy > best_busy) {
      best_busy = busy;
      best = "cpu" + std::to_string(core.value("cpu", 0)) + " " + fixed(busy, 0) + "%";
    }
  }
  return best;
}

// The memory, crypto and storage suites share one figure form (daemon/bench/suite_figures.h).
void print_figures(const char* title, const nlohmann::json& suite, const char* version_key,
                   std::ostream& out) {
  if (!suite.is_object() || !suite.contains("figures") || !suite["figures"].is_array()) return;
  out << "\n" << title << " (" << suite.value(version_key, std::string("?")) << ")\n";
  std::map<std::string, double> ratios;
  const nlohmann::json& ratio =
      suite.contains("guest_host_ratio") ? suite["guest_host_ratio"] : nlohmann::json();
  if (ratio.is_object() && ratio.value("available", false) && ratio.contains("ratios")) {
    for (const auto& r : ratio["ratios"]) {
      if (r.is_object() && r.contains("ratio") && r["ratio"].is_number())
        ratios[r.value("key", "")] = r["ratio"].get<double>();
    }
  }
  Table t({"FIGURE", "UNIT", "GUEST MEDIAN", "GUEST/HOST"});
  for (const auto& f : suite["figures"]) {
    if (!f.is_object()) continue;
    auto r = ratios.find(f.value("key", ""));
    t.add({f.value("label", f.value("key", std::string("?"))), f.value("unit", std::string()),
           median_cv(f.contains("spread") ? f["spread"] : nlohmann::json()),
           r != ratios.end() ? fixed(100 * r->second, 1) + "%" : "-"});
  }
  t.print(out);
  if (suite.contains("host") && suite["host"].is_object() &&
      !suite["host"].value("available", false)) {
    out << "host: " << suite["host"].value("reason", std::string("not run")) << "\n";
  }
}

}  // namespace

void print_compare_settings(const nlohmann::json& cmp, std::ostream& out) {
  if (!cmp.is_object() || !cmp.contains("settings") || !cmp["settings"].is_array()) return;
  std::vector<std::string> header{"SETTING"};
  if (cmp.contains("runs") && cmp["runs"].is_array()) {
    for (const auto& r : cmp["runs"]) header.push_back(r.is_object() ? r.value("id", "?") : "?");
  }
  Table t(header);
  for (const auto& line : cmp["settings"]) {
    if (!line.is_object()) continue;
    std::string mark = line.value("blocking", false)  ? " !"
                       : line.value("differs", false) ? " *"
                                                      : "";
    std::vector<std::string> row{line.value("name", std::string("?")) + mark};
    for (const auto& v : line.value("values", nlohmann::json::array()))
      row.push_back(v.is_string() ? v.get<std::string>() : v.dump());
    t.add(row);
  }
  t.print(out);
  out << "(* differs, ! differs and makes the figures incomparable)\n\n";
}

std::string incomparable_message(const nlohmann::json& cmp) {
  if (!cmp.is_object() || !cmp.contains("incomparable") || !cmp["incomparable"].is_array() ||
      cmp["incomparable"].empty()) {
    return "";
  }
  std::string s = "armhive: these runs measured different work, so their figures do not compare:\n";
  for (const auto& d : cmp["incomparable"]) {
    if (d.is_string()) s += "  " + d.get<std::string>() + "\n";
  }
  s += "Re-run them with the same image (corpus and tool versions), or pass --allow-different "
       "to compare anyway.\n";
  return s;
}

void print_bench_summary(const nlohmann::json& report, std::ostream& out) {
  if (!report.is_object() || report.empty()) return;
  if (report.value("emulated", false)) {
    out << "\nEMULATED: " << report.value("emulation_note", std::string("guest under QEMU TCG"))
        << "\n";
  }
  const nlohmann::json& net = report.contains("network") ? report["network"] : nlohmann::json();
  if (net.is_object() && net.contains("runs") && !net["runs"].empty()) {
    out << "\nNetwork (" << net.value("iperf3_version", std::string("iperf3")) << ")\n";
    Table t(
        {"DIRECTION", "MTU", "STREAMS", "SECONDS", "GBIT/S", "RETRANSMITS", "BUSIEST HOST CORE"});
    for (const auto& run : net["runs"]) {
      const nlohmann::json& total = run.contains("total") ? run["total"] : nlohmann::json();
      std::string gbits = "-", retrans = "-";
      if (total.is_object() && total.contains("received_bits_per_second") &&
          total["received_bits_per_second"].is_number()) {
        gbits = fixed(total["received_bits_per_second"].get<double>() / 1e9, 3);
      }
      if (total.is_object() && total.contains("retransmits") && total["retransmits"].is_number()) {
        retrans = std::to_string(total["retransmits"].get<int64_t>());
      }
      t.add({run.value("direction", std::string("-")), std::to_string(run.value("mtu", 0)),
             std::to_string(run.value("streams", 0)), std::to_string(run.value("duration_s", 0)),
             gbits, retrans,
             busiest_core(run.contains("host_cpu") ? run["host_cpu"] : nlohmann::json())});
    }
    t.print(out);
  }
  const nlohmann::json& comp =
      report.contains("compression") ? report["compression"] : nlohmann::json();
  if (comp.is_object() && comp.contains("guest") && !comp["guest"].empty()) {
    const nlohmann::json& corpus = comp.contains("corpus") ? comp["corpus"] : nlohmann::json();
    out << "\nCompression (zstd " << comp.value("zstd_version", std::string("?")) << ", level "
        << comp.value("level", 0) << ", " << comp.value("repeats", 0) << " repeats; corpus "
        << (corpus.is_object() ? std::to_string(corpus.value("bytes", 0)) + " bytes, seed " +
                                     std::to_string(corpus.value("seed", 0))
                               : std::string("?"))
        << ")\n";
    Table t({"WHERE", "THREADS", "RATIO", "COMPRESS MB/S", "DECOMPRESS MB/S"});
    auto add_rows = [&](const char* where, const nlohmann::json& results) {
      for (const auto& r : results) {
        t.add({where, std::to_string(r.value("threads", 0)),
               r.contains("ratio") && r["ratio"].is_number() ? fixed(r["ratio"].get<double>(), 2)
                                                             : "-",
               median_cv(r.contains("compress_mb_s") ? r["compress_mb_s"] : nlohmann::json()),
               median_cv(r.contains("decompress_mb_s") ? r["decompress_mb_s"] : nlohmann::json())});
      }
    };
    add_rows("guest", comp["guest"]);
    if (comp.contains("host") && comp["host"].is_object() &&
        comp["host"].value("available", false)) {
      add_rows("host", comp["host"].value("results", nlohmann::json::array()));
    }
    t.print(out);
    if (comp.contains("host") && comp["host"].is_object() &&
        !comp["host"].value("available", false)) {
      out << "host: " << comp["host"].value("reason", std::string("not run")) << "\n";
    }
  }
  auto suite = [&](const char* k) { return report.contains(k) ? report[k] : nlohmann::json(); };
  print_figures("Memory bandwidth", suite("memory"), "tool", out);
  print_figures("Crypto", suite("crypto"), "openssl_version", out);
  print_figures("Storage", suite("storage"), "fio_version", out);
}

}  // namespace armhive
