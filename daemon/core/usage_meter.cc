#include "daemon/core/usage_meter.h"

#include <algorithm>

namespace armhive {
namespace {

// The increment of one cumulative counter, updating `last` to `now` where it is known.
uint64_t advance(std::optional<uint64_t>& last, const std::optional<uint64_t>& now, bool new_run) {
  if (!now) return 0;
  uint64_t added = 0;
  if (new_run) {
    added = *now;
  } else if (last) {
    added = *now >= *last ? *now - *last : *now;
  }
  last = now;
  return added;
}

}  // namespace

double LeaseUsage::wall_seconds() const {
  return sampled_at > started_at ? std::chrono::duration<double>(sampled_at - started_at).count()
                                 : 0.0;
}

LeaseUsage start_usage(const std::optional<UsageCounters>& baseline, TimePoint at) {
  LeaseUsage u;
  u.started_at = at;
  u.sampled_at = at;
  if (baseline) {
    u.last = *baseline;
    u.peak_rss_bytes = baseline->rss_bytes.value_or(0);
  }
  return u;
}

UsageIncrement apply_usage_sample(LeaseUsage& usage, const UsageCounters& sample, TimePoint at) {
  UsageIncrement inc;
  if (usage.final) return inc;
  const bool new_run =
      sample.run_id != 0 && usage.last.run_id != 0 && sample.run_id != usage.last.run_id;
  inc.cpu_ns = advance(usage.last.cpu_ns, sample.cpu_ns, new_run);
  inc.disk_write_bytes = advance(usage.last.disk_write_bytes, sample.disk_write_bytes, new_run);
  inc.net_rx_bytes = advance(usage.last.net_rx_bytes, sample.net_rx_bytes, new_run);
  inc.net_tx_bytes = advance(usage.last.net_tx_bytes, sample.net_tx_bytes, new_run);
  if (sample.run_id != 0) usage.last.run_id = sample.run_id;
  if (sample.rss_bytes) {
    usage.last.rss_bytes = sample.rss_bytes;
    usage.peak_rss_bytes = std::max(usage.peak_rss_bytes, *sample.rss_bytes);
  }
  usage.cpu_ns += inc.cpu_ns;
  usage.disk_write_bytes += inc.disk_write_bytes;
  usage.net_rx_bytes += inc.net_rx_bytes;
  usage.net_tx_bytes += inc.net_tx_bytes;
  if (at > usage.sampled_at) {
    inc.wall_seconds = std::chrono::duration<double>(at - usage.sampled_at).count();
    usage.sampled_at = at;
  }
  ++usage.samples;
  return inc;
}

}  // namespace armhive
