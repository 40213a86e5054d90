#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"

namespace armhive {

// What a benchmark needs to know about a leased VM. The lease engine fills it in (from the
// lease, its pool config, the host topology and the image manifest) through a
// LeaseTargetResolver passed to BenchmarkRunner. Plain data.
struct LeaseTarget {
  std::string vm_name;  // libvirt domain name, for Hypervisor::exec
  std::string address;  // guest IPv4, reachable from the host running armhived
  std::string pool;
  std::string host;  // host name as shown in reports
  // The VM runs on another machine than armhived's (a remote host of the fleet): nothing of
  // the host side runs (host baselines, the network suite's iperf3 peer, MTU changes of the
  // bridge all run on this machine); the suites run in the guest only.
  bool remote_host = false;
  std::string host_arch;  // "x86_64", "aarch64"
  std::string guest_arch = "aarch64";
  std::vector<int> cpus;               // host CPUs pinned to the VM (empty: not pinned)
  std::vector<int> housekeeping_cpus;  // host CPUs for IRQs / emulator threads, if known
  int vcpus = 1;
  int mtu = 1500;  // configured MTU of the guest NIC
  // The largest MTU the guest's NIC takes: virtio-net caps it at the host MTU the domain
  // advertises (its <mtu>, the pool's mtu). 0: `mtu`.
  int nic_max_mtu = 0;
  // The host bridge of the VM's network: MTU runs also set it and the VM's tap device (and
  // restore both). Empty: unknown, only the guest's MTU changes.
  std::string bridge;
  bool emulated = false;  // TCG (no KVM): every guest figure is EMULATED
  // The image's deterministic compression corpus (images/ manifest "corpus").
  std::string corpus_path = "/usr/share/armhive/corpus.bin";
  uint64_t corpus_bytes = 0;  // 0 = unknown
  uint64_t corpus_seed = 0;
  std::string corpus_sha256;
  std::string corpus_description;  // e.g. "armhive-corpus v1: mixed text/random/zeros"
  // Where the same corpus lives on the host for the guest/host ratio (empty: none).
  std::string host_corpus_path;
  // Host baselines of the other suites (host_baseline.h decides whether they run):
  std::string host_stream_path;  // armhive-stream built for the host (empty: none)
  std::string host_scratch_dir;  // a directory on the filesystem holding the VM's disk, for fio
  // The VM's disk as the storage suite reports it: the overlay file on the host and its
  // format ("qcow2"); empty when the resolver does not know.
  std::string disk_path;
  std::string disk_format = "qcow2";
  std::string guest_disk_dir = "/var/tmp";  // where the storage suite's test file goes
  uint64_t last_level_cache_bytes = 0;      // the host's, for the memory suite (0: read sysfs)
};

// Resolves a lease id to its VM. kNotFound for an unknown lease, kConflict when the lease has
// no ready VM. Called from BenchmarkService::start on an HTTP thread; must not block long.
using LeaseTargetResolver = std::function<Result<LeaseTarget>(const std::string& lease_id)>;

}  // namespace armhive
