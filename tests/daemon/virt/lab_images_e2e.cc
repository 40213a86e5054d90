// End-to-end with a lab of libvirt hosts (scripts/libvirt-lab): a pool's image reaches a remote
// host through ShippingImageSource before the host is offered it, and again when it changes on
// this machine. Host 2's own disk (/run/armhive-lab/LAB/h2/lib) shows what arrived.
#include <libvirt/virterror.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "base/sha256.h"
#include "daemon/images/catalog.h"
#include "daemon/virt/connection.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/image_shipper.h"
#include "daemon/virt/shipping_image_source.h"
#include "daemon/virt/storage.h"
#include "tests/support/e2e_guest.h"
#include "tests/support/files.h"
#include "tests/support/lab.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kPool = "armhive-lab-images2";
constexpr const char* kPoolDir = "/var/lib/libvirt/images/armhive-lab-images2";

fs::path on_host_disk(const std::string& host_path) { return lab_host_disk(2, host_path); }

// Resolves until the image is on the host (or a deadline far beyond a tiny image's upload).
Result<BootImage> wait_shipped(ShippingImageSource& source, const std::string& name) {
  Result<BootImage> r = source.resolve(name);
  const auto deadline = Clock::now() + std::chrono::seconds(180);
  while (!r.is_ok() && r.status().code() == ErrorCode::kUnavailable && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    r = source.resolve(name);
  }
  return r;
}

void check_on_host(const std::string& host_path, const std::string& local_path) {
  INFO(host_path << " <- " << local_path);
  CHECK(host_path.rfind(std::string(kPoolDir) + "/armhive-img-", 0) == 0);
  auto there = sha256_file(on_host_disk(host_path).string());
  REQUIRE(there.is_ok());
  CHECK(*there == sha256_file(local_path).value());
}

TEST_CASE("a host is sent a pool's image before it is offered it, and again when it changes",
          "[lab][e2e]") {
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  const Image image = e2e_tiny_image();
  fs::path dir = fs::temp_directory_path() / ("armhive-lab-images-" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto conn = Connection::open(lab_host_uri(2));
  REQUIRE(conn.is_ok());
  struct Cleanup {
    fs::path d;
    Connection& c;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
      drop_lab_pool(c, kPool, kPoolDir);
    }
  } cleanup{dir, *conn};

  // A copy of the disk, so that the test can change it as a rebuilt image would.
  const std::string disk = (dir / "disk.qcow2").string();
  fs::copy_file(image.disk.path, disk);
  BootImage local;
  local.name = "tiny";
  local.base_disk = disk;
  local.kernel = image.kernel.path;
  local.initrd = image.initrd.path;
  local.cmdline = image.cmdline;
  ImageResolver catalogue = [&](const std::string& name) -> Result<BootImage> {
    if (name != "tiny") return not_found("no image \"" + name + "\"");
    return local;
  };

  ShippingImageSource source(*conn, "h2", kPool, kPoolDir, catalogue,
                             std::chrono::milliseconds(200));
  // Not offered before the files are there: the reason names the image and the host.
  auto first = source.resolve("tiny");
  REQUIRE_FALSE(first.is_ok());
  CHECK(first.status().code() == ErrorCode::kUnavailable);
  CHECK(first.status().message().find("image tiny is being shipped to host h2") !=
        std::string::npos);
  CHECK(source.resolve("missing").status().code() == ErrorCode::kNotFound);

  auto shipped = wait_shipped(source, "tiny");
  INFO(shipped.status().to_string());
  REQUIRE(shipped.is_ok());
  check_on_host(shipped->base_disk, disk);
  check_on_host(shipped->kernel, image.kernel.path);
  check_on_host(shipped->initrd, image.initrd.path);
  CHECK(shipped->cmdline == image.cmdline);
  // Once there, answered at once with the same volumes.
  auto again = source.resolve("tiny");
  REQUIRE(again.is_ok());
  CHECK(again->base_disk == shipped->base_disk);

  // Rebuilt on this machine: not offered until the new bytes are on the host.
  {
    std::ofstream out(disk, std::ios::binary | std::ios::app);
    out << std::string(4096, '\x5a');
  }
  auto changed = source.resolve("tiny");
  REQUIRE_FALSE(changed.is_ok());
  CHECK(changed.status().code() == ErrorCode::kUnavailable);
  auto reshipped = wait_shipped(source, "tiny");
  REQUIRE(reshipped.is_ok());
  CHECK(reshipped->base_disk != shipped->base_disk);
  check_on_host(reshipped->base_disk, disk);
  CHECK(reshipped->kernel == shipped->kernel);

  // A pool that cannot be used on the host (this name, another directory): the reason says
  // why, and nothing is offered.
  ShippingImageSource wrong(*conn, "h2", kPool, "/var/lib/libvirt/images/elsewhere", catalogue,
                            std::chrono::seconds(30));
  Result<BootImage> failed = wrong.resolve("tiny");
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!failed.is_ok() && failed.status().message().find("failed") == std::string::npos &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    failed = wrong.resolve("tiny");
  }
  REQUIRE_FALSE(failed.is_ok());
  CHECK(failed.status().code() == ErrorCode::kUnavailable);
  CHECK(failed.status().message().find("shipping image tiny to host h2 failed") !=
        std::string::npos);
  CHECK(failed.status().message().find(kPool) != std::string::npos);
}

}  // namespace
}  // namespace armhive
