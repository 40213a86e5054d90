#include "daemon/bench/mtu_plan.h"

#include <cctype>
#include <nlohmann/json.hpp>

namespace armhive {

namespace {

Result<HostLinkMtu> parse_link(const nlohmann::json& l) {
  if (!l.is_object()) return invalid_argument("network", "`ip -j link` printed a non-object");
  HostLinkMtu h;
  if (!l.contains("ifname") || !l["ifname"].is_string())
    return invalid_argument("network", "`ip -j link` output without ifname");
  h.name = l["ifname"].get<std::string>().substr(0, 32);
  auto int_member = [&](const char* k, int& out, bool required) -> Status {
    if (!l.contains(k)) {
      return required ? invalid_argument("network", std::string("no ") + k + " for " + h.name)
                      : Status::ok();
    }
    if (!l[k].is_number_integer() || l[k].get<int64_t>() < 0 || l[k].get<int64_t>() > 1 << 20)
      return invalid_argument("network", std::string(k) + " of " + h.name + " out of range");
    out = static_cast<int>(l[k].get<int64_t>());
    return Status::ok();
  };
  ARMHIVE_RETURN_IF_ERROR(int_member("mtu", h.mtu, true));
  ARMHIVE_RETURN_IF_ERROR(int_member("min_mtu", h.min_mtu, false));
  ARMHIVE_RETURN_IF_ERROR(int_member("max_mtu", h.max_mtu, false));
  if (l.contains("address") && l["address"].is_string()) {
    h.address = l["address"].get<std::string>().substr(0, 64);
    for (char& c : h.address) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return h;
}

}  // namespace

Result<HostLinkMtu> parse_ip_link_json(std::string_view output) {
  auto doc = nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_array() || doc.size() != 1 || !doc[0].is_object())
    return invalid_argument("network", "`ip -d -j link show` did not print one link");
  return parse_link(doc[0]);
}

Result<std::vector<HostLinkMtu>> parse_ip_link_list_json(std::string_view output) {
  // `ip -j link show master X` prints nothing at all for a bridge without ports.
  if (output.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return std::vector<HostLinkMtu>{};
  }
  auto doc = nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_array() || doc.size() > 4096)
    return invalid_argument("network", "`ip -d -j link show master` did not print a link list");
  std::vector<HostLinkMtu> out;
  for (const auto& l : doc) {
    ARMHIVE_ASSIGN_OR_RETURN(HostLinkMtu h, parse_link(l));
    out.push_back(std::move(h));
  }
  return out;
}

Result<MtuPlan> plan_host_mtu(int mtu, const std::vector<HostLinkMtu>& links) {
  MtuPlan plan;
  for (const auto& l : links) {
    if (l.max_mtu > 0 && mtu > l.max_mtu) {
      return invalid_argument("network.mtus", "MTU " + std::to_string(mtu) + ": the host's " +
                                                  l.name + " carries at most " +
                                                  std::to_string(l.max_mtu));
    }
    if (l.min_mtu > 0 && mtu < l.min_mtu) {
      return invalid_argument("network.mtus", "MTU " + std::to_string(mtu) + ": the host's " +
                                                  l.name + " needs at least " +
                                                  std::to_string(l.min_mtu));
    }
    if (l.mtu != mtu) plan.apply.push_back({l.name, l.mtu, mtu});
  }
  for (auto it = plan.apply.rbegin(); it != plan.apply.rend(); ++it)
    plan.restore.push_back({it->link, it->to, it->from});
  return plan;
}

}  // namespace armhive
