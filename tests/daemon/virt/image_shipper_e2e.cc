// End-to-end: image files shipped into a storage pool of the sandboxed libvirtd through
// libvirt's volume streams (this process already runs inside the sandbox's namespace).
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "daemon/virt/connection.h"
#include "daemon/virt/event_loop.h"
#include "daemon/virt/handles.h"
#include "daemon/virt/image_shipper.h"
#include "daemon/virt/storage.h"
#include "daemon/virt/xml.h"
#include "tests/support/files.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kImageBytes = 20ull << 20;

// A raw volume's XML, for volumes the tests make behind the shipper's back.
std::string raw_volume_xml(const std::string& name, uint64_t bytes) {
  detail::XmlWriter w;
  w.start("volume").attr("type", "file");
  w.element("name", name);
  w.start("capacity").attr("unit", "bytes").text(std::to_string(bytes)).end();
  w.start("target").start("format").attr("type", "raw").end().end();
  w.end();
  auto xml = w.finish();
  REQUIRE(xml.is_ok());
  return *xml;
}

// Removes a directory tree when it goes, whatever the test did.
struct DirGuard {
  fs::path path;
  ~DirGuard() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Deletes every volume of the pool and the (transient) pool itself when it goes.
struct PoolGuard {
  StoragePoolHandle pool;
  ~PoolGuard() {
    if (!pool) return;
    if (virStoragePoolRefresh(pool.get(), 0) < 0) virResetLastError();
    virStorageVolPtr* raw = nullptr;
    int n = virStoragePoolListAllVolumes(pool.get(), &raw, 0);
    if (n < 0) virResetLastError();
    for (int i = 0; i < n; ++i) {
      StorageVolHandle v(raw[i]);
      if (virStorageVolDelete(v.get(), 0) < 0) virResetLastError();
    }
    std::free(raw);
    if (virStoragePoolDestroy(pool.get()) < 0) virResetLastError();
  }
};

// A dir pool of its own under a fresh directory, with the files a test ships. Whatever the
// test did (a failed REQUIRE included, also one in the constructor), every volume of the pool,
// the pool and the directory are gone afterwards: members are destroyed in reverse order.
class ShipPool {
 public:
  ShipPool() {
    auto loop = EventLoop::start();
    REQUIRE(loop.is_ok());
    loop_ = std::move(*loop);
    auto conn = Connection::open(env_or("ARMHIVE_SHIP_E2E_URI", "qemu:///system"));
    REQUIRE(conn.is_ok());
    conn_ = std::make_unique<Connection>(std::move(*conn));
    root_.path =
        fs::path(env_or("ARMHIVE_E2E_STATE", fs::temp_directory_path().string())) / "ship-e2e";
    fs::remove_all(root_.path);
    fs::create_directories(root_.path / "files");
    auto pool = ensure_dir_pool(*conn_, kName, (root_.path / "pool").string());
    REQUIRE(pool.is_ok());
    pool_.pool = std::move(*pool);
  }
  ShipPool(const ShipPool&) = delete;
  ShipPool& operator=(const ShipPool&) = delete;

  static constexpr const char* kName = "armhive-ship-e2e";
  const Connection& conn() const { return *conn_; }
  virStoragePoolPtr pool() const { return pool_.pool.get(); }

