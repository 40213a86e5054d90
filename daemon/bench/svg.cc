#include "daemon/bench/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

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

std::string text_el(double x, double y, std::string_view text, std::string_view extra = {}) {
  std::string s = "<text x=\"" + svg_num(x, 1) + "\" y=\"" + svg_num(y, 1) + "\"";
  if (!extra.empty()) s += " " + std::string(extra);
  s += ">" + xml_escape(text) + "</text>";
  return s;
}

std::string open_svg(int w, int h, std::string_view title) {
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) +
                  "\" height=\"" + std::to_string(h) + "\" viewBox=\"0 0 " + std::to_string(w) +
                  " " + std::to_string(h) + "\" role=\"img\" class=\"chart\">";
  s += "<title>" + xml_escape(title) + "</title>";
  s += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(h) +
       "\" fill=\"#ffffff\"/>";
  s += text_el(10, 20, title, "font-size=\"14\" font-weight=\"bold\"");
  return s;
}

// Horizontal grid lines and y tick labels for [0, ymax] mapped to [bottom, top].
std::string y_axis(double ymax, double left, double right, double top, double bottom,
                   std::string_view unit) {
  std::string s;
  // 5 ticks when the top is 2.5 or 5 times a power of ten (steps of 0.5 / 1), else 4.
  double mant = ymax / std::pow(10.0, std::floor(std::log10(ymax)));
  const int ticks = std::fabs(mant - 2.5) < 1e-6 || std::fabs(mant - 5) < 1e-6 ? 5 : 4;
  for (int i = 0; i <= ticks; ++i) {
    double v = ymax * i / ticks;
    double y = bottom - (bottom - top) * i / ticks;
    s += "<line x1=\"" + svg_num(left, 1) + "\" y1=\"" + svg_num(y, 1) + "\" x2=\"" +
         svg_num(right, 1) + "\" y2=\"" + svg_num(y, 1) + "\" stroke=\"#dddddd\"/>";
    s += text_el(left - 6, y + 4,
                 svg_num(v, v >= 100  ? 0
                            : v >= 10 ? 1
                                      : 2),
                 "font-size=\"11\" text-anchor=\"end\"");
  }
  s += text_el(12, (top + bottom) / 2, unit,
               "font-size=\"11\" transform=\"rotate(-90 12 " + svg_num((top + bottom) / 2, 1) +
                   ")\" text-anchor=\"middle\"");
  return s;
}

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

std::string svg_line_chart(std::string_view title, std::string_view x_label,
                           std::string_view y_label, const std::vector<SvgLineSeries>& series) {
  const int w = 720, h = 320;
  const double left = 60, right = w - 150, top = 35, bottom = h - 40;
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

  std::string s = open_svg(w, h, title);
  s += y_axis(ymax, left, right, top, bottom, y_label);
  s += "<line x1=\"" + svg_num(left, 1) + "\" y1=\"" + svg_num(bottom, 1) + "\" x2=\"" +
       svg_num(right, 1) + "\" y2=\"" + svg_num(bottom, 1) + "\" stroke=\"#333333\"/>";
  for (double x = 0; x <= xmax + xstep / 2; x += xstep) {
    s += text_el(px(x), bottom + 15, svg_num(x, xstep < 1 ? 1 : 0),
                 "font-size=\"11\" text-anchor=\"middle\"");
  }
  s += text_el((left + right) / 2, h - 8, x_label, "font-size=\"11\" text-anchor=\"middle\"");
  for (size_t i = 0; i < series.size(); ++i) {
    const auto& se = series[i];
    const char* col = se.emphasised ? "#000000" : colour(i);
    std::string pts;
    for (const auto& [x, y] : se.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (!pts.empty()) pts += ' ';
      pts += svg_num(px(x), 1) + "," + svg_num(py(y), 1);
    }
    s += "<polyline fill=\"none\" stroke=\"" + std::string(col) + "\" stroke-width=\"" +
         (se.emphasised ? "3" : "1.5") + "\" points=\"" + pts + "\"/>";
    for (const auto& [x, y] : se.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      s += "<circle cx=\"" + svg_num(px(x), 1) + "\" cy=\"" + svg_num(py(y), 1) +
           "\" r=\"2.5\" fill=\"" + col + "\"/>";
    }
    // The legend has room for 16 entries: the first 15 series, the emphasised ones (the sum)
    // always, and a count of the rest.
    size_t slot_i = legend_slot(series, i);
    if (slot_i < kLegendRows) {
      double ly = top + 14.0 * static_cast<double>(slot_i);
      s += "<rect x=\"" + svg_num(right + 12, 1) + "\" y=\"" + svg_num(ly, 1) +
           "\" width=\"10\" height=\"10\" fill=\"" + col + "\"/>";
      s += text_el(right + 26, ly + 9, se.name, "font-size=\"11\"");
    }
  }
  if (size_t hidden = hidden_legend_entries(series); hidden > 0) {
    s += text_el(right + 12, top + 14.0 * static_cast<double>(kLegendRows) + 9,
                 "+" + std::to_string(hidden) + " more", "font-size=\"11\"");
  }
  s += "</svg>";
  return s;
}

