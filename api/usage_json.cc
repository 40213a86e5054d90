// JSON form of the usage report, GET /v1/usage (declared in json.h).
#include "api/json.h"
#include "base/json_reader.h"

namespace armhive {
namespace {

using nlohmann::json;

#define AH_TRY(expr) ARMHIVE_RETURN_IF_ERROR(expr)

Status parse_usage_row(const json& j, const std::string& prefix, UsageRowDto& row) {
  JsonReader r(j, prefix);
  AH_TRY(r.require_object());
  AH_TRY(r.str("group", row.group));
  AH_TRY(r.integer("leases", row.leases));
  AH_TRY(r.number("cpu_seconds", row.cpu_seconds));
  AH_TRY(r.number("wall_seconds", row.wall_seconds));
  AH_TRY(r.integer("disk_write_bytes", row.disk_write_bytes));
  AH_TRY(r.integer("net_rx_bytes", row.net_rx_bytes));
  AH_TRY(r.integer("net_tx_bytes", row.net_tx_bytes));
  AH_TRY(r.integer("peak_memory_bytes", row.peak_memory_bytes));
  return Status::ok();
}

}  // namespace

json to_json(const UsageReportDto& report) {
  json rows = json::array();
  for (const UsageRowDto& r : report.rows) {
    rows.push_back({{"group", r.group},
                    {"leases", r.leases},
                    {"cpu_seconds", r.cpu_seconds},
                    {"wall_seconds", r.wall_seconds},
                    {"disk_write_bytes", r.disk_write_bytes},
                    {"net_rx_bytes", r.net_rx_bytes},
                    {"net_tx_bytes", r.net_tx_bytes},
                    {"peak_memory_bytes", r.peak_memory_bytes}});
  }
  json j = {{"since", report.since},
            {"until", report.until},
            {"group_by", report.group_by},
            {"rows", std::move(rows)}};
  if (!report.label.empty()) j["label"] = report.label;
  return j;
}

Result<UsageReportDto> usage_report_from_json(const json& j) {
  JsonReader r(j, "");
  AH_TRY(r.require_object());
  UsageReportDto report;
  AH_TRY(r.str("since", report.since));
  AH_TRY(r.str("until", report.until));
  AH_TRY(r.str("group_by", report.group_by));
  AH_TRY(r.str("label", report.label));
  if (r.find("rows") == nullptr) return r.missing("rows");
  AH_TRY(r.objects("rows", report.rows, parse_usage_row));
  return report;
}

}  // namespace armhive
