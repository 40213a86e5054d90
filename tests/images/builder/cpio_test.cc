#include "images/builder/cpio.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>

#include "images/builder/initramfs.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

TEST_CASE("a newc archive parses back to what was written", "[images]") {
  CpioWriter w;
  w.add_directory("/bin");
  w.add_file("bin/busybox",
             std::string("\x7f"
                         "ELF\0binary",
                         10),
             0755);
  w.add_symlink("bin/sh", "busybox");
  w.add_char_device("dev/console", 5, 1);
  w.add_file("init", "#!/bin/sh\n", 0755);
  w.add_file("empty", "");
  std::string archive = w.finish();
  CHECK(archive.substr(0, 6) == "070701");
  CHECK(archive.size() % 512 == 0);
  CHECK(archive.find("TRAILER!!!") != std::string::npos);

  auto entries = parse_cpio(archive);
  REQUIRE(entries.is_ok());
  REQUIRE(entries->size() == 6);
  const auto& e = *entries;
  CHECK(e[0].path == "bin");
  CHECK(S_ISDIR(e[0].mode));
  CHECK(e[1].path == "bin/busybox");
  CHECK(S_ISREG(e[1].mode));
  CHECK((e[1].mode & 07777) == 0755);
  CHECK(e[1].data == std::string("\x7f"
                                 "ELF\0binary",
                                 10));
  CHECK(S_ISLNK(e[2].mode));
  CHECK(e[2].data == "busybox");
  CHECK(S_ISCHR(e[3].mode));
  CHECK(e[3].rdev_major == 5);
  CHECK(e[3].rdev_minor == 1);
  CHECK(e[4].data == "#!/bin/sh\n");
  CHECK(e[5].data.empty());
}

TEST_CASE("the cpio writer is deterministic and the parser rejects garbage", "[images]") {
  auto make = [] {
    CpioWriter w;
    w.add_file("a", "x");
    return w.finish();
  };
  CHECK(make() == make());
  CHECK_FALSE(parse_cpio("not an archive at all, definitely not, no no no no no no no no no no "
                         "no no no no no no no no no no no no no no no no no no no no no")
                  .is_ok());
  std::string truncated = make().substr(0, 120);
  CHECK_FALSE(parse_cpio(truncated).is_ok());
}

// A fake kernel module tree: .ko files whose .modinfo says depends=...
class FakeModules {
 public:
  FakeModules() {
    char tmpl[] = "/tmp/armhive-modules-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    add("kernel/drivers/virtio/virtio_pci.ko", "virtio_pci_modern_dev,virtio_pci_legacy_dev");
    add("kernel/drivers/virtio/virtio_pci_modern_dev.ko", "");
    add("kernel/drivers/virtio/virtio_pci_legacy_dev.ko", "");
    add("kernel/drivers/net/virtio_net.ko", "net_failover");
    add("kernel/drivers/net/net_failover.ko", "failover");
    add("kernel/net/core/failover.ko", "");
    add("kernel/drivers/char/hw_random/virtio-rng.ko", "");
    std::ofstream(fs::path(dir_) / "modules.builtin") << "kernel/fs/ext4/ext4.ko\n";
  }
  ~FakeModules() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }

 private:
  void add(const std::string& rel, const std::string& depends) {
    fs::path p = fs::path(dir_) / rel;
    fs::create_directories(p.parent_path());
    std::string body = std::string(
                           "\x7f"
                           "ELF",
                           4) +
                       std::string(16, '\0') + "license=GPL" + std::string(1, '\0') +
                       "depends=" + depends + std::string(1, '\0') + "name=" + p.stem().string() +
                       std::string(1, '\0');
    std::ofstream(p, std::ios::binary) << body;
  }
  std::string dir_;
};

TEST_CASE("kernel modules resolve into dependency order from .modinfo", "[images]") {
  FakeModules mods;
  auto set = resolve_modules(mods.dir(), {"virtio_net", "virtio_pci", "virtio-rng", "ext4"});
  REQUIRE(set.is_ok());
  CHECK(set->names == std::vector<std::string>{"failover", "net_failover", "virtio_net",
                                               "virtio_pci_modern_dev", "virtio_pci_legacy_dev",
                                               "virtio_pci", "virtio_rng"});
  REQUIRE(set->paths.size() == set->names.size());
  CHECK(set->paths[6].ends_with("virtio-rng.ko"));

  auto missing = resolve_modules(mods.dir(), {"virtio_gpu"});
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().field() == "initramfs.modules");
  CHECK(missing.status().message().find("virtio_gpu") != std::string::npos);
}

TEST_CASE("the initramfs holds init, busybox with applets, modules in load order", "[images]") {
  FakeModules mods;
  auto set = resolve_modules(mods.dir(), {"virtio_net"});
  REQUIRE(set.is_ok());
  fs::path busybox = fs::path(mods.dir()) / "busybox";
  std::ofstream(busybox, std::ios::binary) << "BUSYBOX";
  auto archive = build_initramfs(
      {.busybox = busybox.string(), .init_script = "#!/bin/sh\necho hi\n", .modules = *set});
  REQUIRE(archive.is_ok());
  auto entries = parse_cpio(*archive);
  REQUIRE(entries.is_ok());
  std::map<std::string, CpioEntry> by_path;
  for (const auto& e : *entries) by_path[e.path] = e;
  REQUIRE(by_path.contains("init"));
  CHECK((by_path["init"].mode & 0111) != 0);
  CHECK(by_path["bin/busybox"].data == "BUSYBOX");
  CHECK(S_ISLNK(by_path["bin/sh"].mode));
  CHECK(by_path["sbin/switch_root"].data == "../bin/busybox");
  CHECK(S_ISCHR(by_path["dev/console"].mode));
  CHECK(by_path["etc/modules"].data == "failover\nnet_failover\nvirtio_net\n");
  CHECK(by_path.contains("lib/modules/net_failover.ko"));
}

}  // namespace
}  // namespace armhive
