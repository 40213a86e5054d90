#include "tests/support/e2e_guest.h"

#include <catch2/catch.hpp>

#include "daemon/virt/host_discovery.h"
#include "tests/support/files.h"

namespace armhive {

Image e2e_tiny_image() {
  const std::string dir = env_or("ARMHIVE_E2E_STATE", "/var/lib/armhive/e2e") + "/images";
  auto catalog = ImageCatalog::open(dir);
  INFO("e2e catalogue " << dir << ": " << catalog.status().to_string());
  REQUIRE(catalog.is_ok());
  auto image = catalog->find("tiny");
  INFO(image.status().to_string());
  REQUIRE(image.is_ok());
  Status verified = catalog->verify(*image);
  INFO(verified.to_string());
  REQUIRE(verified.is_ok());
  REQUIRE(image->boot == "kernel");
  return *image;
}

E2eHypervisor open_e2e_hypervisor(const std::string& uri, const std::filesystem::path& state,
                                  const std::string& storage_pool,
                                  const std::optional<NetworkSpec>& network) {
  E2eHypervisor e2e;
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  e2e.loop = std::move(loop).value();
  auto conn = Connection::open(uri);
  REQUIRE(conn.is_ok());
  auto host = discover_host(*conn, {});
  INFO(host.status().to_string());
  REQUIRE(host.is_ok());
  e2e.host = *host;

  std::filesystem::remove_all(state);
  std::filesystem::create_directories(state);
  LibvirtHypervisorOptions opts;
  opts.uri = uri;
  opts.state_dir = (state / "vms").string();
  opts.storage_pool = storage_pool;
  opts.accel = e2e.host.accel;
  auto hv = LibvirtHypervisor::open(opts);
  INFO(hv.status().to_string());
  REQUIRE(hv.is_ok());
  e2e.hv = std::move(hv).value();
  if (network) {
    Status s = ensure_network(e2e.hv->connection(), *network);
    INFO(s.to_string());
    REQUIRE(s.is_ok());
  }
  return e2e;
}

}  // namespace armhive
