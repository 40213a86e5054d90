#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

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

}  // namespace armhive
