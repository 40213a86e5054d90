#include "daemon/virt/network_guard.h"

#include <nlohmann/json.hpp>

namespace armhive {

namespace {

using nlohmann::json;

json table_ref(const std::string& name) { return {{"family", "inet"}, {"name", name}}; }

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

json chain(const std::string& table, const char* name, const char* hook) {
  // Priority just before the default filter chains (libvirt's own iptables-nft rules), so a
  // drop here is final whatever they accept.
  return {{"add",
           {{"chain",
             {{"family", "inet"},
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

}  // namespace

std::string guard_table_name(const std::string& network) {
  std::string out = "armhive_";
  for (char c : network) out += (c == '-' || c == '.') ? '_' : c;
  return out;
}

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
  // site bridge, a libvirt guest MAC).
  json from_guest = json::array({match(meta("iifname"), spec.bridge)});
  if (spec.mode == NetworkMode::kBridge) {
    from_guest.push_back(match(payload("ether", "saddr"),
                               json{{"range", {"52:54:00:00:00:00", "52:54:00:ff:ff:ff"}}}));
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
  json cmds = json::array({json{{"add", {{"table", table_ref(table)}}}},
                           json{{"delete", {{"table", table_ref(table)}}}}});
  return run_nft(runner, json{{"nftables", cmds}}.dump(), network);
}

}  // namespace armhive
