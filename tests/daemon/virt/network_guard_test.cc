#include "daemon/virt/network_guard.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

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
  CHECK(rules(doc, "forward").empty());  // nat without an allow-list: any destination
}

TEST_CASE("isolated networks forward nothing; nat allow-lists accept only listed destinations",
          "[virt][network][guard]") {
  json isolated = json::parse(*build_guard_ruleset(spec(NetworkMode::kIsolated)));
  auto fwd = rules(isolated, "forward");
  REQUIRE(fwd.size() == 1);
  CHECK(has_verdict(fwd[0], "drop"));

  NetworkSpec s = spec(NetworkMode::kNat);
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

TEST_CASE("bridge mode guards only libvirt guest MACs and offers no host DHCP/DNS",
          "[virt][network][guard]") {
  NetworkSpec s = spec(NetworkMode::kBridge);
  s.bridge = "br0";
  json doc = json::parse(*build_guard_ruleset(s));
  auto input = rules(doc, "input");
  REQUIRE(input.size() == 2);  // established replies, drop
  for (const json& r : input) {
    CHECK(r.dump().find("52:54:00:00:00:00") != std::string::npos);
  }
  CHECK(has_verdict(input[1], "drop"));
}

TEST_CASE("table names never carry characters nft would reject", "[virt][network][guard]") {
  CHECK(guard_table_name("ci.net-1") == "armhive_ci_net_1");
}

}  // namespace
}  // namespace armhive
