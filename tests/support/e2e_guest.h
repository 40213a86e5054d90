#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "daemon/bench/lease_target.h"
#include "daemon/core/topology.h"
#include "daemon/images/catalog.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "daemon/virt/network.h"

namespace armhive {

// Shared set-up of the e2e tests that drive LibvirtHypervisor directly. Failures end the test
// (Catch2 REQUIRE), so callers get usable values.

// The tiny image of the e2e catalogue ($ARMHIVE_E2E_STATE/images, built by the "e2e: build tiny
// image" fixture), verified like the daemon verifies it.
Image e2e_tiny_image();

// A LibvirtHypervisor over the sandboxed libvirtd with a fresh state directory `state`/vms, its
// own storage pool, the host's accelerator, and (if given) its isolated network. Members are
// destroyed in reverse order: the hypervisor before the event loop it needs.
struct E2eHypervisor {
  std::unique_ptr<EventLoop> loop;
  HostTopology host;
  std::unique_ptr<LibvirtHypervisor> hv;
};
E2eHypervisor open_e2e_hypervisor(const std::string& uri, const std::filesystem::path& state,
                                  const std::string& storage_pool,
                                  const std::optional<NetworkSpec>& network);

// One tiny-image guest on its own isolated network, for the e2e tests that benchmark a VM
// directly. `tag` names everything it makes: state $ARMHIVE_E2E_STATE/<tag>-e2e, storage pool
// and domain armhive-<tag>-e2e[-1], guest hostname <tag>-e2e. boot() REQUIREs the VM created
// and its agent answering (and its DHCP address, if asked); the destructor destroys the VM and
// the network whatever the test did. One thread.
struct E2eGuestOptions {
  std::string tag;
  NetworkSpec net;
  std::string pool = "bench";
  int vcpus = 2;
  int memory_mib = 512;
  bool wait_address = true;
  int nic_mtu = 0;  // the domain's <mtu> (the NIC's host MTU); 0: net.mtu
};
class E2eGuest {
 public:
  E2eGuest() = default;
  E2eGuest(const E2eGuest&) = delete;
  E2eGuest& operator=(const E2eGuest&) = delete;
  ~E2eGuest();

  void boot(const E2eGuestOptions& options);
  bool booted() const { return e2e_.hv != nullptr && created_; }

  LibvirtHypervisor& hv() { return *e2e_.hv; }
  const HostTopology& host() const { return e2e_.host; }
  const Image& image() const { return image_; }
  const VmSpec& spec() const { return spec_; }
  const std::filesystem::path& state() const { return state_; }
  const std::string& address() const { return address_; }
  // What a benchmark resolver answers for this VM: name, address, pool, host, vcpus, MTU,
  // emulation and the image's corpus.
  LeaseTarget target() const;

 private:
  E2eHypervisor e2e_;
  Image image_;
  VmSpec spec_;
  std::filesystem::path state_;
  std::string address_;
  std::string network_;
  bool created_ = false;
};

}  // namespace armhive