  // A file of `bytes` pseudo-random bytes (incompressible, so nothing on the way can shrink
  // it), different for each seed; returns its path.
  std::string make_file(const std::string& name, uint64_t bytes, uint64_t seed) const {
    fs::path p = root_.path / "files" / name;
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    std::vector<char> buf(1 << 16);
    for (uint64_t done = 0; done < bytes;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), bytes - done));
      for (size_t i = 0; i < n; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        for (size_t j = 0; j < 8 && i + j < n; ++j) buf[i + j] = static_cast<char>(x >> (8 * j));
      }
      out.write(buf.data(), static_cast<std::streamsize>(n));
      done += n;
    }
    REQUIRE(out.good());
    return p.string();
  }

  std::vector<std::string> volumes() const {
    std::vector<std::string> names;
    if (virStoragePoolRefresh(pool_.pool.get(), 0) < 0) virResetLastError();
    virStorageVolPtr* raw = nullptr;
    int n = virStoragePoolListAllVolumes(pool_.pool.get(), &raw, 0);
    for (int i = 0; i < n; ++i) {
      StorageVolHandle v(raw[i]);
      names.emplace_back(virStorageVolGetName(v.get()));
    }
    std::free(raw);
    return names;
  }

  // The sha256 of the volume's bytes as libvirt downloads them, independent of the shipper.
  std::string download_sha256(const std::string& volume) const {
    StorageVolHandle vol(virStorageVolLookupByName(pool_.pool.get(), volume.c_str()));
    REQUIRE(vol);
    StreamHandle st(virStreamNew(conn_->get()->get(), 0));
    REQUIRE(st);
    REQUIRE(virStorageVolDownload(vol.get(), st.get(), 0, 0, 0) == 0);
    Sha256 sha;
    auto sink = [](virStreamPtr, const char* data, size_t n, void* opaque) -> int {
      static_cast<Sha256*>(opaque)->update(std::string_view(data, n));
      return static_cast<int>(n);
    };
    REQUIRE(virStreamRecvAll(st.get(), sink, &sha) == 0);
    REQUIRE(virStreamFinish(st.get()) == 0);
    return sha.hex_digest();
  }

  // A volume armhive did not make, as an operator's own file in the same pool would be.
  void make_foreign_volume(const std::string& name) const {
    std::string xml = raw_volume_xml(name, 65536);
    StorageVolHandle v(virStorageVolCreateXML(pool_.pool.get(), xml.c_str(), 0));
    REQUIRE(v);
  }

 private:
  std::unique_ptr<EventLoop> loop_;  // first member: destroyed after the connection
  std::unique_ptr<Connection> conn_;
  DirGuard root_;
  PoolGuard pool_;  // after root_: the pool goes before its directory
};

std::string sha_of(const std::string& path) {
  auto sha = sha256_file(path);
  REQUIRE(sha.is_ok());
  return *sha;
}

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST_CASE("a shipped file becomes a volume with its bytes, shipping it again sends nothing",
          "[ship][e2e]") {
  ShipPool t;
  std::string file = t.make_file("disk.img", kImageBytes, 1);
  std::string sha = sha_of(file);

  uint64_t last_sent = 0, last_total = 0;
  int calls = 0;
  auto t0 = std::chrono::steady_clock::now();
  auto first = ship_file(t.conn(), ShipPool::kName, file, sha, [&](uint64_t sent, uint64_t total) {
    CHECK(sent > last_sent);
    last_sent = sent;
    last_total = total;
    ++calls;
  });
  auto t1 = std::chrono::steady_clock::now();
  REQUIRE(first.is_ok());
  CHECK(first->uploaded);
  CHECK(first->bytes == kImageBytes);
  CHECK(first->name == shipped_volume_name(file, sha).value());
  CHECK(first->path.find(first->name) != std::string::npos);
  CHECK(calls > 1);
  CHECK(last_sent == kImageBytes);
  CHECK(last_total == kImageBytes);
  CHECK(t.download_sha256(first->name) == sha);

  StorageVolHandle vol(virStorageVolLookupByName(t.pool(), first->name.c_str()));
  REQUIRE(vol);
  virStorageVolInfo info{};
  REQUIRE(virStorageVolGetInfo(vol.get(), &info) == 0);
  CHECK(info.capacity == kImageBytes);
  LibvirtString vol_xml(virStorageVolGetXMLDesc(vol.get(), 0));
  REQUIRE(vol_xml);
  auto doc = detail::XmlDoc::parse(vol_xml.get());
  REQUIRE(doc.is_ok());
  CHECK(doc->str("string(/volume/target/format/@type)") == "raw");

  calls = 0;
  auto t2_start = std::chrono::steady_clock::now();
  auto again =
      ship_file(t.conn(), ShipPool::kName, file, sha, [&](uint64_t, uint64_t) { ++calls; });
  auto t2 = std::chrono::steady_clock::now();
  REQUIRE(again.is_ok());
  CHECK_FALSE(again->uploaded);
  CHECK(calls == 0);
  CHECK(again->name == first->name);
  CHECK(again->path == first->path);
  CHECK(again->bytes == kImageBytes);
  CHECK(t.volumes() == std::vector<std::string>{first->name});
  // Printed, not asserted: what a first and a repeated ship of 20 MiB cost here.
  using Ms = std::chrono::milliseconds;
  std::printf("ship 20 MiB: upload + verify %lld ms, again (verify only) %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<Ms>(t1 - t0).count()),
              static_cast<long long>(std::chrono::duration_cast<Ms>(t2 - t2_start).count()));
}

