#include "daemon/bench/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>

namespace armhive {
namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr size_t kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

const char* colour(size_t i) { return kPalette[i % kPaletteSize]; }

// A "nice" upper bound for an axis: 1, 2, 2.5 or 5 times a power of ten.
double nice_max(double v) {
  if (!(v > 0) || !std::isfinite(v)) return 1;
  double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

using Attrs = std::initializer_list<std::pair<std::string_view, std::string>>;

void attrs(XmlWriter& w, Attrs list) {
  for (const auto& [k, v] : list) w.attr(k, v);
}

void empty_el(XmlWriter& w, std::string_view name, Attrs list) {
  w.start(name);
  attrs(w, list);
  w.end();
}

void text_el(XmlWriter& w, double x, double y, std::string_view text, Attrs extra = {}) {
  w.start("text").attr("x", svg_num(x, 1)).attr("y", svg_num(y, 1));
  attrs(w, extra);
  w.text(text).end();
}

// Opens <svg> (closed by the caller) with its title, background and heading.
void open_svg(XmlWriter& w, int width, int height, std::string_view title) {
  w.start("svg")
      .attr("xmlns", "http://www.w3.org/2000/svg")
      .attr("width", width)
      .attr("height", height)
      .attr("viewBox", "0 0 " + std::to_string(width) + " " + std::to_string(height))
      .attr("role", "img")
      .attr("class", "chart");
  w.element("title", title);
  empty_el(w, "rect",
           {{"x", "0"},
            {"y", "0"},
            {"width", std::to_string(width)},
            {"height", std::to_string(height)},
            {"fill", "#ffffff"}});
  text_el(w, 10, 20, title, {{"font-size", "14"}, {"font-weight", "bold"}});
}

void line_el(XmlWriter& w, double x1, double y1, double x2, double y2, Attrs extra = {}) {
  w.start("line")
      .attr("x1", svg_num(x1, 1))
      .attr("y1", svg_num(y1, 1))
      .attr("x2", svg_num(x2, 1))
      .attr("y2", svg_num(y2, 1));
  attrs(w, extra);
  w.end();
}

// Horizontal grid lines and y tick labels for [0, ymax] mapped to [bottom, top].
void y_axis(XmlWriter& w, double ymax, double left, double right, double top, double bottom,
            std::string_view unit) {
  // 5 ticks when the top is 2.5 or 5 times a power of ten (steps of 0.5 / 1), else 4.
  double mant = ymax / std::pow(10.0, std::floor(std::log10(ymax)));
  const int ticks = std::fabs(mant - 2.5) < 1e-6 || std::fabs(mant - 5) < 1e-6 ? 5 : 4;
  for (int i = 0; i <= ticks; ++i) {
    double v = ymax * i / ticks;
    double y = bottom - (bottom - top) * i / ticks;
    line_el(w, left, y, right, y, {{"stroke", "#dddddd"}});
    text_el(w, left - 6, y + 4,
            svg_num(v, v >= 100  ? 0
                       : v >= 10 ? 1
                                 : 2),
            {{"font-size", "11"}, {"text-anchor", "end"}});
  }
  text_el(w, 12, (top + bottom) / 2, unit,
          {{"font-size", "11"},
           {"transform", "rotate(-90 12 " + svg_num((top + bottom) / 2, 1) + ")"},
           {"text-anchor", "middle"}});
}

std::string finished(XmlWriter& w) { return w.finish().value_or(std::string()); }

constexpr size_t kLegendRows = 16;

// Legend row of series i, or kLegendRows when it gets none.
size_t legend_slot(const std::vector<SvgLineSeries>& series, size_t i) {
  size_t emphasised = 0;
  for (const auto& s : series) emphasised += s.emphasised ? 1 : 0;
  const size_t plain_rows = kLegendRows > emphasised ? kLegendRows - emphasised : 0;
  size_t row = 0;
  for (size_t k = 0; k < i; ++k) {
    if (series[k].emphasised || row < plain_rows) ++row;
  }
  bool shown = series[i].emphasised || row < plain_rows;
  return shown && row < kLegendRows ? row : kLegendRows;
}

size_t hidden_legend_entries(const std::vector<SvgLineSeries>& series) {
  size_t hidden = 0;
  for (size_t i = 0; i < series.size(); ++i)
    hidden += legend_slot(series, i) == kLegendRows ? 1 : 0;
  return hidden;
}

}  // namespace

std::string svg_num(double v, int decimals) {
  if (!std::isfinite(v)) return "\xE2\x80\x93";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

void write_svg_line_chart(XmlWriter& w, std::string_view title, std::string_view x_label,
                          std::string_view y_label, const std::vector<SvgLineSeries>& series) {
  const int width = 720, h = 320;
  const double left = 60, right = width - 150, top = 35, bottom = h - 40;
  double xmax = 0, ymax = 0;
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) {
      if (std::isfinite(x)) xmax = std::max(xmax, x);
      if (std::isfinite(y)) ymax = std::max(ymax, y);
    }
  }
  // x ticks at a round step (1, 2 or 5 times a power of ten), at most 6 of them.
  xmax = xmax > 0 ? xmax : 1;
  double xstep = std::pow(10.0, std::floor(std::log10(xmax / 6)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (xmax / (m * xstep) <= 6) {
      xstep *= m;
      break;
    }
  }
  xmax = std::ceil(xmax / xstep - 0.02) * xstep;  // 3.0004 s of a 3 s test ends at 3
  ymax = nice_max(ymax);
  auto px = [&](double x) { return left + (right - left) * x / xmax; };
  auto py = [&](double y) { return bottom - (bottom - top) * y / ymax; };

  open_svg(w, width, h, title);
  y_axis(w, ymax, left, right, top, bottom, y_label);
  line_el(w, left, bottom, right, bottom, {{"stroke", "#333333"}});
  for (double x = 0; x <= xmax + xstep / 2; x += xstep) {
    text_el(w, px(x), bottom + 15, svg_num(x, xstep < 1 ? 1 : 0),
            {{"font-size", "11"}, {"text-anchor", "middle"}});
  }
  text_el(w, (left + right) / 2, h - 8, x_label, {{"font-size", "11"}, {"text-anchor", "middle"}});
  for (size_t i = 0; i < series.size(); ++i) {
    const auto& se = series[i];
    const std::string col = se.emphasised ? "#000000" : colour(i);
    std::string pts;
    for (const auto& [x, y] : se.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (!pts.empty()) pts += ' ';
      pts += svg_num(px(x), 1) + "," + svg_num(py(y), 1);
    }
    empty_el(w, "polyline",
             {{"fill", "none"},
              {"stroke", col},
              {"stroke-width", se.emphasised ? "3" : "1.5"},
              {"points", pts}});
    for (const auto& [x, y] : se.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      empty_el(w, "circle",
               {{"cx", svg_num(px(x), 1)}, {"cy", svg_num(py(y), 1)}, {"r", "2.5"}, {"fill", col}});
    }
    // The legend has room for 16 entries: the first 15 series, the emphasised ones (the sum)
    // always, and a count of the rest.
    size_t slot_i = legend_slot(series, i);
    if (slot_i < kLegendRows) {
      double ly = top + 14.0 * static_cast<double>(slot_i);
      empty_el(w, "rect",
               {{"x", svg_num(right + 12, 1)},
                {"y", svg_num(ly, 1)},
                {"width", "10"},
                {"height", "10"},
                {"fill", col}});
      text_el(w, right + 26, ly + 9, se.name, {{"font-size", "11"}});
    }
  }
  if (size_t hidden = hidden_legend_entries(series); hidden > 0) {
    text_el(w, right + 12, top + 14.0 * static_cast<double>(kLegendRows) + 9,
            "+" + std::to_string(hidden) + " more", {{"font-size", "11"}});
  }
  w.end();
}

std::string svg_line_chart(std::string_view title, std::string_view x_label,
                           std::string_view y_label, const std::vector<SvgLineSeries>& series) {
  XmlWriter w;
  write_svg_line_chart(w, title, x_label, y_label, series);
  return finished(w);
}

void write_svg_bar_chart(XmlWriter& w, std::string_view title, std::string_view unit,
                         const std::vector<SvgBar>& bars) {
  const double slot = 90;
  const int width = std::max(360, static_cast<int>(80 + slot * static_cast<double>(bars.size())));
  const int h = 300;
  const double left = 60, right = width - 20, top = 40, bottom = h - 60;
  double ymax = 0;
  for (const auto& b : bars) {
    if (std::isfinite(b.value)) ymax = std::max(ymax, b.value);
    if (b.high && std::isfinite(*b.high)) ymax = std::max(ymax, *b.high);
  }
  ymax = nice_max(ymax);
  auto py = [&](double y) { return bottom - (bottom - top) * std::clamp(y, 0.0, ymax) / ymax; };

  open_svg(w, width, h, title);
  y_axis(w, ymax, left, right, top, bottom, unit);
  for (size_t i = 0; i < bars.size(); ++i) {
    const auto& b = bars[i];
    double x = left + 15 + slot * static_cast<double>(i);
    double bw = slot - 30;
    if (b.missing) {
      text_el(w, x + bw / 2, bottom - 5, "n/a",
              {{"font-size", "11"}, {"text-anchor", "middle"}, {"fill", "#777777"}});
    }
    double v = std::isfinite(b.value) && !b.missing ? b.value : 0;
    if (!b.missing) {
      w.start("rect");
      attrs(w, {{"x", svg_num(x, 1)},
                {"y", svg_num(py(v), 1)},
                {"width", svg_num(bw, 1)},
                {"height", svg_num(bottom - py(v), 1)},
                {"fill", colour(i)}});
      w.element("title", b.label + ": " + svg_num(v, 2) + " " + std::string(unit)).end();
    }
    if (b.low && b.high) {
      double cx = x + bw / 2;
      w.start("g").attr("stroke", "#000000").attr("stroke-width", "1.5").attr("class", "whisker");
      line_el(w, cx, py(*b.low), cx, py(*b.high));
      for (double yv : {*b.low, *b.high}) line_el(w, cx - 8, py(yv), cx + 8, py(yv));
      w.end();
    }
    if (!b.missing) {
      std::string top_text = svg_num(v, v >= 100 || b.integer ? 0 : 2);
      if (!b.annotation.empty()) top_text += " " + b.annotation;
      double label_y = py(b.high ? std::max(v, *b.high) : v) - 5;
      text_el(w, x + bw / 2, label_y, top_text, {{"font-size", "11"}, {"text-anchor", "middle"}});
    }
    // Long labels wrap onto two lines of at most 14 characters.
    std::string l1 = b.label.substr(0, 14), l2 = b.label.size() > 14 ? b.label.substr(14, 14) : "";
    text_el(w, x + bw / 2, bottom + 15, l1, {{"font-size", "11"}, {"text-anchor", "middle"}});
    if (!l2.empty())
      text_el(w, x + bw / 2, bottom + 28, l2, {{"font-size", "11"}, {"text-anchor", "middle"}});
  }
  line_el(w, left, bottom, right, bottom, {{"stroke", "#333333"}});
  w.end();
}

std::string svg_bar_chart(std::string_view title, std::string_view unit,
                          const std::vector<SvgBar>& bars) {
  XmlWriter w;
  write_svg_bar_chart(w, title, unit, bars);
  return finished(w);
}

void write_svg_stacked_bars(XmlWriter& w, std::string_view title,
                            const std::vector<std::string>& part_names,
                            const std::vector<SvgStackedBar>& bars) {
  const double slot = 36;
  const int width = std::max(420, static_cast<int>(200 + slot * static_cast<double>(bars.size())));
  const int h = 310;
  const double left = 60, right = width - 130, top = 35, bottom = h - 50;
  auto py = [&](double pct) { return bottom - (bottom - top) * std::clamp(pct, 0.0, 100.0) / 100; };
  open_svg(w, width, h, title);
  y_axis(w, 100, left, right, top, bottom, "% of core time");
  for (size_t i = 0; i < bars.size(); ++i) {
    double x = left + 6 + slot * static_cast<double>(i);
    double acc = 0;
    for (size_t p = 0; p < bars[i].parts.size() && p < part_names.size(); ++p) {
      double v = std::isfinite(bars[i].parts[p]) ? std::max(0.0, bars[i].parts[p]) : 0;
      double y0 = py(acc), y1 = py(acc + v);
      acc += v;
      if (y0 - y1 <= 0) continue;
      w.start("rect");
      attrs(w, {{"x", svg_num(x, 1)},
                {"y", svg_num(y1, 1)},
                {"width", svg_num(slot - 10, 1)},
                {"height", svg_num(y0 - y1, 1)},
                {"fill", colour(p)}});
      w.element("title", bars[i].label + " " + part_names[p] + ": " + svg_num(v, 1) + " %").end();
    }
    text_el(w, x + (slot - 10) / 2, bottom + 15, bars[i].label,
            {{"font-size", "11"}, {"text-anchor", "middle"}});
    if (!bars[i].sublabel.empty()) {
      text_el(w, x + (slot - 10) / 2, bottom + 28, bars[i].sublabel,
              {{"font-size", "10"}, {"text-anchor", "middle"}, {"fill", "#555555"}});
    }
  }
  for (size_t p = 0; p < part_names.size(); ++p) {
    double ly = top + 14.0 * static_cast<double>(p);
    empty_el(w, "rect",
             {{"x", svg_num(right + 12, 1)},
              {"y", svg_num(ly, 1)},
              {"width", "10"},
              {"height", "10"},
              {"fill", colour(p)}});
    text_el(w, right + 26, ly + 9, part_names[p], {{"font-size", "11"}});
  }
  w.end();
}

std::string svg_stacked_bars(std::string_view title, const std::vector<std::string>& part_names,
                             const std::vector<SvgStackedBar>& bars) {
  XmlWriter w;
  write_svg_stacked_bars(w, title, part_names, bars);
  return finished(w);
}

}  // namespace armhive
