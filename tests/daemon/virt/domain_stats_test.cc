#include "daemon/virt/domain_stats.h"

#include <catch2/catch.hpp>
#include <cstring>

namespace armhive {
namespace {

virTypedParameter ullong_param(const char* name, unsigned long long v) {
  virTypedParameter p{};
  std::strncpy(p.field, name, VIR_TYPED_PARAM_FIELD_LENGTH - 1);
  p.type = VIR_TYPED_PARAM_ULLONG;
  p.value.ul = v;
  return p;
}

virTypedParameter uint_param(const char* name, unsigned int v) {
  virTypedParameter p{};
  std::strncpy(p.field, name, VIR_TYPED_PARAM_FIELD_LENGTH - 1);
  p.type = VIR_TYPED_PARAM_UINT;
  p.value.ui = v;
  return p;
}

TEST_CASE("domain stats: a QEMU record's counters, summed over disks and interfaces",
          "[virt][usage]") {
  // What virConnectGetAllDomainStats gives for a VM with two disks and one NIC (abridged).
  std::vector<virTypedParameter> params = {
      ullong_param("cpu.time", 12'500'000'000ULL),
      ullong_param("cpu.user", 9'000'000'000ULL),
      ullong_param("balloon.current", 524288),
      ullong_param("balloon.rss", 262144),
      uint_param("block.count", 2),
      ullong_param("block.0.rd.bytes", 777),
      ullong_param("block.0.wr.bytes", 4096),
      ullong_param("block.1.wr.bytes", 8192),
      ullong_param("block.1.wr.reqs", 3),
      uint_param("net.count", 1),
      ullong_param("net.0.rx.bytes", 1500),
      ullong_param("net.0.tx.bytes", 900),
      ullong_param("net.0.rx.pkts", 5),
  };
  virTypedParameter name{};
  std::strncpy(name.field, "block.0.name", VIR_TYPED_PARAM_FIELD_LENGTH - 1);
  name.type = VIR_TYPED_PARAM_STRING;
  name.value.s = const_cast<char*>("vda");
  params.push_back(name);

  auto fields = domain_stat_fields(params.data(), static_cast<int>(params.size()));
  CHECK(fields.size() == params.size() - 1);  // the string is left out
  UsageCounters c = usage_counters_from_stats(42, fields);
  CHECK(c.run_id == 42);
  CHECK(c.cpu_ns == 12'500'000'000ULL);
  CHECK(c.rss_bytes == 262144ULL * 1024);
  CHECK(c.disk_write_bytes == 12288);
  CHECK(c.net_rx_bytes == 1500);
  CHECK(c.net_tx_bytes == 900);
}

TEST_CASE("domain stats: what libvirt leaves out is absent, not zero", "[virt][usage]") {
  // The test driver's record: state only.
  std::vector<virTypedParameter> params = {uint_param("state.state", 1),
                                           uint_param("state.reason", 0)};
  UsageCounters c = usage_counters_from_stats(
      1, domain_stat_fields(params.data(), static_cast<int>(params.size())));
  CHECK_FALSE(c.cpu_ns);
  CHECK_FALSE(c.rss_bytes);
  CHECK_FALSE(c.disk_write_bytes);
  CHECK_FALSE(c.net_rx_bytes);
  CHECK_FALSE(c.net_tx_bytes);
  CHECK(domain_stat_fields(nullptr, 3).empty());
}

TEST_CASE("domain stats: odd names and huge values do not confuse the sums",
          "[virt][usage][hostile]") {
  std::vector<DomainStatField> fields = {
      {"block.x.wr.bytes", 5},          {"block..wr.bytes", 5},
      {"block.0.wr.bytes.extra", 5},    {"block.99999999999.wr.bytes", 5},
      {"net.0.rx.bytes", UINT64_MAX},   {"net.1.rx.bytes", 10},
      {"balloon.rss", UINT64_MAX / 10}, {"block.0.wr.bytes", 7},
      {"block.0.wr.bytes", 9},  // the same disk twice: one value per disk
  };
  UsageCounters c = usage_counters_from_stats(0, fields);
  CHECK(c.disk_write_bytes == 9);
  CHECK(c.net_rx_bytes == UINT64_MAX);  // saturated
  CHECK(c.rss_bytes == UINT64_MAX);
  CHECK_FALSE(c.cpu_ns);
}

}  // namespace
}  // namespace armhive
