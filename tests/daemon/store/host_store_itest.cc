// SqliteHostStore: the hosts added through the API outlive a restart, as they were given.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "daemon/store/sqlite_host_store.h"
#include "tests/support/store_backends.h"

namespace armhive {
namespace {

HostSpec thunderx() {
  HostSpec h;
  h.name = "tx1";
  h.libvirt_uri = "qemu+ssh://armhive@tx1.lab/system?keyfile=/etc/armhive/id";
  h.labels = {{"board", "thunderx"}, {"numa", "2"}};
  h.housekeeping_cpus = "0-1,48-49";
  h.shared_cpus = "40-47";
  h.l2_clusters = {"0-1", "2-3"};
  h.vm_dir = "/srv/vms";
  h.network_guard = "host";
  h.field_prefix.clear();
  return h;
}

TEST_CASE("host store: API hosts are kept in order, replaced by name and forgotten",
          "[store][hosts]") {
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  auto store = SqliteHostStore::open(**db);
  REQUIRE(store.is_ok());
  CHECK((*store)->list()->empty());

  HostSpec hc2;
  hc2.name = "hc2";
  hc2.libvirt_uri = "qemu+tls://hc2.lab/system";
  REQUIRE((*store)->put(hc2).is_ok());
  REQUIRE((*store)->put(thunderx()).is_ok());
  auto listed = (*store)->list();
  REQUIRE(listed.is_ok());
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[0].name == "hc2");
  CHECK((*listed)[0].network_guard == "armhived");
  CHECK_FALSE((*listed)[0].dedicated_cpus.has_value());
  const HostSpec& tx = (*listed)[1];
  CHECK(tx.libvirt_uri == thunderx().libvirt_uri);
  CHECK(tx.labels == thunderx().labels);
  CHECK(tx.housekeeping_cpus == std::optional<std::string>("0-1,48-49"));
  CHECK_FALSE(tx.dedicated_cpus.has_value());
  CHECK(tx.shared_cpus == std::optional<std::string>("40-47"));
  CHECK(tx.l2_clusters == thunderx().l2_clusters);
  CHECK(tx.vm_dir == "/srv/vms");
  CHECK(tx.image_dir.empty());
  CHECK(tx.network_guard == "host");

  // Put again: replaced where it stands.
  hc2.labels = {{"board", "honeycomb"}};
  REQUIRE((*store)->put(hc2).is_ok());
  listed = (*store)->list();
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[0].labels.at("board") == "honeycomb");

  REQUIRE((*store)->remove("hc2").is_ok());
  REQUIRE((*store)->remove("hc2").is_ok());  // idempotent
  listed = (*store)->list();
  REQUIRE(listed->size() == 1);
  CHECK((*listed)[0].name == "tx1");

  // A row this version cannot read is an error naming the host, never a crash.
  REQUIRE((*db)->execute("UPDATE hosts SET spec = '{\"name\": 3}' WHERE name = 'tx1'").is_ok());
  auto broken = (*store)->list();
  CHECK(broken.status().code() == ErrorCode::kInternal);
  CHECK_THAT(broken.status().message(), Catch::Contains("hosts row 'tx1'"));
}

TEST_CASE("host store: each host's last capabilities outlive a restart", "[store][hosts]") {
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  {
    auto db = (*backend)->open();
    REQUIRE(db.is_ok());
    auto store = SqliteHostStore::open(**db);
    REQUIRE(store.is_ok());
    CHECK((*store)->capabilities()->empty());
    REQUIRE(
        (*store)->put_capabilities("hc1", "<capabilities><host>one</host></capabilities>").is_ok());
    REQUIRE((*store)->put_capabilities("tx1", "<capabilities/>").is_ok());
    REQUIRE(
        (*store)->put_capabilities("hc1", "<capabilities><host>two</host></capabilities>").is_ok());
  }
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  auto store = SqliteHostStore::open(**db);
  REQUIRE(store.is_ok());
  auto caps = (*store)->capabilities();
  REQUIRE(caps.is_ok());
  CHECK(caps->size() == 2);
  CHECK(caps->at("hc1") == "<capabilities><host>two</host></capabilities>");  // the last one
  // A host removed through the API takes its capabilities along.
  REQUIRE((*store)->remove("tx1").is_ok());
  CHECK((*store)->capabilities()->count("tx1") == 0);
}

}  // namespace
}  // namespace armhive
