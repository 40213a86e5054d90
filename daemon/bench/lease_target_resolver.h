#pragma once

#include <functional>
#include <map>
#include <string>

#include "daemon/bench/lease_target.h"
#include "daemon/core/boot_image.h"
#include "daemon/core/lease.h"
#include "daemon/core/topology.h"

namespace armhive {

// Looks up the VM behind a ready lease (LeaseEngine::lease_vm): kNotFound for an unknown lease,
// kConflict when it is not ready.
using LeasedVmLookup = std::function<Result<LeasedVm>(const std::string& lease_id)>;

// The host path of a VM's disk overlay (LibvirtHypervisor::paths_for(vm).overlay). Pure; any
// thread.
using OverlayPathFn = std::function<std::string(const std::string& vm_name)>;

// Tells the benchmark runner which VM a lease has and what it needs to know about it (address,
// pinned cores, MTU, whether guests are emulated, the image's corpus) and the host side of the
// host baselines (host_baseline.h decides whether they run):
// - host_corpus_path: the image's host copy of its corpus (catalogue files.corpus);
// - host_stream_path: the image's armhive-stream (files.armhive-stream), only when the host's
//   architecture is the image's (the binary is built for the guest: an aarch64 static binary
//   is the host's own program exactly on an aarch64 host);
// - disk_path and host_scratch_dir: the VM's overlay and its directory (so the storage
//   suite's host file lies on the filesystem under the VM's disk), when `overlay_path` is set.
// `network_bridges` maps a network name to its host bridge (LeaseTarget::bridge).

// The host a lease's VM runs on (Lease::host; "" for records from before hosts were
// recorded): its topology (borrowed: must outlive the resolver; nullptr for a host not driven
// here, kNotFound) and whether it is this machine. A remote host's VM gets remote_host, and
// no host-side paths or bridge.
struct LeaseHost {
  const HostTopology* topology = nullptr;
  bool local = true;
};
using LeaseHostLookup = std::function<LeaseHost(const std::string& host)>;

LeaseTargetResolver make_lease_target_resolver(
    LeasedVmLookup lookup, LeaseHostLookup hosts, ImageResolver images,
    std::map<std::string, std::string> network_bridges = {}, OverlayPathFn overlay_path = {});
// One local host, whatever the lease says (tests; an armhived of one host).
LeaseTargetResolver make_lease_target_resolver(
    LeasedVmLookup lookup, const HostTopology& host, ImageResolver images,
    std::map<std::string, std::string> network_bridges = {}, OverlayPathFn overlay_path = {});

}  // namespace armhive
