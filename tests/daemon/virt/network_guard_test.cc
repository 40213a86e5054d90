#include "daemon/virt/network_guard.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "base/process_runner.h"

namespace armhive {
namespace {

using nlohmann::json;

NetworkSpec spec(NetworkMode mode) {
  NetworkSpec s{"armhive-net", "ahbr0", "10.77.0.1/24", "10.77.0.10", "10.77.0.250", 1500};
  s.mode = mode;
  return s;
}

// The rules of `chain`, each as nft's expression list.
std::vector<json> rules(const json& doc, const std::string& chain) {
  std::vector<json> out;
  for (const json& cmd : doc.at("nftables")) {
    if (cmd.contains("add") && cmd["add"].contains("rule") && cmd["add"]["rule"]["chain"] == chain)
      out.push_back(cmd["add"]["rule"]["expr"]);
  }
  return out;
}

bool has_verdict(const json& expr, const char* v) { return expr.back().contains(v); }

bool matches_port(const json& expr, const char* proto, int port) {
  for (const json& e : expr) {
    if (!e.contains("match")) continue;
    const json& m = e["match"];
    if (!m["left"].contains("payload") || m["left"]["payload"]["protocol"] != proto) continue;
    if (m["right"] == port) return true;
    if (m["right"].is_object() && m["right"].contains("set")) {
      for (const json& p : m["right"]["set"])
        if (p == port) return true;
    }
  }
  return false;
}

TEST_CASE("the guard replaces its own table atomically and admits only DHCP/DNS from guests",
          "[virt][network][guard]") {
  auto text = build_guard_ruleset(spec(NetworkMode::kNat));
  REQUIRE(text.is_ok());
  json doc = json::parse(*text);
  const json& cmds = doc.at("nftables");
  REQUIRE(cmds.size() > 4);
  // add, delete, add: an older table of the same name is replaced in one transaction.
  CHECK(cmds[0]["add"]["table"]["name"] == "armhive_armhive_net");
  CHECK(cmds[1]["delete"]["table"]["name"] == "armhive_armhive_net");
  for (const json& cmd : cmds) {
    for (const auto& [verb, obj] : cmd.items()) {
      for (const auto& [kind, v] : obj.items()) {
        CHECK(v.value("family", "") == "inet");
        if (kind != "table") CHECK(v.at("table") == "armhive_armhive_net");
      }
    }
  }
  auto input = rules(doc, "input");
  REQUIRE(input.size() == 4);
  CHECK(has_verdict(input.back(), "drop"));  // everything else from the bridge
  CHECK(matches_port(input[1], "udp", 67));
  CHECK(matches_port(input[1], "udp", 53));
  CHECK(matches_port(input[2], "tcp", 53));
  CHECK_FALSE(matches_port(input[2], "tcp", 8470));
  for (const json& r : input) CHECK(r[0]["match"]["right"] == "ahbr0");
  // nat without an allow-list: any destination, but never back onto the bridge (guest to guest
  // through the host)...
  auto forward = rules(doc, "forward");
  REQUIRE(forward.size() == 1);
  CHECK(forward[0].dump().find(
            R"({"match":{"left":{"meta":{"key":"oifname"}},"op":"==","right":"ahbr0"}})") !=
        std::string::npos);
  CHECK(has_verdict(forward[0], "drop"));
  // ...unless the network does not isolate its guests.
  NetworkSpec open = spec(NetworkMode::kNat);
  open.isolate_guests = false;
  CHECK(rules(json::parse(*build_guard_ruleset(open)), "forward").empty());
}

TEST_CASE("isolated networks forward nothing, nat allow-lists accept only listed destinations",
          "[virt][network][guard]") {
  json isolated = json::parse(*build_guard_ruleset(spec(NetworkMode::kIsolated)));
  auto fwd = rules(isolated, "forward");
  REQUIRE(fwd.size() == 1);
  CHECK(has_verdict(fwd[0], "drop"));

  NetworkSpec s = spec(NetworkMode::kNat);
  s.isolate_guests = false;  // the guest-to-guest rule is the test above's
  s.egress = {{"192.0.2.7/24", {80, 443}}, {"198.51.100.1", {}}};
  json nat = json::parse(*build_guard_ruleset(s));
  fwd = rules(nat, "forward");
  REQUIRE(fwd.size() == 4);  // established, two destinations, drop
  CHECK(fwd[1].dump().find(R"({"addr":"192.0.2.0","len":24})") != std::string::npos);
  CHECK(matches_port(fwd[1], "th", 443));
  CHECK(fwd[2].dump().find(R"({"addr":"198.51.100.1","len":32})") != std::string::npos);
  CHECK(fwd[2].dump().find("\"th\"") == std::string::npos);  // every port
  CHECK(has_verdict(fwd[3], "drop"));
}

TEST_CASE(
    "bridge mode guards what comes through a guest's tap, whatever MAC it claims, and offers no "
    "host DHCP/DNS",
    "[virt][network][guard]") {
  NetworkSpec s = spec(NetworkMode::kBridge);
  s.bridge = "br0";
  json doc = json::parse(*build_guard_ruleset(s));
  // A bridge-family twin marks every frame arriving through a libvirt guest tap.
  auto marking = rules(doc, "prerouting");
  REQUIRE(marking.size() == 1);
  CHECK(marking[0].dump().find(R"("right":"vnet*")") != std::string::npos);
  CHECK(marking[0].dump().find("mangle") != std::string::npos);
  bool bridge_family = false;
  for (const json& cmd : doc.at("nftables")) {
    if (cmd.contains("add") && cmd["add"].contains("chain") &&
        cmd["add"]["chain"]["name"] == "prerouting") {
      bridge_family = cmd["add"]["chain"]["family"] == "bridge";
    }
  }
  CHECK(bridge_family);
  // The inet rules match that mark on the bridge, never a source MAC (the guest chooses it).
  auto input = rules(doc, "input");
  REQUIRE(input.size() == 2);  // established replies, drop
  for (const json& r : input) {
    CHECK(r.dump().find(R"({"meta":{"key":"mark"}})") != std::string::npos);
    CHECK(r.dump().find("ether") == std::string::npos);
  }
  CHECK(has_verdict(input[1], "drop"));
  // What the rule count says is what the ruleset holds (restore_network_guard compares them).
  CHECK(guard_rule_count(s) == 3);
}

// nft as a host's firewall leaves it: `list` answers the rules still there; `-f` records a
// ruleset applied.
class FakeNft final : public ProcessRunner {
 public:
  int listed_rules = 0;
  bool table_exists = true;
  std::vector<std::string> applied;

