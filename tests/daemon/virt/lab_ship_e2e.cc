// End-to-end with a lab of libvirt hosts (scripts/libvirt-lab): this process runs in the lab's
// controller namespace and reaches each host's own libvirtd only over libvirt's remote protocol
// (qemu+tcp://10.79.K.2/system), as armhived reaches the boards of a real lab. Each host has its
// own /var/lib/libvirt (the lab binds /run/armhive-lab/LAB/hK/lib there), which is how the test
// checks independently what arrived on which host.
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "daemon/virt/connection.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/handles.h"
#include "daemon/virt/image_shipper.h"
#include "daemon/virt/storage.h"
#include "tests/support/files.h"
#include "tests/support/lab.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPool = "armhive-lab-ship";
// The pool's directory as each host sees it (inside the host's mount namespace).
constexpr const char* kHostPoolDir = "/var/lib/libvirt/images/armhive-lab-ship";

int lab_hosts() {
  const char* n = std::getenv("ARMHIVE_LAB_HOSTS");
  REQUIRE(n != nullptr);  // run through scripts/libvirt-lab run (ctest does)
  return std::atoi(n);
}

// Where host k's pool directory lies on this machine's disk, outside the host's namespace.
fs::path host_pool_dir_on_disk(int k) { return lab_host_disk(k, kHostPoolDir); }

std::vector<std::string> pool_volumes(virStoragePoolPtr pool) {
  std::vector<std::string> names;
  if (virStoragePoolRefresh(pool, 0) < 0) virResetLastError();
  virStorageVolPtr* raw = nullptr;
  int n = virStoragePoolListAllVolumes(pool, &raw, 0);
  for (int i = 0; i < n; ++i) {
    StorageVolHandle v(raw[i]);
    names.emplace_back(virStorageVolGetName(v.get()));
  }
  std::free(raw);
  return names;
}

// One host of the lab: a connection over the network and the test's pool on it. Whatever the
// test did, the pool's volumes and the (transient) pool are gone afterwards.
struct LabHost {
  int k = 0;
  std::unique_ptr<Connection> conn;
  StoragePoolHandle pool;

  explicit LabHost(int host) : k(host) {
    auto c = Connection::open(lab_host_uri(k));
    REQUIRE(c.is_ok());
    conn = std::make_unique<Connection>(std::move(*c));
    auto p = ensure_dir_pool(*conn, kPool, kHostPoolDir);
    REQUIRE(p.is_ok());
    pool = std::move(*p);
  }
  LabHost(const LabHost&) = delete;
  LabHost& operator=(const LabHost&) = delete;
  ~LabHost() {
    if (!pool) return;
    (void)remove_unused(*conn, kPool, {});
    if (virStoragePoolDestroy(pool.get()) < 0) virResetLastError();
  }
};

std::string write_random_file(const fs::path& p, uint64_t bytes, uint64_t seed) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint64_t done = 0; done < bytes; done += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out.write(reinterpret_cast<const char*>(&x), 8);
  }
  REQUIRE(out.good());
  out.close();
  auto sha = sha256_file(p.string());
  REQUIRE(sha.is_ok());
  return *sha;
}

TEST_CASE("an image is shipped to every host of a lab over libvirt's remote protocol",
          "[lab][e2e]") {
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  const int n = lab_hosts();
  REQUIRE(n >= 2);
  fs::path dir = fs::temp_directory_path() / ("armhive-lab-ship-" + std::to_string(getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  const std::string file = (dir / "disk.img").string();
  const std::string sha = write_random_file(file, 8u << 20, 7);
  const std::string volume = shipped_volume_name(file, sha).value();

  std::vector<std::unique_ptr<LabHost>> hosts;
  for (int k = 1; k <= n; ++k) hosts.push_back(std::make_unique<LabHost>(k));
  // The pool directory was made by each host's libvirtd in its own file system, not here.
  CHECK_FALSE(fs::exists(kHostPoolDir));

  for (auto& h : hosts) {
    INFO("host " << h->k);
    // Hosts share nothing: the volume is not on this host before it is shipped here.
    CHECK(pool_volumes(h->pool.get()).empty());
    auto shipped = ship_file(*h->conn, kPool, file, sha);
    REQUIRE(shipped.is_ok());
    CHECK(shipped->uploaded);
    CHECK(shipped->path == std::string(kHostPoolDir) + "/" + volume);
    // Independently of libvirt: the bytes on the host's own disk.
    auto on_disk = sha256_file((host_pool_dir_on_disk(h->k) / volume).string());
    REQUIRE(on_disk.is_ok());
    CHECK(*on_disk == sha);
    CHECK(pool_volumes(h->pool.get()) == std::vector<std::string>{volume});
  }
  // Shipping again to any host finds the verified volume there and sends nothing.
  for (auto& h : hosts) {
    auto again = ship_file(*h->conn, kPool, file, sha);
    REQUIRE(again.is_ok());
    CHECK_FALSE(again->uploaded);
  }
  // remove_unused on one host leaves the others' copies alone.
  REQUIRE(remove_unused(*hosts[0]->conn, kPool, {}).is_ok());
  CHECK(pool_volumes(hosts[0]->pool.get()).empty());
  CHECK_FALSE(fs::exists(host_pool_dir_on_disk(1) / volume));
  CHECK(pool_volumes(hosts[1]->pool.get()) == std::vector<std::string>{volume});

  // A transient pool is gone when its libvirtd restarts; made again over the directory that
  // still holds the host's volumes, it keeps them (armhived's overlays depend on that).
  REQUIRE(virStoragePoolDestroy(hosts[1]->pool.get()) == 0);
  auto again = ensure_dir_pool(*hosts[1]->conn, kPool, kHostPoolDir);
  REQUIRE(again.is_ok());
  hosts[1]->pool = std::move(*again);
  CHECK(pool_volumes(hosts[1]->pool.get()) == std::vector<std::string>{volume});
}

TEST_CASE("a host that does not answer is an unavailable error naming its URI", "[lab][e2e]") {
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  // Host 1's address, a port where no libvirtd listens: refused at once.
  const std::string uri = "qemu+tcp://10.79.1.2:16999/system";
  auto c = Connection::open(uri);
  REQUIRE_FALSE(c.is_ok());
  CHECK(c.status().code() == ErrorCode::kUnavailable);
  CHECK(c.status().context() == uri);
  // The other hosts are unaffected.
  LabHost h2(2);
  CHECK(virConnectIsAlive(h2.conn->get()->get()) == 1);
}

}  // namespace
}  // namespace armhive
