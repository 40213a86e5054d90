#include "daemon/bench/health_chart.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "daemon/bench/svg.h"

namespace armhive {
namespace {

constexpr int kWidth = 760, kHeight = 360;
constexpr double kLeft = 70, kRight = kWidth - 190, kTop = 40, kBottom = kHeight - 60;

std::string utc(TimePoint t, const char* format) {
  std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

void text_at(XmlWriter& w, double x, double y, const std::string& text,
             const char* anchor = "start", const char* size = "11") {
  w.start("text")
      .attr("x", svg_num(x, 1))
      .attr("y", svg_num(y, 1))
      .attr("font-size", size)
      .attr("text-anchor", anchor)
      .text(text)
      .end();
}

void line_at(XmlWriter& w, double x1, double y1, double x2, double y2, const char* stroke,
             const char* dash = nullptr) {
  w.start("line")
      .attr("x1", svg_num(x1, 1))
      .attr("y1", svg_num(y1, 1))
      .attr("x2", svg_num(x2, 1))
      .attr("y2", svg_num(y2, 1))
      .attr("stroke", stroke);
  if (dash) w.attr("stroke-dasharray", dash);
  w.end();
}

int decimals_for(double step) { return step >= 5 ? 0 : step >= 0.5 ? 1 : step >= 0.05 ? 2 : 3; }

// The results of the newest result's figure, oldest first.
std::vector<HealthResult> one_figure(const std::vector<HealthResult>& results) {
  std::vector<HealthResult> out;
  if (results.empty()) return out;
  const std::string& figure = results.back().figure;
  for (const HealthResult& r : results) {
    if (r.figure == figure && std::isfinite(r.value)) out.push_back(r);
  }
  return out;
}

}  // namespace

void write_health_trend_svg(XmlWriter& w, const std::string& host, const std::string& pool,
                            const std::vector<HealthResult>& all) {
  const std::vector<HealthResult> rs = one_figure(all);
  const std::string title = rs.empty() ? "Health of host " + host + ", pool " + pool
                                       : "Health of host " + host + ", pool " + pool + ": " +
                                             rs.back().label + " (" + rs.back().suite + ")";
  w.start("svg")
      .attr("xmlns", "http://www.w3.org/2000/svg")
      .attr("width", kWidth)
      .attr("height", kHeight)
      .attr("viewBox", "0 0 " + std::to_string(kWidth) + " " + std::to_string(kHeight))
      .attr("role", "img")
      .attr("class", "chart health-trend");
  w.element("title", title);
  w.start("rect")
      .attr("x", "0")
      .attr("y", "0")
      .attr("width", kWidth)
      .attr("height", kHeight)
      .attr("fill", "#ffffff")
      .end();
  text_at(w, 10, 20, title, "start", "14");
  const std::string unit = rs.empty() ? "" : rs.back().unit;

  // y range: every value and band edge, padded; x range: first to last result.
  double ymin = INFINITY, ymax = -INFINITY;
  for (const HealthResult& r : rs) {
    ymin = std::min(ymin, r.value);
    ymax = std::max(ymax, r.value);
    if (r.band) {
      ymin = std::min(ymin, r.band->low);
      ymax = std::max(ymax, r.band->high);
    }
  }
  if (!std::isfinite(ymin)) ymin = 0, ymax = 1;
  if (ymax - ymin < 1e-9 * std::max(1.0, std::fabs(ymax))) {
    ymin -= std::max(1.0, std::fabs(ymin)) * 0.05;
    ymax += std::max(1.0, std::fabs(ymax)) * 0.05;
  }
  // Round ticks: a step of 1, 2, 2.5 or 5 times a power of ten, about five of them.
  const double pad = (ymax - ymin) * 0.1;
  ymin = std::max(0.0, ymin - pad);
  ymax += pad;
  double ystep = std::pow(10.0, std::floor(std::log10((ymax - ymin) / 5)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if ((ymax - ymin) / (m * ystep) <= 6) {
      ystep *= m;
      break;
    }
  }
  ymin = std::floor(ymin / ystep) * ystep;
  ymax = std::ceil(ymax / ystep) * ystep;
  const int yticks = static_cast<int>(std::lround((ymax - ymin) / ystep));
  const int ydec = decimals_for(ystep);
  const auto t0 = rs.empty() ? 0 : to_unix_ms(rs.front().at);
  auto t1 = rs.empty() ? 1 : to_unix_ms(rs.back().at);
  if (t1 <= t0) t1 = t0 + 3600 * 1000;  // one result: an hour's width
  auto px = [&](TimePoint t) {
    return kLeft + (kRight - kLeft) * static_cast<double>(to_unix_ms(t) - t0) /
                       static_cast<double>(t1 - t0);
  };
  auto py = [&](double v) { return kBottom - (kBottom - kTop) * (v - ymin) / (ymax - ymin); };

  // Axes, grid, ticks and labels.
  for (int i = 0; i <= yticks; ++i) {
    double v = ymin + ystep * i;
    line_at(w, kLeft, py(v), kRight, py(v), "#dddddd");
    text_at(w, kLeft - 6, py(v) + 4, svg_num(v, ydec), "end");
  }
  line_at(w, kLeft, kTop, kLeft, kBottom, "#333333");
  line_at(w, kLeft, kBottom, kRight, kBottom, "#333333");
  for (int i = 0; i <= 4; ++i) {
    const int64_t ms = t0 + (t1 - t0) * i / 4;
    const double x = kLeft + (kRight - kLeft) * i / 4;
    line_at(w, x, kBottom, x, kBottom + 5, "#333333");
    text_at(w, x, kBottom + 18, utc(from_unix_ms(ms), "%m-%d %H:%M"), "middle");
  }
  text_at(w, (kLeft + kRight) / 2, kHeight - 22, "time (UTC)", "middle");
  const double ymid = (kTop + kBottom) / 2;
  w.start("text")
      .attr("x", "14")
      .attr("y", svg_num(ymid, 1))
      .attr("font-size", "11")
      .attr("text-anchor", "middle")
      .attr("transform", "rotate(-90 14 " + svg_num(ymid, 1) + ")")
      .text(unit.empty() ? "value" : unit)
      .end();

  if (rs.empty()) {
    text_at(w, (kLeft + kRight) / 2, ymid, "no health results yet", "middle", "13");
    w.end();
    return;
  }

  // The band each result was checked against, as one shaded area, and its median.
  std::string upper, lower, median;
  for (const HealthResult& r : rs) {
    if (!r.band) continue;
    const std::string x = svg_num(px(r.at), 1);
    upper += x + "," + svg_num(py(r.band->high), 1) + " ";
    median += x + "," + svg_num(py(r.band->median), 1) + " ";
  }
  for (auto it = rs.rbegin(); it != rs.rend(); ++it) {
    if (!it->band) continue;
    lower += svg_num(px(it->at), 1) + "," + svg_num(py(it->band->low), 1) + " ";
  }
  if (!upper.empty()) {
    w.start("polygon")
        .attr("class", "band")
        .attr("points", upper + lower)
        .attr("fill", "#2ca02c")
        .attr("fill-opacity", "0.18")
        .attr("stroke", "#2ca02c")
        .attr("stroke-width", "0.5")
        .end();
    w.start("polyline")
        .attr("class", "band-median")
        .attr("points", median)
        .attr("fill", "none")
        .attr("stroke", "#2ca02c")
        .attr("stroke-dasharray", "4 3")
        .end();
  }
  std::string pts;
  for (const HealthResult& r : rs)
    pts += svg_num(px(r.at), 1) + "," + svg_num(py(r.value), 1) + " ";
  w.start("polyline")
      .attr("points", pts)
      .attr("fill", "none")
      .attr("stroke", "#1f77b4")
      .attr("stroke-width", "1.5")
      .end();
  for (const HealthResult& r : rs) {
    const bool bad = r.verdict == "degraded";
    w.start("circle")
        .attr("class", bad ? "degraded" : "result")
        .attr("cx", svg_num(px(r.at), 1))
        .attr("cy", svg_num(py(r.value), 1))
        .attr("r", bad ? "4.5" : "3")
        .attr("fill", bad ? "#d62728" : "#1f77b4");
    w.element("title", utc(r.at, "%Y-%m-%d %H:%M UTC") + ": " + svg_num(r.value, 2) + " " + r.unit +
                           " (" + r.verdict + ")");
    w.end();
  }

  // Legend.
  double ly = kTop;
  auto legend = [&](const char* fill, const std::string& label, const char* opacity = "1") {
    w.start("rect")
        .attr("x", svg_num(kRight + 14, 1))
        .attr("y", svg_num(ly, 1))
        .attr("width", "10")
        .attr("height", "10")
        .attr("fill", fill)
        .attr("fill-opacity", opacity)
        .end();
    text_at(w, kRight + 28, ly + 9, label);
    ly += 16;
  };
  legend("#1f77b4", "result (" + unit + ")");
  legend("#2ca02c", "band: median \xC2\xB1 k\xC3\x97MAD", "0.35");
  legend("#d62728", "outside the band: degraded");
  const HealthResult& last = rs.back();
  text_at(w, kRight + 14, ly + 12, "latest: " + svg_num(last.value, 2) + " " + unit);
  if (last.band) {
    text_at(w, kRight + 14, ly + 28,
            "band: " + svg_num(last.band->low, 2) + " \xE2\x80\x93 " + svg_num(last.band->high, 2));
    text_at(w, kRight + 14, ly + 44, "of the last " + std::to_string(last.band->n) + " runs");
  }
  text_at(w, kRight + 14, ly + 60, last.verdict);
  w.end();
}

std::string health_trend_svg(const std::string& host, const std::string& pool,
                             const std::vector<HealthResult>& results) {
  XmlWriter w;
  write_health_trend_svg(w, host, pool, results);
  return w.finish().value_or(std::string());
}

std::string health_trend_html(const std::string& host, const std::string& pool,
                              const std::vector<HealthResult>& results) {
  XmlWriter w(XmlWriter::Syntax::kHtml);
  w.doctype_html();
  w.start("html").attr("lang", "en");
  w.start("head");
  w.start("meta").attr("charset", "utf-8").end();
  w.element("title", "armhive health: " + host + ", pool " + pool);
  w.start("style")
      .raw(
          "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
          ".degraded{color:#d62728;font-weight:bold}")
      .end();
  w.end();
  w.start("body");
  w.element("h1", "Health benchmarks of host " + host + ", pool " + pool);
  w.start("p")
      .text(
          "Each point is one scheduled short benchmark on a fresh VM of the pool; "
          "a result outside the band of the host's earlier results marks the host "
          "degraded.")
      .end();
  write_health_trend_svg(w, host, pool, results);
  w.start("table");
  w.start("tr");
  for (const char* h : {"finished (UTC)", "figure", "value", "band", "verdict", "run", "reason"}) {
    w.element("th", h);
  }
  w.end();
  for (auto it = results.rbegin(); it != results.rend(); ++it) {
    w.start("tr");
    w.element("td", utc(it->at, "%Y-%m-%d %H:%M:%S"));
    w.element("td", it->label);
    w.element("td", svg_num(it->value, 2) + " " + it->unit);
    w.element("td", it->band ? svg_num(it->band->low, 2) + " \xE2\x80\x93 " +
                                   svg_num(it->band->high, 2) + " (median " +
                                   svg_num(it->band->median, 2) + ", n " +
                                   std::to_string(it->band->n) + ")"
                             : "none yet");
    w.start("td")
        .attr("class", it->verdict == "degraded" ? "degraded" : "")
        .text(it->verdict)
        .end();
    w.element("td", it->run_id);
    w.element("td", it->reason);
    w.end();
  }
  w.end();
  w.end();
  w.end();
  return w.finish().value_or(std::string());
}

}  // namespace armhive
