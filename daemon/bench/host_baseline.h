#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "daemon/bench/lease_target.h"

namespace armhive {

// Host baselines: whether a suite also runs natively on the host (on the VM's pinned cores,
// same tool versions, same corpus) so the report can give guest/host ratios, and the ratio
// maths. Pure functions; any thread.

struct HostBaselineDecision {
  bool run = false;    // run the suite on the host
  std::string reason;  // why not (shown in the report) when !run
};

// Decides before anything runs on the host. A ratio only means something when the host runs
// the guest's architecture natively (KVM): under TCG it would measure the emulator, on
// another architecture a different machine. Then each suite needs its host-side input:
// compression the corpus on the host, memory armhive-stream built for the host, storage a
// scratch directory on the filesystem of the VM's disk; crypto only needs openssl (checked by
// versions_comparable once both versions are known).
HostBaselineDecision decide_host_baseline(const LeaseTarget& target, std::string_view suite);

// Same tool versions on both sides, or why not ("openssl 3.0.22 in the guest, 3.0.11 on the
// host: ..."). An empty host version (the tool is missing on the host) is never comparable.
HostBaselineDecision versions_comparable(std::string_view tool, const std::string& guest_version,
                                         const std::string& host_version);

// Guest/host ratio per figure: for each guest figure (suite_figures.h JSON, "key" like
// "memory.guest.t1.copy_mb_s") the host figure with the same key under "host" in place of
// "guest". ratio = guest median / host median for higher-is-better figures and host / guest
// for lower-is-better ones (latencies), so 1.0 is "as fast as the host" and 0.9 "10 % slower"
// either way; null when the host figure is missing or not positive.
// Returns {"available": true, "ratios": [{"key", "label", "ratio"}]}.
nlohmann::json guest_host_ratios(const nlohmann::json& guest_figures,
                                 const nlohmann::json& host_figures);

// {"available": false, "reason": ...}: the report's form of a skipped baseline.
nlohmann::json baseline_unavailable(const std::string& reason);

}  // namespace armhive
