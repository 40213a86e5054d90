#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/deadline_worker.h"
#include "base/process_runner.h"
#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/core/boot_image.h"
#include "daemon/core/clock.h"
#include "daemon/core/cpu_sets.h"
#include "daemon/core/topology.h"
#include "daemon/engine/lease_engine.h"
#include "daemon/fleet/host_setup.h"
#include "daemon/fleet/hypervisor_slot.h"
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
  // The capabilities document each host last came up with (HostStore::capabilities), by name:
  // a host that cannot be reached at start but is here is driven from the start, not
  // connected, with the topology they give (see "Hosts not connected" below).
  std::map<std::string, std::string> remembered_capabilities;
  // Called with a host's name and capabilities each time it comes up (open, add, reconnect),
  // to be remembered for the next start; on the registry's threads, never with mu_ held.
  std::function<void(const std::string& host, const std::string& capabilities)> remember;
  // How a host's libvirt is reached (tests put a gate in front of it to take a host down).
  std::function<Result<Connection>(std::string_view uri)> open_connection = Connection::open;
  // How often a host that is not connected is tried again (start_reconnecting).
  std::chrono::milliseconds reconnect_period{std::chrono::seconds(5)};
};

// The libvirt hosts armhived drives and what it owns for each: a connection (keepalive, used
// for discovery, networks and image shipping), its LibvirtHypervisor (its own connection and
// events), how a pool's image is found there (this machine's catalogue for a local host; a
// ShippingImageSource, which uploads the catalogue's files into the host's storage pool
// through libvirt, for a remote one), its discovered topology and its CPU sets. The engine
// gets them as EngineHosts; the local qemu:///system host is a registry of one.
//
// Hosts not connected: a host that cannot be reached at start (libvirtd stopped, a board
// powered off, a cut link) does not keep armhived from starting as long as one host came up.
// One whose capabilities are remembered from an earlier run is handed to the engine at once
// with the topology they give and a HypervisorSlot that fails every call until it connects:
// the engine sees it unreachable, its leases show host_unreachable and nothing of it is
// adopted or destroyed. One never seen before has no topology to drive it with: it waits out
// of the engine and is handed to it (start_reconnecting's callback) once it comes up. Both are
// tried again every reconnect_period on a DeadlineWorker of their own (a hung host holds only
// its own attempts); a host that comes up replaces its not-connected Host and its slot is
// attached to the new hypervisor.
//
// Ownership: owns every Host and every host's HypervisorSlot; a Host's hypervisor and image
// source live until the registry is destroyed (a removed or replaced host's too: a call stuck
// in a hung host may still use them), which must be after the engine that borrows them. The
// caller's EventLoop must run before open() and outlive the registry.
// Threading: thread-safe; mu_ guards the lists of hosts only and is never held while a host is
// connected or set up, nor across `remember` or start_reconnecting's callback.
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
    // Runs the image collection's libvirt calls with a deadline (a hung host holds only it).
    std::unique_ptr<DeadlineWorker> worker;
    std::string capabilities;  // the document `topology` came from
    // Not connected (connection, hypervisor, shipping and worker are null): why, at start (the
    // latest reason is its HypervisorSlot's).
    std::string not_connected;
    bool connected() const { return connection != nullptr; }
  };

  // Connects to every host at once, each on its own worker under connect_timeout, and sets it
  // up: discovery (a remote host's KVM and topology from its own capabilities, not this
  // machine's), the [[networks]] through libvirt (and the guard here for guard_here hosts),
  // the hypervisor, the image source, the CPU sets. A host that cannot be reached is left not
  // connected (above) and logged naming it, its URI and libvirt's error (kTimeout: no answer in
  // time). Fails, leaving nothing running, for an invalid setup (kInvalidArgument naming the
  // host), remembered capabilities that no longer fit the host's CPU sets, or when no host at
  // all can be driven (every host's error named).
  static Result<std::unique_ptr<HostRegistry>> open(HostRegistryOptions options,
                                                    std::vector<HostSetup> hosts);
  ~HostRegistry() noexcept;
  HostRegistry(const HostRegistry&) = delete;
  HostRegistry& operator=(const HostRegistry&) = delete;

  // One more host, set up as open() does (blocks up to connect_timeout): kConflict for a name
  // taken, otherwise open()'s errors for that host.
  Result<std::shared_ptr<Host>> add(HostSetup setup) EXCLUDES(mu_);
  // Forgets a host (after the engine let it go), or a waiting one: kNotFound for an unknown
  // name. Its objects are kept until the registry goes (see Ownership).
  Status remove(const std::string& name) EXCLUDES(mu_);

  // The engine's view of a host, with a fresh CoreAllocator: its hypervisor is the host's
  // HypervisorSlot and its images resolve through whichever Host of that name is current.
  Result<EngineHost> engine_host(const Host& host) const EXCLUDES(mu_);
  // Every driven host's, in order (configuration, then added ones); not the waiting ones.
  Result<std::vector<EngineHost>> engine_hosts() const EXCLUDES(mu_);
  // The hosts never seen that could not be reached at start (not in hosts()), with why.
  std::map<std::string, std::string> waiting() const EXCLUDES(mu_);
  // The same, whole, in configuration order: what armhived lists for them (GET /v1/hosts)
  // until they answer.
  struct Waiting {
    HostSetup setup;
    std::string why;  // the last attempt's error: libvirt's words, not naming the host again
    TimePoint since;  // when armhived first failed to reach it
  };
  std::vector<Waiting> waiting_hosts() const EXCLUDES(mu_);
  // How the API lists one (HttpServerOptions::waiting_hosts): unreachable since `since`, with
  // its name, URI and labels, `why` as its last error, and no CPUs.
  static HostView view_of(const Waiting& w);

  // Tries the hosts that are not connected every reconnect_period on a thread of the
  // registry's, until it is destroyed. A waiting host that comes up is given to `drive` (the
  // engine's add_host); if that fails it is logged and the host stays out of the engine.
  void start_reconnecting(std::function<Status(EngineHost)> drive) EXCLUDES(mu_);
  // Stops the image collection and reconnecting threads, waiting for a round in progress (a
  // connect that hangs: up to connect_timeout); start_reconnecting's callback is not called
  // after it returns. The destructor calls it; call it before what the callback uses goes.
  void stop() EXCLUDES(mu_);
  // One round of that now, on the caller's thread (blocks up to connect_timeout): the names of
  // the hosts that came up.
  std::vector<std::string> reconnect_once() EXCLUDES(mu_);
  std::vector<std::shared_ptr<Host>> hosts() const EXCLUDES(mu_);
  std::shared_ptr<Host> host(const std::string& name) const EXCLUDES(mu_);

  // Image collection on the remote hosts: deletes the shipped volumes (image_pool) that no
  // pool's current image (`images`, as each host's ShippingImageSource resolves them) and no
  // overlay there (its backing file) still needs, so a rebuilt image's old copy goes once the
  // last VM on it is gone. A host whose images are not all there yet (still being shipped, so
  // which copy a boot will name is open), or whose overlays cannot be listed within
  // connect_timeout, is left alone this time: nothing is deleted on partial knowledge. Returns
  // the deleted volumes by host. Blocks on libvirt; any thread.
  std::map<std::string, std::vector<std::string>> collect_images(
      const std::vector<std::string>& images) const EXCLUDES(mu_);
  // collect_images() every `period` on a thread of the registry's, until it is destroyed.
  void start_image_collection(std::vector<std::string> images, std::chrono::milliseconds period)
      EXCLUDES(mu_);

  // This machine's network guards (network_guard.h), when a connected host has its guard here:
  // each is applied again if the host's ruleset lost any of its rules (a firewall reload's
  // `nft flush ruleset`). Returns the networks restored; logs each. Blocks on nft; any thread.
  std::vector<std::string> restore_guards() const EXCLUDES(mu_);
  // restore_guards() every `period` on a thread of the registry's, until it is destroyed.
  void start_guard_watch(std::chrono::milliseconds period) EXCLUDES(mu_);

 private:
  explicit HostRegistry(HostRegistryOptions options) : options_(std::move(options)) {}
  // Publishes a host that came up (new, or replacing its not-connected Host) and attaches its
  // slot; kConflict when the name is taken by a connected host meanwhile.
  Status publish(const std::shared_ptr<Host>& up) EXCLUDES(mu_);
  // publish(), then logs the host and hands its capabilities to `remember`.
  Status come_up(const std::shared_ptr<Host>& up) EXCLUDES(mu_);
  HypervisorSlot* slot(const std::string& name) const EXCLUDES(mu_);
  // Sleeps up to `period`; false once the registry is being destroyed.
  bool sleep_for(std::chrono::milliseconds period) EXCLUDES(mu_);

  const HostRegistryOptions options_;
  mutable Mutex mu_;
  std::vector<std::shared_ptr<Host>> hosts_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Host>> retired_ GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<HypervisorSlot>> slots_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<HypervisorSlot>> retired_slots_ GUARDED_BY(mu_);  // never freed
  // Never seen, not reached yet, in configuration order.
  std::vector<Waiting> waiting_ GUARDED_BY(mu_);
  // One per host being reconnected: an attempt that hangs holds only that host's next ones.
  std::map<std::string, std::unique_ptr<DeadlineWorker>> reconnect_workers_ GUARDED_BY(mu_);
  std::function<Status(EngineHost)> drive_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::condition_variable_any wake_;
  std::thread collector_;      // last: joined by the destructor
  std::thread reconnector_;    // likewise
  std::thread guard_watcher_;  // likewise
};

}  // namespace armhive
