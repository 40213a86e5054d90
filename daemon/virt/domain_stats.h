#pragma once

#include <libvirt/libvirt.h>

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/core/usage_meter.h"

namespace armhive {

// libvirt's bulk domain statistics (virConnectGetAllDomainStats with the groups
// kUsageStatsGroups) as a VM's UsageCounters. Pure; any thread.

// The groups LibvirtHypervisor::vm_counters asks for: cpu.time, balloon.rss, block.N.wr.bytes,
// net.N.{rx,tx}.bytes.
inline constexpr unsigned int kUsageStatsGroups =
    VIR_DOMAIN_STATS_CPU_TOTAL | VIR_DOMAIN_STATS_BALLOON | VIR_DOMAIN_STATS_BLOCK |
    VIR_DOMAIN_STATS_INTERFACE;

// One numeric statistic of a record ("cpu.time", "block.0.wr.bytes").
struct DomainStatField {
  std::string name;
  uint64_t value = 0;
};

// The numeric fields of a record's typed parameters: integers that are not negative; strings,
// booleans, doubles and negative numbers are left out (none of the counters used is one).
std::vector<DomainStatField> domain_stat_fields(const virTypedParameter* params, int count);

// The counters in `fields`: cpu.time (ns), balloon.rss (KiB, as bytes), block.N.wr.bytes and
// net.N.rx.bytes / net.N.tx.bytes summed over N (one value per N; saturating). A counter
// with no field is nullopt: libvirt leaves out what it cannot read (the test driver reports
// none; a domain busy with a job under NOWAIT some). `run_id` is the domain's id.
UsageCounters usage_counters_from_stats(int64_t run_id, const std::vector<DomainStatField>& fields);

}  // namespace armhive
