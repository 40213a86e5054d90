#pragma once

#include <string>
#include <vector>

#include "base/xml_writer.h"
#include "daemon/core/health_series.h"

namespace armhive {

// The trend of a host's health benchmarks in one pool (GET /v1/hosts/{name}/health.svg and
// /ui/hosts/{name}/health): the figure over time (x: UTC time, y: the figure's unit), the
// baseline band each result was checked against (shaded, median dashed), degraded results in
// red, with title, axis labels and a legend. `results` oldest first, one figure (the newest
// result's; others are left out). Written through XmlWriter: escaped and well-formed. Pure;
// any thread.
void write_health_trend_svg(XmlWriter& w, const std::string& host, const std::string& pool,
                            const std::vector<HealthResult>& results);
std::string health_trend_svg(const std::string& host, const std::string& pool,
                             const std::vector<HealthResult>& results);
// A self-contained page: the chart and a table of the results (time, value, band, verdict,
// run, reason). No scripts, no external assets.
std::string health_trend_html(const std::string& host, const std::string& pool,
                              const std::vector<HealthResult>& results);

}  // namespace armhive
