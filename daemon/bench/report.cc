#include "daemon/bench/report.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "base/csv.h"
#include "daemon/bench/compare_settings.h"
#include "daemon/bench/suite_figures.h"
#include "daemon/bench/svg.h"

namespace armhive {
namespace {

using nlohmann::json;

constexpr size_t kMaxCpuPeriodCells = 20000;

json opt(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

std::string direction_of(bool reverse) { return reverse ? "guest-to-host" : "host-to-guest"; }

std::string direction_label(const std::string& d) {
  return d == "guest-to-host" ? "guest\xE2\x86\x92host" : "host\xE2\x86\x92guest";
}

double num_or(const json& j, const char* key, double fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

std::optional<double> opt_num(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string csv_num(const std::optional<double>& v, int decimals) {
  return v && std::isfinite(*v) ? svg_num(*v, decimals) : "";
}

}  // namespace

json host_cpu_json(const HostCpuUsage& usage) {
  auto core = [](const CoreCpuSplit& c) {
    return json{{"cpu", c.cpu},         {"user", c.user}, {"system", c.system}, {"irq", c.irq},
                {"softirq", c.softirq}, {"idle", c.idle}, {"other", c.other}};
  };
  json cores = json::array();
  for (const auto& c : usage.cores) cores.push_back(core(c));
  json periods = json::array();
  // Per-period splits are kept while they stay small (a 600 s run on a 96-core host would be
  // ~400k numbers); the whole-run split per core is always there.
  size_t cells = usage.periods.empty() ? 0 : usage.periods.size() * usage.periods.front().size();
  if (cells > kMaxCpuPeriodCells) {
    return json{{"available", true},
                {"period_s", usage.period_s},
                {"cores", cores},
                {"periods", json::array()},
                {"periods_omitted", usage.periods.size()}};
  }
  for (const auto& p : usage.periods) {
    json one = json::array();
    for (const auto& c : p) one.push_back(core(c));
    periods.push_back(one);
  }
  return json{
      {"available", true}, {"period_s", usage.period_s}, {"cores", cores}, {"periods", periods}};
}

json network_run_json(const IperfResult& r, int mtu, const std::optional<HostCpuUsage>& host_cpu,
                      const std::string& host_cpu_error) {
  json intervals = json::array();
  std::optional<int> path_mtu;
  for (const auto& iv : r.intervals) {
    json streams = json::array();
    for (const auto& s : iv.streams) {
      streams.push_back({{"port", s.local_port},
                         {"bytes", s.bytes},
                         {"bits_per_second", s.bits_per_second},
                         {"retransmits", opt(s.retransmits)}});
      if (s.pmtu && !path_mtu) path_mtu = s.pmtu;
    }
    intervals.push_back({{"start", iv.start},
                         {"end", iv.end},
                         {"streams", streams},
                         {"sum",
                          {{"bytes", iv.sum_bytes},
                           {"bits_per_second", iv.sum_bits_per_second},
                           {"retransmits", opt(iv.sum_retransmits)}}}});
  }
  json per_stream = json::array();
  for (const auto& s : r.streams) {
    per_stream.push_back({{"port", s.local_port},
                          {"sender_bytes", s.sender_bytes},
                          {"receiver_bytes", s.receiver_bytes},
                          {"sender_bits_per_second", s.sender_bits_per_second},
                          {"receiver_bits_per_second", s.receiver_bits_per_second},
                          {"retransmits", opt(s.retransmits)}});
  }
  json cpu = nullptr;
  if (r.cpu) {
    cpu = {{"client_total", r.cpu->host_total},   {"client_user", r.cpu->host_user},
           {"client_system", r.cpu->host_system}, {"server_total", r.cpu->remote_total},
           {"server_user", r.cpu->remote_user},   {"server_system", r.cpu->remote_system}};
  }
  json j{{"direction", direction_of(r.reverse)},
         {"reverse", r.reverse},
         {"mtu", mtu},
         {"path_mtu", path_mtu ? json(*path_mtu) : json(nullptr)},
         {"streams", r.num_streams},
         {"ports", r.local_ports},
         {"duration_s", r.duration_s},
         {"iperf3_version", r.version},
         {"intervals", intervals},
         {"per_stream", per_stream},
         {"total",
          {{"sent_bytes", r.sent_bytes},
           {"received_bytes", r.received_bytes},
           {"sent_bits_per_second", r.sent_bits_per_second},
           {"received_bits_per_second", r.received_bits_per_second},
           {"retransmits", opt(r.retransmits)}}},
         {"iperf3_cpu_percent", cpu}};
  if (host_cpu) {
    j["host_cpu"] = host_cpu_json(*host_cpu);
  } else {
    j["host_cpu"] = {{"available", false}, {"reason", host_cpu_error}};
  }
  return j;
}

json spread_json(const SampleSpread& s, const std::vector<double>& samples) {
  return json{{"median", s.median}, {"min", s.min}, {"max", s.max}, {"mean", s.mean},
              {"stddev", s.stddev}, {"cv", s.cv},   {"n", s.n},     {"samples", samples}};
}

json zstd_series_json(int threads, const std::vector<ZstdBenchResult>& repeats) {
  std::vector<double> c, d, ratio;
  for (const auto& r : repeats) {
    c.push_back(r.compress_mb_s);
    d.push_back(r.decompress_mb_s);
    ratio.push_back(r.ratio);
  }
  json j{{"threads", threads}, {"repeats", repeats.size()}};
  if (!repeats.empty()) {
    j["level"] = repeats.front().level;
    j["input_bytes"] = repeats.front().input_bytes;
    j["compressed_bytes"] = repeats.front().compressed_bytes;
    j["ratio"] = compute_spread(ratio).median;
  }
  j["compress_mb_s"] = spread_json(compute_spread(c), c);
  j["decompress_mb_s"] = spread_json(compute_spread(d), d);
  return j;
}

json sensors_json(const std::vector<TempSensorReading>& readings) {
  json out = json::array();
  for (const auto& r : readings) {
    json one{{"id", r.id},
             {"label", r.label},
             {"celsius", r.celsius ? json(*r.celsius) : json(nullptr)}};
    if (!r.error.empty()) one["error"] = r.error;
    out.push_back(one);
  }
  return out;
}

Status check_benchmark_report(const json& report) {
  auto fail = [](std::string what) { return internal_error("inconsistent report: " + what); };
  try {
    if (report.value("schema", "") != kReportSchema)
      return fail("schema is not " + std::string(kReportSchema));
    if (auto n = report.find("network"); n != report.end() && !n->is_null()) {
      const auto& runs = n->at("runs");
      if (runs.empty()) return fail("network suite without runs");
      for (const auto& run : runs) {
        std::string where = run.at("direction").get<std::string>() + " MTU " +
                            std::to_string(run.at("mtu").get<int>());
        if (run.at("intervals").empty()) return fail(where + ": no intervals");
        for (const auto& iv : run.at("intervals")) {
          double sum = 0;
          uint64_t bytes = 0;
          for (const auto& s : iv.at("streams")) {
            sum += s.at("bits_per_second").get<double>();
            bytes += s.at("bytes").get<uint64_t>();
          }
          double reported = iv.at("sum").at("bits_per_second").get<double>();
          if (std::fabs(sum - reported) > 0.005 * reported + 1) {
            return fail(where + ": streams sum to " + svg_num(sum, 0) +
                        " bit/s but the interval sum is " + svg_num(reported, 0));
          }
          if (bytes != iv.at("sum").at("bytes").get<uint64_t>()) {
            return fail(where + ": stream bytes do not add up to the interval bytes");
          }
        }
        const auto& total = run.at("total");
        if (!(total.at("received_bits_per_second").get<double>() > 0) ||
            total.at("received_bytes").get<uint64_t>() == 0) {
          return fail(where + ": no data received");
        }
        uint64_t stream_bytes = 0;
        for (const auto& s : run.at("per_stream"))
          stream_bytes += s.at("receiver_bytes").get<uint64_t>();
        if (!run.at("per_stream").empty() &&
            stream_bytes != total.at("received_bytes").get<uint64_t>()) {
          return fail(where + ": per-stream received bytes do not add up to the total");
        }
      }
    }
    if (auto c = report.find("compression"); c != report.end() && !c->is_null()) {
      const auto& guest = c->at("guest");
      if (guest.empty()) return fail("compression suite without results");
      auto check_series = [&](const json& s, const std::string& where) -> Status {
        if (s.at("compressed_bytes").get<uint64_t>() >= s.at("input_bytes").get<uint64_t>()) {
          return fail(where + ": compressed size is not below the input size");
        }
        for (const char* k : {"compress_mb_s", "decompress_mb_s"}) {
          const auto& sp = s.at(k);
          double med = sp.at("median").get<double>();
          if (!(med > 0)) return fail(where + ": " + k + " median is not positive");
          if (med < sp.at("min").get<double>() || med > sp.at("max").get<double>()) {
            return fail(where + ": " + k + " median outside [min, max]");
          }
        }
        return Status::ok();
      };
      for (const auto& s : guest) {
        ARMHIVE_RETURN_IF_ERROR(
            check_series(s, "guest -T" + std::to_string(s.at("threads").get<int>())));
      }
      if (auto h = c->find("host"); h != c->end() && h->value("available", false)) {
        for (const auto& s : h->at("results")) {
          ARMHIVE_RETURN_IF_ERROR(
              check_series(s, "host -T" + std::to_string(s.at("threads").get<int>())));
        }
      }
    }
    for (const char* suite : {"memory", "crypto", "storage"}) {
      if (auto it = report.find(suite); it != report.end() && !it->is_null())
        ARMHIVE_RETURN_IF_ERROR(check_figures(*it, suite));
    }
  } catch (const json::exception& e) {
    return fail(std::string("malformed: ") + e.what());
  }
  return Status::ok();
}

std::vector<BenchMetric> extract_benchmark_metrics(const json& report) {
  std::vector<BenchMetric> rows;
  try {
    if (auto n = report.find("network"); n != report.end() && n->is_object()) {
      for (const auto& run : n->value("runs", json::array())) {
        std::string dir = run.value("direction", "");
        int mtu = run.value("mtu", 0);
        std::string base = "network." + dir + ".mtu" + std::to_string(mtu);
        std::string suffix = " (MTU " + std::to_string(mtu) + ")";
        const json& total = run.at("total");
        BenchMetric g{base + ".gbit_s",
                      direction_label(dir) + " Gbit/s" + suffix,
                      "Gbit/s",
                      "network",
                      dir,
                      mtu};
        g.value = num_or(total, "received_bits_per_second", 0) / 1e9;
        std::vector<double> per_iv;
        for (const auto& iv : run.value("intervals", json::array())) {
          per_iv.push_back(iv.at("sum").at("bits_per_second").get<double>() / 1e9);
        }
        if (!per_iv.empty()) {
          SampleSpread sp = compute_spread(per_iv);
          g.min = sp.min;
          g.max = sp.max;
          g.stddev = sp.stddev;
          g.cv = sp.cv;
        }
        rows.push_back(g);
        if (auto rt = opt_num(total, "retransmits")) {
          BenchMetric r{base + ".retransmits",
                        direction_label(dir) + " retransmits" + suffix,
                        "count",
                        "network",
                        dir,
                        mtu};
          r.value = *rt;
          r.higher_is_better = false;
          rows.push_back(r);
        }
      }
    }
    if (auto c = report.find("compression"); c != report.end() && c->is_object()) {
      auto add_series = [&](const json& s, const std::string& where) {
        int t = s.value("threads", 0);
        std::string base = "compression." + where + ".t" + std::to_string(t);
        std::string suffix =
            " (" + where + ", " + std::to_string(t) + (t == 1 ? " thread)" : " threads)");
        for (auto [k, label] : {std::pair{"compress_mb_s", "zstd compress MB/s"},
                                std::pair{"decompress_mb_s", "zstd decompress MB/s"}}) {
          const json& sp = s.at(k);
          BenchMetric m{base + "." + k, label + suffix, "MB/s", "compression", "", 0, t};
          m.value = sp.at("median").get<double>();
          m.min = opt_num(sp, "min");
          m.max = opt_num(sp, "max");
          m.stddev = opt_num(sp, "stddev");
          m.cv = opt_num(sp, "cv");
          rows.push_back(m);
        }
        BenchMetric r{base + ".ratio", "zstd ratio" + suffix, "x", "compression", "", 0, t};
        r.value = num_or(s, "ratio", 0);
        rows.push_back(r);
      };
      for (const auto& s : c->value("guest", json::array())) add_series(s, "guest");
      if (auto h = c->find("host"); h != c->end() && h->value("available", false)) {
        for (const auto& s : h->value("results", json::array())) add_series(s, "host");
      }
    }
    for (const char* suite : {"memory", "crypto", "storage"}) {
      if (auto it = report.find(suite); it != report.end() && it->is_object())
        append_figure_metrics(*it, suite, rows);
    }
  } catch (const json::exception&) {
    // A malformed (e.g. partial) report yields the metrics found so far.
  }
  return rows;
}

json compare_benchmark_runs(const std::vector<BenchmarkRun>& runs) {
  json out{{"runs", json::array()}, {"metrics", json::array()}};
  std::vector<std::string> order;
  std::map<std::string, BenchMetric> meta;
  std::vector<std::map<std::string, double>> values(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    out["runs"].push_back({{"id", r.id},
                           {"vm_name", r.vm_name},
                           {"pool", r.pool},
                           {"host", r.host},
                           {"state", std::string(to_string(r.state))},
                           {"emulated", r.report.value("emulated", false)},
                           {"created_at", to_rfc3339(r.created_at)}});
    for (const auto& m : extract_benchmark_metrics(r.report)) {
      if (!meta.count(m.key)) {
        meta.emplace(m.key, m);
        order.push_back(m.key);
      }
      values[i][m.key] = m.value;
    }
  }
  for (const auto& key : order) {
    const BenchMetric& m = meta.at(key);
    json vals = json::array(), ratios = json::array();
    auto first = values.empty() ? values.end() : values.begin();
    std::optional<double> base;
    if (first != values.end() && first->count(key)) base = first->at(key);
    for (const auto& v : values) {
      auto it = v.find(key);
      if (it == v.end()) {
        vals.push_back(nullptr);
        ratios.push_back(nullptr);
        continue;
      }
      vals.push_back(it->second);
      if (base && *base != 0) {
        ratios.push_back(it->second / *base);
      } else {
        ratios.push_back(nullptr);
      }
    }
    out["metrics"].push_back({{"key", key},
                              {"label", m.label},
                              {"unit", m.unit},
                              {"higher_is_better", m.higher_is_better},
                              {"values", vals},
                              {"ratios", ratios}});
  }
  auto lines = line_up_settings(runs);
  out["settings"] = settings_json(lines);
  out["incomparable"] = incomparable_json(lines);
  return out;
}

std::string render_benchmark_csv(const std::vector<BenchmarkRun>& runs) {
  std::string out =
      "run_id,created_at,vm_name,pool,host,emulated,state,suite,direction,mtu,threads,metric,unit,"
      "value,min,max,stddev,cv\r\n";
  for (const auto& r : runs) {
    bool emulated = r.report.value("emulated", false);
    for (const auto& m : extract_benchmark_metrics(r.report)) {
      std::vector<std::string> cells = {
          csv_field(r.id),
          csv_field(to_rfc3339(r.created_at)),
          csv_field(r.vm_name),
          csv_field(r.pool),
          csv_field(r.host),
          emulated ? "true" : "false",
          std::string(to_string(r.state)),
          m.suite,
          m.direction,
          m.mtu ? std::to_string(m.mtu) : "",
          m.threads ? std::to_string(m.threads) : "",
          csv_field(m.key),
          csv_field(m.unit),
          csv_num(m.value, 4),
          csv_num(m.min, 4),
          csv_num(m.max, 4),
          csv_num(m.stddev, 4),
          csv_num(m.cv, 4),
      };
      for (size_t i = 0; i < cells.size(); ++i) {
        if (i) out += ',';
        out += cells[i];
      }
      out += "\r\n";
    }
  }
  return out;
}

}  // namespace armhive
