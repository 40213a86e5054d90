// JSON form of the usage report, GET /v1/usage (declared in json.h).
#include "api/json.h"
#include "base/json_reader.h"

namespace armhive {
namespace {

using nlohmann::json;

Status parse_usage_row(const json& j, const std::string& prefix, UsageRowDto& row) {
  JsonReader r(j, prefix);
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  ARMHIVE_RETURN_IF_ERROR(r.str("group", row.group));
  ARMHIVE_RETURN_IF_ERROR(r.integer("leases", row.leases));
  ARMHIVE_RETURN_IF_ERROR(r.number("cpu_seconds", row.cpu_seconds));
  ARMHIVE_RETURN_IF_ERROR(r.number("wall_seconds", row.wall_seconds));
  ARMHIVE_RETURN_IF_ERROR(r.integer("disk_write_bytes", row.disk_write_bytes));
  ARMHIVE_RETURN_IF_ERROR(r.integer("net_rx_bytes", row.net_rx_bytes));
  ARMHIVE_RETURN_IF_ERROR(r.integer("net_tx_bytes", row.net_tx_bytes));
  ARMHIVE_RETURN_IF_ERROR(r.integer("peak_memory_bytes", row.peak_memory_bytes));
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
  ARMHIVE_RETURN_IF_ERROR(r.require_object());
  UsageReportDto report;
  ARMHIVE_RETURN_IF_ERROR(r.str("since", report.since));
  ARMHIVE_RETURN_IF_ERROR(r.str("until", report.until));
  ARMHIVE_RETURN_IF_ERROR(r.str("group_by", report.group_by));
  ARMHIVE_RETURN_IF_ERROR(r.str("label", report.label));
  if (r.find("rows") == nullptr) return r.missing("rows");
  ARMHIVE_RETURN_IF_ERROR(r.objects("rows", report.rows, parse_usage_row));
  return report;
}

}  // namespace armhive
