#include "daemon/virt/network_guard.h"

#include <nlohmann/json.hpp>

namespace armhive {

namespace {

using nlohmann::json;

json table_ref(const std::string& name, const char* family = "inet") {
  return {{"family", family}, {"name", name}};
}

json match(json left, json right, const char* op = "==") {
  return {{"match", {{"op", op}, {"left", std::move(left)}, {"right", std::move(right)}}}};
}

json meta(const char* key) { return {{"meta", {{"key", key}}}}; }
json payload(const char* protocol, const char* field) {
  return {{"payload", {{"protocol", protocol}, {"field", field}}}};
}

json rule(const std::string& table, const char* chain, json expr) {
  return {
      {"add",
       {{"rule",
         {{"family", "inet"}, {"table", table}, {"chain", chain}, {"expr", std::move(expr)}}}}}};
}

json chain(const std::string& table, const char* name, const char* hook,
           const char* family = "inet") {
  // Priority just before the default filter chains (libvirt's own iptables-nft rules), so a
  // drop here is final whatever they accept.
  return {{"add",
           {{"chain",
             {{"family", family},
              {"table", table},
              {"name", name},
              {"type", "filter"},
              {"hook", hook},
              {"prio", -5},
              {"policy", "accept"}}}}}};
}

json established() {
  return match(json{{"ct", {{"key", "state"}}}}, json::array({"established", "related"}), "in");
}

json verdict(const char* v) { return {{v, nullptr}}; }

// The mark the bridge table puts on what arrives from a guest's tap, for the inet table to know
// a guest's packet once it reaches the host's IP stack (where the bridge port is forgotten).
constexpr uint32_t kGuestMark = 0x61686731;  // "ahg1"

// libvirt's name for the tap devices of guests' interfaces.
constexpr const char* kGuestTaps = "vnet*";

}  // namespace

std::string guard_table_name(const std::string& network) {
  std::string out = "armhive_";
  for (char c : network) out += (c == '-' || c == '.') ? '_' : c;
  return out;
}

int guard_rule_count(const NetworkSpec& spec) {
  auto ruleset = build_guard_ruleset(spec);
  if (!ruleset.is_ok()) return -1;
  int n = 0;
  const json parsed = json::parse(*ruleset, nullptr, false);
  if (parsed.is_discarded()) return -1;
  for (const json& cmd : parsed["nftables"]) {
    if (cmd.contains("add") && cmd["add"].contains("rule")) ++n;
  }
  return n;
}

namespace {}  // namespace

Result<std::string> build_guard_ruleset(const NetworkSpec& spec) {
  ARMHIVE_RETURN_IF_ERROR(validate_network_spec(spec));
  const std::string table = guard_table_name(spec.name);
  json cmds = json::array();
  // add + delete + add in one transaction: replaces an older version atomically.
  cmds.push_back({{"add", {{"table", table_ref(table)}}}});
  cmds.push_back({{"delete", {{"table", table_ref(table)}}}});
  cmds.push_back({{"add", {{"table", table_ref(table)}}}});
  cmds.push_back(chain(table, "input", "input"));
  cmds.push_back(chain(table, "forward", "forward"));

  // What identifies a guest's packet: its arrival on the network's bridge (and, on a shared
  // site bridge, through a guest's tap: the bridge family sees the port and marks the packet; a
  // source MAC would not do, the guest chooses it).
  json from_guest = json::array({match(meta("iifname"), spec.bridge)});
  if (spec.mode == NetworkMode::kBridge) {
    cmds.push_back({{"add", {{"table", table_ref(table, "bridge")}}}});
    cmds.push_back({{"delete", {{"table", table_ref(table, "bridge")}}}});
    cmds.push_back({{"add", {{"table", table_ref(table, "bridge")}}}});
    cmds.push_back(chain(table, "prerouting", "prerouting", "bridge"));
    // Every guest tap, whatever its bridge (`meta ibrname` needs a module kernels often lack):
    // the inet rules below still ask for this network's bridge.
    json mark = json::array({match(meta("iifname"), kGuestTaps),
                             {{"mangle", {{"key", meta("mark")}, {"value", kGuestMark}}}}});
    cmds.push_back({{"add",
                     {{"rule",
                       {{"family", "bridge"},
                        {"table", table},
                        {"chain", "prerouting"},
                        {"expr", std::move(mark)}}}}}});
    from_guest.push_back(match(meta("mark"), kGuestMark));
  }
  auto with = [&](std::initializer_list<json> more) {
    json e = from_guest;
    for (const json& m : more) e.push_back(m);
    return e;
  };

  cmds.push_back(rule(table, "input", with({established(), verdict("accept")})));
  if (spec.mode != NetworkMode::kBridge) {
    // The network's dnsmasq: DHCP and DNS only.
    cmds.push_back(
        rule(table, "input",
             with({match(payload("udp", "dport"), json{{"set", {53, 67}}}), verdict("accept")})));
    cmds.push_back(
        rule(table, "input", with({match(payload("tcp", "dport"), 53), verdict("accept")})));
  }
  cmds.push_back(rule(table, "input", with({verdict("drop")})));

  if (spec.isolate_guests && spec.mode == NetworkMode::kNat) {
    // Guest to guest routed through the host (the host as a gateway to a neighbour's address):
    // the isolated ports only keep them apart at layer 2. (Not in bridge mode: with
    // br_netfilter loaded, bridged frames to the site's LAN pass this hook with the bridge as
    // both devices; routing there is the site's.)
    cmds.push_back(
        rule(table, "forward", with({match(meta("oifname"), spec.bridge), verdict("drop")})));
  }
  if (spec.mode == NetworkMode::kIsolated) {
    cmds.push_back(rule(table, "forward", with({verdict("drop")})));
  } else if (spec.mode == NetworkMode::kNat && !spec.egress.empty()) {
    cmds.push_back(rule(table, "forward", with({established(), verdict("accept")})));
    for (size_t i = 0; i < spec.egress.size(); ++i) {
      const EgressRule& e = spec.egress[i];
      auto prefix = parse_ipv4_prefix("egress[" + std::to_string(i) + "].cidr", e.cidr, true);
      if (!prefix.is_ok()) return prefix.status();
      json expr = with({match(
          payload("ip", "daddr"),
          json{{"prefix", {{"addr", prefix->network_address()}, {"len", prefix->length}}}})});
      if (!e.ports.empty()) {
        expr.push_back(match(meta("l4proto"), json{{"set", {"tcp", "udp"}}}));
        json ports = json::array();
        for (int p : e.ports) ports.push_back(p);
        expr.push_back(match(payload("th", "dport"), json{{"set", ports}}));
      }
      expr.push_back(verdict("accept"));
      cmds.push_back(rule(table, "forward", expr));
    }
    cmds.push_back(rule(table, "forward", with({verdict("drop")})));
  }
  return json{{"nftables", cmds}}.dump();
}

namespace {

Status run_nft(ProcessRunner& runner, const std::string& ruleset, const std::string& network) {
  auto r = runner.run({.argv = {"nft", "-j", "-f", "-"},
                       .stdin_data = ruleset,
                       .timeout = std::chrono::seconds(30)});
  if (!r.is_ok()) {
    return Status(r.status().code(),
                  "cannot run nft (install the nftables package): " + r.status().message(),
                  network);
  }
  if (!r->ok()) {
    return unavailable("nft refused the network guard: " + r->err, network);
  }
  return Status::ok();
}

}  // namespace

Status apply_network_guard(ProcessRunner& runner, const NetworkSpec& spec) {
  ARMHIVE_ASSIGN_OR_RETURN(std::string ruleset, build_guard_ruleset(spec));
  return run_nft(runner, ruleset, spec.name);
}

Status remove_network_guard(ProcessRunner& runner, const std::string& network) {
  const std::string table = guard_table_name(network);
  json cmds = json::array();
  for (const char* family : {"inet", "bridge"}) {
    cmds.push_back(json{{"add", {{"table", table_ref(table, family)}}}});
    cmds.push_back(json{{"delete", {{"table", table_ref(table, family)}}}});
  }
  return run_nft(runner, json{{"nftables", cmds}}.dump(), network);
}

Result<bool> restore_network_guard(ProcessRunner& runner, const NetworkSpec& spec) {
  const int expected = guard_rule_count(spec);
  if (expected < 0) return build_guard_ruleset(spec).status();
  const std::string table = guard_table_name(spec.name);
  int found = 0;
  std::vector<const char*> families = {"inet"};
  if (spec.mode == NetworkMode::kBridge) families.push_back("bridge");
  for (const char* family : families) {
    auto r = runner.run({.argv = {"nft", "-j", "list", "table", family, table},
                         .timeout = std::chrono::seconds(30)});
    if (!r.is_ok()) {
      return Status(r.status().code(), "cannot run nft: " + r.status().message(), spec.name);
    }
    if (!r->ok()) continue;  // no such table: the rules counted stay short
    json listed = json::parse(r->out, nullptr, false);
    if (listed.is_discarded() || !listed.contains("nftables")) continue;
    for (const json& item : listed["nftables"]) {
      if (item.is_object() && item.contains("rule")) ++found;
    }
  }
  if (found == expected) return false;
  ARMHIVE_RETURN_IF_ERROR(apply_network_guard(runner, spec));
  return true;
}

}  // namespace armhive
