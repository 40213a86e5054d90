#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/xml_writer.h"

namespace armhive {

// Minimal SVG chart primitives for the self-contained HTML reports: no scripts, no external
// assets, written through XmlWriter (every text escaped, always well-formed). write_* append
// one <svg> element to a document being written; the others return a standalone one.
// Pure functions; any thread (one writer per thread).

// "%.Nf" in the C locale, trailing zeros kept; "–" for non-finite values.
std::string svg_num(double v, int decimals);

struct SvgLineSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y)
  bool emphasised = false;                        // drawn thick (e.g. the sum of streams)
};
void write_svg_line_chart(XmlWriter& w, std::string_view title, std::string_view x_label,
                          std::string_view y_label, const std::vector<SvgLineSeries>& series);
std::string svg_line_chart(std::string_view title, std::string_view x_label,
                           std::string_view y_label, const std::vector<SvgLineSeries>& series);

struct SvgBar {
  std::string label;
  double value = 0;
  std::optional<double> low;   // whisker (spread), e.g. min
  std::optional<double> high;  // e.g. max
  std::string annotation;      // printed above the bar, e.g. "×0.93"
  bool missing = false;        // no value: "n/a" instead of a bar (never drawn as 0)
  bool integer = false;        // print the value without decimals
};
void write_svg_bar_chart(XmlWriter& w, std::string_view title, std::string_view unit,
                         const std::vector<SvgBar>& bars);
std::string svg_bar_chart(std::string_view title, std::string_view unit,
                          const std::vector<SvgBar>& bars);

struct SvgStackedBar {
  std::string label;
  std::string sublabel;       // second line under the bar, e.g. the core's role ("vm", "hk")
  std::vector<double> parts;  // in the order of part_names; values in percent
};
void write_svg_stacked_bars(XmlWriter& w, std::string_view title,
                            const std::vector<std::string>& part_names,
                            const std::vector<SvgStackedBar>& bars);
std::string svg_stacked_bars(std::string_view title, const std::vector<std::string>& part_names,
                             const std::vector<SvgStackedBar>& bars);

}  // namespace armhive
