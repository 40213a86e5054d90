#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/process_runner.h"
#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/core/boot_image.h"
#include "daemon/core/cpu_sets.h"
#include "daemon/core/topology.h"
#include "daemon/engine/lease_engine.h"
#include "daemon/fleet/host_setup.h"
#include "daemon/virt/connection.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "daemon/virt/network.h"
#include "daemon/virt/shipping_image_source.h"

namespace armhive {

struct HostRegistryOptions {
  std::string storage_pool = "armhive-overlays";  // per host: the VMs' overlays
  std::string image_pool = "armhive-images";      // per remote host: its shipped images
  // How long one host may take to connect and be set up (a stopped libvirtd never answers).
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
  std::vector<NetworkSpec> networks;      // made on every host through libvirt
  ProcessRunner* guard_runner = nullptr;  // runs nft for the guard_here hosts
  ImageResolver catalogue;                // this machine's image catalogue
  std::chrono::milliseconds ship_retry{std::chrono::seconds(30)};
};

// The libvirt hosts armhived drives and what it owns for each: a connection (keepalive, used
// for discovery, networks and image shipping), its LibvirtHypervisor (its own connection and
// events), how a pool's image is found there (this machine's catalogue for a local host; a
// ShippingImageSource, which uploads the catalogue's files into the host's storage pool
// through libvirt, for a remote one), its discovered topology and its CPU sets. The engine
// gets them as EngineHosts; the local qemu:///system host is a registry of one.
//
// Ownership: owns every Host; a Host's hypervisor and image source live until the registry is
// destroyed (a removed host's too: a call stuck in a hung host may still use them), which must
// be after the engine that borrows them. The caller's EventLoop must run before open() and
// outlive the registry.
// Threading: thread-safe; mu_ guards the list of hosts only and is never held while a host is
// connected or set up.
class HostRegistry {
 public:
  struct Host {
    HostSetup setup;
    bool remote = false;
    HostTopology topology;  // hostname is the armhive host name
    CpuSets sets;
    // Destroyed in reverse order: the image source borrows the connection.
    std::unique_ptr<Connection> connection;
    std::unique_ptr<LibvirtHypervisor> hypervisor;
    std::unique_ptr<ShippingImageSource> shipping;  // remote only
  };

  // Connects to every host at once, each on its own worker under connect_timeout, and sets it
  // up: discovery (a remote host's KVM and topology from its own capabilities, not this
  // machine's), the [[networks]] through libvirt (and the guard here for guard_here hosts),
  // the hypervisor, the image source, the CPU sets. An error names the host and its URI; a
  // host that does not answer in time is kTimeout. Nothing is left running on failure.
  static Result<std::unique_ptr<HostRegistry>> open(HostRegistryOptions options,
                                                    std::vector<HostSetup> hosts);
  ~HostRegistry() noexcept;
  HostRegistry(const HostRegistry&) = delete;
  HostRegistry& operator=(const HostRegistry&) = delete;

  // One more host, set up as open() does (blocks up to connect_timeout): kConflict for a name
  // taken, otherwise open()'s errors for that host.
  Result<std::shared_ptr<Host>> add(HostSetup setup) EXCLUDES(mu_);
  // Forgets a host (after the engine let it go): kNotFound for an unknown name. Its objects
  // are kept until the registry goes (see Ownership).
  Status remove(const std::string& name) EXCLUDES(mu_);

  // The engine's view of a host, with a fresh CoreAllocator.
  Result<EngineHost> engine_host(const Host& host) const;
  // Every host's, in order (configuration, then added ones).
  Result<std::vector<EngineHost>> engine_hosts() const EXCLUDES(mu_);
  std::vector<std::shared_ptr<Host>> hosts() const EXCLUDES(mu_);
  std::shared_ptr<Host> host(const std::string& name) const EXCLUDES(mu_);

 private:
  HostRegistry(HostRegistryOptions options, std::vector<std::shared_ptr<Host>> hosts)
      : options_(std::move(options)), hosts_(std::move(hosts)) {}
  const HostRegistryOptions options_;
  mutable Mutex mu_;
  std::vector<std::shared_ptr<Host>> hosts_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Host>> retired_ GUARDED_BY(mu_);
};

}  // namespace armhive