TEST_CASE("a changed file gets a new volume, and remove_unused deletes only the old armhive one",
          "[ship][e2e]") {
  ShipPool t;
  std::string file = t.make_file("kernel", 1 << 20, 2);
  auto old_vol = ship_file(t.conn(), ShipPool::kName, file, sha_of(file));
  REQUIRE(old_vol.is_ok());
  t.make_foreign_volume("operator-data.raw");

  t.make_file("kernel", (1 << 20) + 4096, 3);  // rebuilt: other bytes, same path
  std::string new_sha = sha_of(file);
  auto new_vol = ship_file(t.conn(), ShipPool::kName, file, new_sha);
  REQUIRE(new_vol.is_ok());
  CHECK(new_vol->uploaded);
  CHECK(new_vol->name != old_vol->name);
  CHECK(t.download_sha256(new_vol->name) == new_sha);
  CHECK(has(t.volumes(), old_vol->name));

  REQUIRE(remove_unused(t.conn(), ShipPool::kName, {new_vol->name}).is_ok());
  std::vector<std::string> left = t.volumes();
  CHECK_FALSE(has(left, old_vol->name));
  CHECK(has(left, new_vol->name));
  CHECK(has(left, "operator-data.raw"));
  CHECK(left.size() == 2);
  CHECK(t.download_sha256(new_vol->name) == new_sha);
}

TEST_CASE("a wrong expected sha256 is an error naming the volume and leaves no volume",
          "[ship][e2e]") {
  ShipPool t;
  std::string file = t.make_file("initrd.gz", 3 << 20, 4);
  std::string real = sha_of(file);
  std::string wrong = real;
  wrong[0] = wrong[0] == '0' ? '1' : '0';
  std::string name = shipped_volume_name(file, wrong).value();

  auto r = ship_file(t.conn(), ShipPool::kName, file, wrong);
  REQUIRE_FALSE(r.is_ok());
  INFO(r.status().to_string());
  CHECK(r.status().message().find(name) != std::string::npos);
  CHECK(r.status().message().find(wrong) != std::string::npos);
  CHECK(r.status().message().find(real) != std::string::npos);
  CHECK(r.status().context() == name);
  CHECK(t.volumes().empty());
}

TEST_CASE("a volume of the content name that holds other bytes is replaced, not trusted",
          "[ship][e2e]") {
  ShipPool t;
  std::string file = t.make_file("disk.img", 2 << 20, 5);
  std::string sha = sha_of(file);
  std::string name = shipped_volume_name(file, sha).value();
  // What a transfer cut short by a crash leaves: the name, the size, not the bytes.
  std::string xml = raw_volume_xml(name, 2 << 20);
  StorageVolHandle stale(virStorageVolCreateXML(t.pool(), xml.c_str(), 0));
  REQUIRE(stale);

  auto r = ship_file(t.conn(), ShipPool::kName, file, sha);
  REQUIRE(r.is_ok());
  CHECK(r->uploaded);
  CHECK(t.download_sha256(name) == sha);
  CHECK(t.volumes() == std::vector<std::string>{name});
}

TEST_CASE("a missing pool or file is NotFound, a directory is refused, and nothing is made",
          "[ship][e2e]") {
  ShipPool t;
  std::string file = t.make_file("disk.img", 4096, 6);
  std::string sha = sha_of(file);
  auto no_pool = ship_file(t.conn(), "armhive-ship-e2e-no-such-pool", file, sha);
  REQUIRE_FALSE(no_pool.is_ok());
  CHECK(no_pool.status().code() == ErrorCode::kNotFound);

  auto no_file = ship_file(t.conn(), ShipPool::kName, file + ".missing", sha);
  REQUIRE_FALSE(no_file.is_ok());
  CHECK(no_file.status().code() == ErrorCode::kNotFound);

  auto dir = ship_file(t.conn(), ShipPool::kName, fs::path(file).parent_path().string(), sha);
  REQUIRE_FALSE(dir.is_ok());
  CHECK(dir.status().code() == ErrorCode::kInvalidArgument);

  auto bad_sha = ship_file(t.conn(), ShipPool::kName, file, "not-a-sha");
  REQUIRE_FALSE(bad_sha.is_ok());
  CHECK(bad_sha.status().field() == "sha256");
  CHECK(t.volumes().empty());
}

}  // namespace
}  // namespace armhive
