#include "daemon/core/cpu_sets.h"

#include <catch2/catch.hpp>
#include <string>

#include "tests/support/topologies.h"

namespace armhive {
namespace {

TEST_CASE("cpu lists parse Linux cpuset syntax", "[core][cpu_sets]") {
  CHECK(parse_cpu_list("f", "0-1,8").value() == CpuList{0, 1, 8});
  CHECK(parse_cpu_list("f", "5").value() == CpuList{5});
  CHECK(parse_cpu_list("f", "").value().empty());
  CHECK(parse_cpu_list("f", "0-3\n").value() == CpuList{0, 1, 2, 3});  // as read from sysfs
  CHECK(parse_cpu_list("f", " 2 , 0-1 ").value() == CpuList{0, 1, 2});
  CHECK(parse_cpu_list("f", "0-3,2-5").value() == CpuList{0, 1, 2, 3, 4, 5});
  CHECK(parse_cpu_list("f", "7,7").value() == CpuList{7});
}

TEST_CASE("bad cpu lists are invalid arguments naming the field and the item", "[core][cpu_sets]") {
  for (const char* bad :
       {"a", "1-", "-1", "3-1", "1,,2", "1;2", "0x3", "1-2-3", "99999999", ",", "0-9000", "+1"}) {
    INFO(bad);
    Result<CpuList> r = parse_cpu_list("cpus.dedicated", bad);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK(r.status().field() == "cpus.dedicated");
    CHECK(r.status().message().find(std::string("\"") + bad) != std::string::npos);
  }
  Result<CpuList> r = parse_cpu_list("cpus.shared", "4-2");
  CHECK(r.status().message().find("descending") != std::string::npos);
}

TEST_CASE("cpu lists format canonically and round-trip", "[core][cpu_sets]") {
  CHECK(format_cpu_list({}) == "");
  CHECK(format_cpu_list({0, 1, 2, 3, 8}) == "0-3,8");
  CHECK(format_cpu_list({8, 1, 0, 1}) == "0-1,8");
  CHECK(format_cpu_list({1, 3, 5}) == "1,3,5");
  CHECK(format_cpu_list({4, 5, 6, 10, 11}) == "4-6,10-11");
  for (const char* text : {"0-15", "1,3,5-7", "0", "47-48,95"}) {
    CHECK(format_cpu_list(parse_cpu_list("f", text).value()) == text);
  }
}

TEST_CASE("default sets: CPU 0 keeps house on a single-node host", "[core][cpu_sets]") {
  CpuSets lx = default_cpu_sets(lx2160a_topology());
  CHECK(lx.housekeeping == CpuList{0});
  CHECK(format_cpu_list(lx.dedicated) == "1-15");
  CHECK(lx.shared.empty());

  CpuSets dev = default_cpu_sets(two_cpu_topology());
  CHECK(dev.housekeeping == CpuList{0});
  CHECK(dev.dedicated == CpuList{1});
}

TEST_CASE("default sets: the first CPU of each node keeps house on a multi-node host",
          "[core][cpu_sets]") {
  CpuSets tx = default_cpu_sets(thunderx_2s_topology());
  CHECK(tx.housekeeping == CpuList{0, 48});
  CHECK(format_cpu_list(tx.dedicated) == "1-47,49-95");
  Result<CpuSets> made = make_cpu_sets(thunderx_2s_topology(), {});
  REQUIRE(made.is_ok());
  CHECK(made->housekeeping == tx.housekeeping);
}

TEST_CASE("configured sets override the defaults", "[core][cpu_sets]") {
  HostTopology lx = lx2160a_topology();
  CpuSetsConfig cfg;
  cfg.housekeeping = "0-1";
  cfg.shared = "12-15";
  cfg.shared_pools = true;
  Result<CpuSets> sets = make_cpu_sets(lx, cfg);
  REQUIRE(sets.is_ok());
  CHECK(sets->housekeeping == CpuList{0, 1});
  CHECK(format_cpu_list(sets->dedicated) == "2-11");  // the rest
  CHECK(format_cpu_list(sets->shared) == "12-15");
  CHECK(sets->is_shared(13));
  CHECK_FALSE(sets->is_dedicated(13));

  CpuSetsConfig only_dedicated;
  only_dedicated.dedicated = "4-7";
  sets = make_cpu_sets(lx, only_dedicated);
  REQUIRE(sets.is_ok());
  CHECK(sets->housekeeping == CpuList{0});
  CHECK(format_cpu_list(sets->dedicated) == "4-7");  // the others are left alone
}

TEST_CASE("invalid sets are rejected naming the field", "[core][cpu_sets]") {
  HostTopology lx = lx2160a_topology();
  auto fails = [&](CpuSetsConfig cfg, const std::string& field, const std::string& words) {
    Result<CpuSets> r = make_cpu_sets(lx, cfg);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK(r.status().field() == field);
    INFO(r.status().to_string());
    CHECK(r.status().message().find(words) != std::string::npos);
  };
  CpuSetsConfig c;
  c.dedicated = "0-3";  // overlaps the default housekeeping CPU 0
  fails(c, "cpus.dedicated", "overlaps cpus.housekeeping on CPU(s) 0");
  c = {};
  c.dedicated = "8-20";
  fails(c, "cpus.dedicated", "16-20 not on this host");
  c = {};
  c.housekeeping = "";
  fails(c, "cpus.housekeeping", "at least one CPU");
  c = {};
  c.housekeeping = "0-15";
  fails(c, "cpus.dedicated", "empty but a pool uses dedicated");
  c = {};
  c.shared_pools = true;
  fails(c, "cpus.shared", "empty but a pool uses shared");
  c = {};
  c.shared = "4-7";
  c.dedicated = "1-5";
  fails(c, "cpus.shared", "overlaps cpus.dedicated on CPU(s) 4-5");
  c = {};
  c.shared = "x";
  c.field_prefix = "host.honeycomb.cpus.";
  fails(c, "host.honeycomb.cpus.shared", "\"x\"");

  // No dedicated pool: an all-housekeeping host is fine.
  c = {};
  c.housekeeping = "0-15";
  c.dedicated_pools = false;
  CHECK(make_cpu_sets(lx, c).is_ok());
  // A one-CPU host cannot serve dedicated pools.
  HostTopology one = make_topology(1, 1, 1);
  CHECK(make_cpu_sets(one, {}).status().field() == "cpus.dedicated");
}

}  // namespace
}  // namespace armhive