  Result<ProcessResult> run(const ProcessRequest& request) override {
    ProcessResult r;
    if (request.argv.size() > 2 && request.argv[2] == "list") {
      if (!table_exists) {
        r.exit_code = 1;
        r.err = "Error: No such file or directory";
        return r;
      }
      json items = json::array({json{{"metainfo", {{"version", "1.0.6"}}}},
                                json{{"table", {{"family", "inet"}, {"name", "t"}}}}});
      for (int i = 0; i < listed_rules; ++i) items.push_back(json{{"rule", {{"handle", i}}}});
      r.exit_code = 0;
      r.out = json{{"nftables", items}}.dump();
      return r;
    }
    applied.push_back(request.stdin_data);
    r.exit_code = 0;
    return r;
  }
};

TEST_CASE(
    "a guard a firewall reload removed, or cut short, is applied again, an intact one is left",
    "[virt][network][guard]") {
  const NetworkSpec s = spec(NetworkMode::kNat);
  const int all = guard_rule_count(s);
  REQUIRE(all > 0);
  FakeNft nft;
  nft.listed_rules = all;
  auto intact = restore_network_guard(nft, s);
  REQUIRE(intact.is_ok());
  CHECK_FALSE(*intact);
  CHECK(nft.applied.empty());

  nft.table_exists = false;  // `nft flush ruleset`
  auto gone = restore_network_guard(nft, s);
  REQUIRE(gone.is_ok());
  CHECK(*gone);
  REQUIRE(nft.applied.size() == 1);
  CHECK(nft.applied[0] == *build_guard_ruleset(s));

  nft.table_exists = true;  // someone deleted one rule
  nft.listed_rules = all - 1;
  auto cut = restore_network_guard(nft, s);
  REQUIRE(cut.is_ok());
  CHECK(*cut);
  CHECK(nft.applied.size() == 2);
}

TEST_CASE("table names never carry characters nft would reject", "[virt][network][guard]") {
  CHECK(guard_table_name("ci.net-1") == "armhive_ci_net_1");
}

}  // namespace
}  // namespace armhive