std::string svg_bar_chart(std::string_view title, std::string_view unit,
                          const std::vector<SvgBar>& bars) {
  const double slot = 90;
  // Wide enough for the bars and for the title (bold 13 px: about 8 px per character).
  const int w = std::max({360, static_cast<int>(80 + slot * static_cast<double>(bars.size())),
                          static_cast<int>(30 + 8 * title.size())});
  const int h = 300;
  const double left = 60, right = w - 20, top = 40, bottom = h - 60;
  double ymax = 0;
  for (const auto& b : bars) {
    if (std::isfinite(b.value)) ymax = std::max(ymax, b.value);
    if (b.high && std::isfinite(*b.high)) ymax = std::max(ymax, *b.high);
  }
  ymax = nice_max(ymax);
  auto py = [&](double y) { return bottom - (bottom - top) * std::clamp(y, 0.0, ymax) / ymax; };

  std::string s = open_svg(w, h, title);
  s += y_axis(ymax, left, right, top, bottom, unit);
  for (size_t i = 0; i < bars.size(); ++i) {
    const auto& b = bars[i];
    double x = left + 15 + slot * static_cast<double>(i);
    double bw = slot - 30;
    if (b.missing) {
      s += text_el(x + bw / 2, bottom - 5, "n/a",
                   "font-size=\"11\" text-anchor=\"middle\" fill=\"#777777\"");
    }
    double v = std::isfinite(b.value) && !b.missing ? b.value : 0;
    if (!b.missing)
      s += "<rect x=\"" + svg_num(x, 1) + "\" y=\"" + svg_num(py(v), 1) + "\" width=\"" +
           svg_num(bw, 1) + "\" height=\"" + svg_num(bottom - py(v), 1) + "\" fill=\"" + colour(i) +
           "\"><title>" + xml_escape(b.label + ": " + svg_num(v, 2) + " " + std::string(unit)) +
           "</title></rect>";
    if (b.low && b.high) {
      double cx = x + bw / 2;
      s += "<g stroke=\"#000000\" stroke-width=\"1.5\" class=\"whisker\">";
      s += "<line x1=\"" + svg_num(cx, 1) + "\" y1=\"" + svg_num(py(*b.low), 1) + "\" x2=\"" +
           svg_num(cx, 1) + "\" y2=\"" + svg_num(py(*b.high), 1) + "\"/>";
      for (double yv : {*b.low, *b.high}) {
        s += "<line x1=\"" + svg_num(cx - 8, 1) + "\" y1=\"" + svg_num(py(yv), 1) + "\" x2=\"" +
             svg_num(cx + 8, 1) + "\" y2=\"" + svg_num(py(yv), 1) + "\"/>";
      }
      s += "</g>";
    }
    if (!b.missing) {
      std::string top_text = svg_num(v, v >= 100 || b.integer ? 0 : 2);
      if (!b.annotation.empty()) top_text += " " + b.annotation;
      double label_y = py(b.high ? std::max(v, *b.high) : v) - 5;
      s += text_el(x + bw / 2, label_y, top_text, "font-size=\"11\" text-anchor=\"middle\"");
    }
    // Long labels wrap onto two lines of at most 14 characters.
    std::string l1 = b.label.substr(0, 14), l2 = b.label.size() > 14 ? b.label.substr(14, 14) : "";
    s += text_el(x + bw / 2, bottom + 15, l1, "font-size=\"11\" text-anchor=\"middle\"");
    if (!l2.empty())
      s += text_el(x + bw / 2, bottom + 28, l2, "font-size=\"11\" text-anchor=\"middle\"");
  }
  s += "<line x1=\"" + svg_num(left, 1) + "\" y1=\"" + svg_num(bottom, 1) + "\" x2=\"" +
       svg_num(right, 1) + "\" y2=\"" + svg_num(bottom, 1) + "\" stroke=\"#333333\"/>";
  s += "</svg>";
  return s;
}

std::string svg_stacked_bars(std::string_view title, const std::vector<std::string>& part_names,
                             const std::vector<SvgStackedBar>& bars) {
  const double slot = 36;
  const int w = std::max(420, static_cast<int>(200 + slot * static_cast<double>(bars.size())));
  const int h = 310;
  const double left = 60, right = w - 130, top = 35, bottom = h - 50;
  auto py = [&](double pct) { return bottom - (bottom - top) * std::clamp(pct, 0.0, 100.0) / 100; };
  std::string s = open_svg(w, h, title);
  s += y_axis(100, left, right, top, bottom, "% of core time");
  for (size_t i = 0; i < bars.size(); ++i) {
    double x = left + 6 + slot * static_cast<double>(i);
    double acc = 0;
    for (size_t p = 0; p < bars[i].parts.size() && p < part_names.size(); ++p) {
      double v = std::isfinite(bars[i].parts[p]) ? std::max(0.0, bars[i].parts[p]) : 0;
      double y0 = py(acc), y1 = py(acc + v);
      acc += v;
      if (y0 - y1 <= 0) continue;
      s += "<rect x=\"" + svg_num(x, 1) + "\" y=\"" + svg_num(y1, 1) + "\" width=\"" +
           svg_num(slot - 10, 1) + "\" height=\"" + svg_num(y0 - y1, 1) + "\" fill=\"" + colour(p) +
           "\"><title>" +
           xml_escape(bars[i].label + " " + part_names[p] + ": " + svg_num(v, 1) + " %") +
           "</title></rect>";
    }
    s += text_el(x + (slot - 10) / 2, bottom + 15, bars[i].label,
                 "font-size=\"11\" text-anchor=\"middle\"");
    if (!bars[i].sublabel.empty()) {
      s += text_el(x + (slot - 10) / 2, bottom + 28, bars[i].sublabel,
                   "font-size=\"10\" text-anchor=\"middle\" fill=\"#555555\"");
    }
  }
  for (size_t p = 0; p < part_names.size(); ++p) {
    double ly = top + 14.0 * static_cast<double>(p);
    s += "<rect x=\"" + svg_num(right + 12, 1) + "\" y=\"" + svg_num(ly, 1) +
         "\" width=\"10\" height=\"10\" fill=\"" + colour(p) + "\"/>";
    s += text_el(right + 26, ly + 9, part_names[p], "font-size=\"11\"");
  }
  s += "</svg>";
  return s;
}

}  // namespace armhive
