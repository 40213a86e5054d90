#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/xml_writer.h"
#include "daemon/bench/report.h"

namespace armhive {

// The figures of the memory, crypto and storage suites, in one form so that the report, the
// CSV, the comparison and the charts treat them alike (README.md "Report JSON"):
//   {"key": "memory.guest.t1.triad_mb_s", "label": "triad, 1 thread", "group": "1 thread",
//    "name": "triad", "unit": "MB/s", "threads": 1, "higher_is_better": true,
//    "spread": {"median", "min", "max", "mean", "stddev", "cv", "n", "samples": [..]}}
// Keys are "<suite>.<guest|host>.<variant>.<figure>". Pure; any thread.
struct FigureSpec {
  std::string suite;    // "memory"
  std::string side;     // "guest" / "host"
  std::string variant;  // "t1", "p2", "seq_read"
  std::string figure;   // "triad_mb_s"
  std::string label;    // "triad, 1 thread"
  std::string group;    // charts put one group's figures side by side
  std::string name;     // the bar label within the group ("triad")
  std::string unit;     // "MB/s", "ops/s", "IOPS", "µs"
  int threads = 0;      // processes/threads, 0 when it does not apply
  bool higher_is_better = true;
};

nlohmann::json figure_json(const FigureSpec& spec, const std::vector<double>& samples);

// What check_benchmark_report checks for these suites: every figure has a key, a unit and a
// spread with n > 0, finite positive samples, and a median within [min, max]. kInternal naming
// the figure otherwise.
Status check_figures(const nlohmann::json& suite_report, const std::string& suite);

// The suite's figures as comparison/CSV metrics: guest and host figures under their keys
// (median value with min/max/stddev/CV), and each guest/host ratio as
// "<suite>.ratio.<variant>.<figure>" (unit "x"). Skips what is malformed.
void append_figure_metrics(const nlohmann::json& suite_report, const std::string& suite,
                           std::vector<BenchMetric>& rows);

// The HTML section of one of these suites (figures_html.cc): tool version and settings, a table
// of medians with min–max, CV and n (host figures and guest/host ratios beside them, or why
// there are none), and one bar chart per figure group with min–max whiskers and the ratio
// written over each guest bar. Through XmlWriter: escaped, well-formed XML.
void write_figures_section(XmlWriter& w, const nlohmann::json& suite_report,
                           const std::string& suite, bool emulated);

}  // namespace armhive
