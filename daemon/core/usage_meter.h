#pragma once

#include <cstdint>
#include <optional>

#include "daemon/core/clock.h"

namespace armhive {

// What a lease's VM used (issue 32 item 5): pure arithmetic over the hypervisor's cumulative
// per-domain counters, sampled by the engine at hand-out (the baseline), periodically while
// the lease is ready, and once more just before its VM is destroyed. Plain data; pure; any
// thread.

// One VM's counters as its hypervisor reports them: cumulative since its QEMU process started,
// except rss_bytes (a level). A counter the hypervisor does not report is nullopt (libvirt's
// test driver reports none of them).
struct UsageCounters {
  // Tells the runs of a domain apart (libvirt's domain id, new each time QEMU starts); 0 when
  // unknown. A sample from another run has its counters counted from zero.
  int64_t run_id = 0;
  std::optional<uint64_t> cpu_ns;            // cpu.time: the vCPUs and QEMU's own threads
  std::optional<uint64_t> rss_bytes;         // balloon.rss: QEMU's resident memory now
  std::optional<uint64_t> disk_write_bytes;  // block.N.wr.bytes summed over the VM's disks
  std::optional<uint64_t> net_rx_bytes;      // net.N.rx.bytes summed over its interfaces
  std::optional<uint64_t> net_tx_bytes;      // net.N.tx.bytes summed over its interfaces
};

// A lease's usage so far and what the next sample is measured against. Persisted with the
// lease (daemon/store, table lease_usage) so that measuring goes on across a restart of
// armhived, whose VMs keep running.
struct LeaseUsage {
  // Totals since the baseline.
  uint64_t cpu_ns = 0;
  uint64_t disk_write_bytes = 0;
  uint64_t net_rx_bytes = 0;
  uint64_t net_tx_bytes = 0;
  uint64_t peak_rss_bytes = 0;  // the highest rss of any sample, the baseline's included
  TimePoint started_at;         // the baseline's instant (the lease became ready)
  TimePoint sampled_at;         // the last sample's instant
  int64_t samples = 0;          // samples applied after the baseline
  // The lease ended: the figures are those of its last sample and never change again.
  bool final = false;
  UsageCounters last;  // the raw counters the next sample's increments are taken against

  double cpu_seconds() const { return static_cast<double>(cpu_ns) / 1e9; }
  // From the baseline to the last sample: the time the CPU figure covers.
  double wall_seconds() const;
};

// What one sample added (for the /metrics counters).
struct UsageIncrement {
  uint64_t cpu_ns = 0;
  uint64_t disk_write_bytes = 0;
  uint64_t net_rx_bytes = 0;
  uint64_t net_tx_bytes = 0;
  double wall_seconds = 0;
};

// The usage of a lease that becomes ready at `at` with its VM's counters `baseline` (what a
// warm VM used before the hand-out is not the lease's). nullopt: the counters could not be
// read; the first sample then becomes the baseline.
LeaseUsage start_usage(const std::optional<UsageCounters>& baseline, TimePoint at);

// Adds what the VM used since usage.last (a final usage is left as it is; the increment is
// then zero). Per counter:
//   - same run, not lower than before: the difference;
//   - lower than before, or another run_id: the counter was reset (QEMU restarted): all of
//     its value is new;
//   - absent now: nothing added, the previous value kept to compare the next sample with;
//   - absent before and present now, same run: taken as the base (nothing added: it cannot
//     be told what of it came before the lease).
// rss raises the peak. Time never runs backwards: sampled_at only moves forward.
UsageIncrement apply_usage_sample(LeaseUsage& usage, const UsageCounters& sample, TimePoint at);

}  // namespace armhive
