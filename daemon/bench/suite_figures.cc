#include "daemon/bench/suite_figures.h"

#include <cmath>

#include "daemon/bench/report.h"
#include "daemon/bench/stats.h"

namespace armhive {

using nlohmann::json;

json figure_json(const FigureSpec& s, const std::vector<double>& samples) {
  return {{"key", s.suite + "." + s.side + "." + s.variant + "." + s.figure},
          {"label", s.label},
          {"group", s.group},
          {"name", s.name},
          {"unit", s.unit},
          {"threads", s.threads},
          {"higher_is_better", s.higher_is_better},
          {"spread", spread_json(compute_spread(samples), samples)}};
}

Status check_figures(const json& suite_report, const std::string& suite) {
  auto fail = [&](const std::string& what) {
    return Status(ErrorCode::kInternal, "inconsistent " + suite + " report: " + what);
  };
  auto check_list = [&](const json& list) -> Status {
    if (!list.is_array()) return fail("figures is not a list");
    for (const auto& f : list) {
      if (!f.is_object() || !f.contains("key") || !f["key"].is_string())
        return fail("a figure without a key");
      std::string key = f["key"].get<std::string>();
      if (!f.contains("unit") || !f["unit"].is_string() || f["unit"].get<std::string>().empty())
        return fail(key + " has no unit");
      const json& sp = f.value("spread", json::object());
      if (!sp.is_object() || !sp.value("n", json(0)).is_number() || sp.value("n", 0) <= 0)
        return fail(key + " has no samples");
      for (const auto& v : sp.value("samples", json::array())) {
        if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
          return fail(key + " has a sample that is not a positive number");
      }
      double med = sp.value("median", 0.0), lo = sp.value("min", 0.0), hi = sp.value("max", 0.0);
      if (!(med > 0) || med < lo || med > hi) return fail(key + " median outside [min, max]");
    }
    return Status::ok();
  };
  if (!suite_report.is_object()) return fail("not an object");
  const json& figures = suite_report.value("figures", json::array());
  if (figures.empty()) return fail("no figures");
  ARMHIVE_RETURN_IF_ERROR(check_list(figures));
  if (auto h = suite_report.find("host");
      h != suite_report.end() && h->is_object() && h->value("available", false)) {
    ARMHIVE_RETURN_IF_ERROR(check_list(h->value("figures", json::array())));
  }
  return Status::ok();
}

void append_figure_metrics(const json& suite_report, const std::string& suite,
                           std::vector<BenchMetric>& rows) {
  auto add = [&](const json& list, const std::string& side) {
    if (!list.is_array()) return;
    for (const auto& f : list) {
      if (!f.is_object() || !f.contains("key") || !f["key"].is_string()) continue;
      const json& sp = f.value("spread", json::object());
      if (!sp.is_object() || !sp.value("median", json()).is_number()) continue;
      BenchMetric m;
      m.key = f["key"].get<std::string>();
      m.label = f.value("label", m.key) + (side == "host" ? " (host)" : "");
      m.unit = f.value("unit", "");
      m.suite = suite;
      m.threads = f.value("threads", 0);
      m.value = sp["median"].get<double>();
      for (auto [k, dst] : {std::pair{"min", &m.min}, std::pair{"max", &m.max},
                            std::pair{"stddev", &m.stddev}, std::pair{"cv", &m.cv}}) {
        if (sp.value(k, json()).is_number()) *dst = sp[k].get<double>();
      }
      m.higher_is_better = f.value("higher_is_better", true);
      rows.push_back(std::move(m));
    }
  };
  try {
    add(suite_report.value("figures", json::array()), "guest");
    const json& host = suite_report.value("host", json::object());
    if (host.is_object() && host.value("available", false))
      add(host.value("figures", json::array()), "host");
    const json& ratio = suite_report.value("guest_host_ratio", json::object());
    if (ratio.is_object() && ratio.value("available", false)) {
      for (const auto& r : ratio.value("ratios", json::array())) {
        if (!r.is_object() || !r.value("ratio", json()).is_number()) continue;
        std::string key = r.value("key", "");
        if (auto at = key.find(".guest."); at != std::string::npos) key.replace(at, 7, ".ratio.");
        BenchMetric m;
        m.key = key;
        m.label = "guest/host " + r.value("label", key);
        m.unit = "x";
        m.suite = suite;
        m.value = r["ratio"].get<double>();
        rows.push_back(std::move(m));
      }
    }
  } catch (const json::exception&) {
    // Partial reports yield what was found.
  }
}

}  // namespace armhive
