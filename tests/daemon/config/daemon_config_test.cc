#include "daemon/config/daemon_config.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

TEST_CASE("the example configurations parse", "[config]") {
  for (const char* name : {"armhived.toml", "armhived-honeycomb.toml", "armhived-thunderx.toml",
                           "armhived-lab.toml"}) {
    auto c = load_daemon_config(std::string(ARMHIVE_SOURCE_DIR) + "/examples/" + name);
    INFO(name << ": " << c.status().to_string());
    if (c.status().code() == ErrorCode::kNotFound) continue;  // not every example exists yet
    REQUIRE(c.is_ok());
    CHECK_FALSE(c->pools.empty());
  }
  // The lab: three boards of two kinds, each pool served by the boards its labels select.
  auto lab = load_daemon_config(std::string(ARMHIVE_SOURCE_DIR) + "/examples/armhived-lab.toml");
  REQUIRE(lab.is_ok());
  REQUIRE(lab->hosts.size() == 3);
  CHECK(lab->hosts[0].l2_clusters.size() == 8);
  CHECK(lab->hosts[2].libvirt_uri.rfind("qemu+ssh://", 0) == 0);
  CHECK(lab->pools[0].host_labels.at("board") == "honeycomb");
}

TEST_CASE("a pool configuration is read with its durations and policy", "[config]") {
  auto c = parse_daemon_config(R"(
[host]
state_dir = "/tmp/x"
[host.cpus]
housekeeping = "0"
[[pools]]
name = "ci"
image = "tiny"
vcpus = 2
min_warm = 1
max = 4
default_ttl = "30m"
max_ttl = "4h"
cpu_policy = "shared"
overcommit = 2
labels = { arch = "aarch64" }
)");
  REQUIRE(c.is_ok());
  CHECK(c->database_path() == "/tmp/x/armhive.db");
  CHECK(c->housekeeping_cpus == std::optional<std::string>("0"));
  REQUIRE(c->pools.size() == 1);
  const PoolConfig& p = c->pools[0];
  CHECK(p.default_ttl == std::chrono::minutes(30));
  CHECK(p.max_ttl == std::chrono::hours(4));
  CHECK(p.cpu_policy == CpuPolicy::kShared);
  CHECK(p.overcommit == 2.0);
  CHECK(p.labels.at("arch") == "aarch64");
}

TEST_CASE("pools.files limits what armhive cp may move", "[config][files]") {
  const std::string head = R"(
[host]
state_dir = "/tmp/x"
[[pools]]
name = "ci"
image = "tiny"
)";
  auto c =
      parse_daemon_config(head + "[pools.files]\nmax_bytes = 1000\npath_prefix = \"/work//\"\n");
  REQUIRE(c.is_ok());
  CHECK(c->pools[0].files.max_bytes == 1000);
  CHECK(c->pools[0].files.path_prefix == "/work");
  auto d = parse_daemon_config(head);
  REQUIRE(d.is_ok());
  CHECK(d->pools[0].files.max_bytes == uint64_t{1} << 30);
  CHECK(d->pools[0].files.path_prefix == "/");
  for (const char* bad :
       {"path_prefix = \"work\"", "path_prefix = \"/a/../b\"", "max_bytes = -1", "colour = 1"}) {
    INFO(bad);
    auto e = parse_daemon_config(head + "[pools.files]\n" + bad + "\n");
    REQUIRE_FALSE(e.is_ok());
    CHECK(e.status().field().rfind("pools[0].files.", 0) == 0);
  }
}

TEST_CASE("audit keep is the audit log's retention, 90 days unless set, at least a day",
          "[config][audit]") {
  const std::string pool = "[[pools]]\nname=\"a\"\nimage=\"b\"\n";
  auto plain = parse_daemon_config(pool);
  REQUIRE(plain.is_ok());
  CHECK(plain->audit_keep == std::chrono::hours(90 * 24));
  auto set = parse_daemon_config("[audit]\nkeep = \"30d\"\n" + pool);
  REQUIRE(set.is_ok());
  CHECK(set->audit_keep == std::chrono::hours(30 * 24));
  for (const char* bad : {"keep = \"1h\"", "keep = \"forever\"", "keep = 0", "kept = \"9d\""}) {
    INFO(bad);
    auto c = parse_daemon_config("[audit]\n" + std::string(bad) + "\n" + pool);
    REQUIRE_FALSE(c.is_ok());
    CHECK(c.status().field().rfind("audit.", 0) == 0);
  }
}

TEST_CASE("store url is a PostgreSQL URI without a password, leader_lease 2s to 5m",
          "[config][store]") {
  const std::string pool = "[[pools]]\nname=\"a\"\nimage=\"b\"\n";
  auto plain = parse_daemon_config(pool);
  REQUIRE(plain.is_ok());
  CHECK(plain->store.url.empty());  // SQLite
  auto set = parse_daemon_config(
      "[store]\nurl = \"postgresql://armhive@db1:5432,db2:5432/armhive?target_session_attrs=read-"
      "write&passfile=/etc/armhive/pgpass\"\nleader_lease = \"15s\"\n" +
      pool);
  INFO(set.status().to_string());
  REQUIRE(set.is_ok());
  CHECK(set->store.leader_lease == std::chrono::seconds(15));
  CHECK(set->store.url.rfind("postgresql://armhive@db1", 0) == 0);
  for (const char* bad :
       {"url = \"postgresql://armhive:hunter2@db1/armhive\"",
        "url = \"postgresql://db1/armhive?password=hunter2\"", "url = \"mysql://db1/armhive\"",
        "url = \"host=db1 dbname=armhive\"", "url = \"postgresql://db1/arm hive\"",
        "url = \"postgresql://db1/a\"\nleader_lease = \"1s\"",
        "url = \"postgresql://db1/a\"\nleader_lease = \"6m\"", "uri = \"postgresql://db1/a\""}) {
    INFO(bad);
    auto c = parse_daemon_config("[store]\n" + std::string(bad) + "\n" + pool);
    REQUIRE_FALSE(c.is_ok());
    CHECK(c.status().field().rfind("store.", 0) == 0);
    CHECK_THAT(c.status().to_string(), !Catch::Contains("hunter2"));
  }
}

TEST_CASE("configuration errors name the key", "[config]") {
  auto field_of = [](const char* text) { return parse_daemon_config(text).status().field(); };
  CHECK(field_of("[[pools]]\nname = \"ci\"\nimage = \"tiny\"\nmax = 0\n") == "pools[0].max");
  CHECK(field_of("[[pools]]\nname = \"ci\"\nimage = \"tiny\"\nvcpu = 2\n") == "pools[0].vcpu");
  CHECK(field_of("[[pools]]\nname = \"C I\"\nimage = \"tiny\"\n") == "pools[0].name");
  CHECK(field_of("[[pools]]\nname = \"ci\"\nimage = \"tiny\"\nmax_ttl = \"forever\"\n") ==
        "pools[0].max_ttl");
  CHECK(field_of("[server]\nport = \"eighty\"\n[[pools]]\nname=\"a\"\nimage=\"b\"\n") ==
        "server.port");
  CHECK(field_of("[host]\nplacement = \"random\"\n[[pools]]\nname=\"a\"\nimage=\"b\"\n") ==
        "host.placement");
  CHECK(field_of("[host]\nlibvirt_timeout = \"0s\"\n[[pools]]\nname=\"a\"\nimage=\"b\"\n") ==
        "host.libvirt_timeout");
  // The engine's host names are armhive names: a name it would refuse is refused here.
  CHECK(field_of("[host]\nname = \"HoneyComb 1\"\n[[pools]]\nname=\"a\"\nimage=\"b\"\n") ==
        "host.name");
  CHECK(field_of("") == "pools");
  CHECK(parse_daemon_config("[[pools]\n").status().field() == "config");
}

// Issue 33 (finding 6): the per-token limits on long operations and the uploads' minimum rate.
TEST_CASE("server per-token long operation limits are read and checked", "[config]") {
  auto c = parse_daemon_config(
      "[server]\nmax_execs_per_token = 2\nmax_file_transfers_per_token = 1\n"
      "max_tunnels_per_token = 3\nmax_event_streams_per_token = 4\n"
      "upload_min_bytes_per_second = 1000\n[[pools]]\nname=\"a\"\nimage=\"b\"\n");
  REQUIRE(c.is_ok());
  CHECK(c->max_execs_per_token == 2);
  CHECK(c->max_file_transfers_per_token == 1);
  CHECK(c->max_tunnels_per_token == 3);
  CHECK(c->max_event_streams_per_token == 4);
  CHECK(c->upload_min_bytes_per_second == 1000);
  auto defaults = parse_daemon_config("[[pools]]\nname=\"a\"\nimage=\"b\"\n");
  REQUIRE(defaults.is_ok());
  CHECK(defaults->max_execs_per_token == 8);
  CHECK(defaults->upload_min_bytes_per_second == 131072);
  for (const char* key :
       {"max_execs_per_token", "max_file_transfers_per_token", "max_tunnels_per_token",
        "max_event_streams_per_token", "upload_min_bytes_per_second"}) {
    auto bad = parse_daemon_config("[server]\n" + std::string(key) +
                                   " = 0\n[[pools]]\nname=\"a\"\nimage=\"b\"\n");
    CHECK(bad.status().field() == std::string("server.") + key);
  }
}

// Issue 33 (finding 10): what a pool's SSH certificates permit.
TEST_CASE("pools tables ssh_permissions: a terminal by default, checked names", "[config]") {
  auto pool = [](const std::string& extra) {
    return parse_daemon_config("[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n" + extra);
  };
  auto defaults = pool("");
  REQUIRE(defaults.is_ok());
  CHECK(defaults->pools[0].ssh_permissions == std::vector<std::string>{"pty"});
  auto dev = pool("ssh_permissions = [\"pty\", \"port-forwarding\"]\n");
  REQUIRE(dev.is_ok());
  CHECK(dev->pools[0].ssh_permissions == std::vector<std::string>{"pty", "port-forwarding"});
  auto none = pool("ssh_permissions = []\n");
  REQUIRE(none.is_ok());
  CHECK(none->pools[0].ssh_permissions.empty());
  CHECK(pool("ssh_permissions = [\"pty\", \"permit-x11\"]\n").status().field() ==
        "pools[0].ssh_permissions[1]");
  CHECK(pool("ssh_permissions = [\"pty\", \"pty\"]\n").status().field() ==
        "pools[0].ssh_permissions[1]");
}

TEST_CASE("a pool's health schedule is off by default and read from pools.health", "[config]") {
  auto off = parse_daemon_config("[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n");
  REQUIRE(off.is_ok());
  CHECK(off->pools[0].health.every == Seconds(0));

  auto on = parse_daemon_config(R"(
[[pools]]
name = "ci"
image = "tiny"
health = { every = "6h", suite = "memory", runs_kept = 20, band_mads = 2 }
)");
  REQUIRE(on.is_ok());
  CHECK(on->pools[0].health.every == Seconds(6 * 3600));
  CHECK(on->pools[0].health.suite == "memory");
  CHECK(on->pools[0].health.runs_kept == 20);
  CHECK(on->pools[0].health.band_mads == 2);

  auto status_of = [](const std::string& text) { return parse_daemon_config(text).status(); };
  const std::string pool = "[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n";
  // Below the configured minimum (1 h by default, or engine.min_health_interval).
  Status too_often = status_of(pool + "health = { every = \"30m\" }\n");
  CHECK(too_often.field() == "pools[0].health.every");
  CHECK_THAT(too_often.message(), Catch::Contains("1h") && Catch::Contains("30m"));
  CHECK(status_of("[engine]\nmin_health_interval = \"10m\"\n" + pool +
                  "health = { every = \"30m\" }\n")
            .is_ok());
  CHECK(status_of("[engine]\nmin_health_interval = \"12h\"\n" + pool +
                  "health = { every = \"6h\" }\n")
            .field() == "pools[0].health.every");
  CHECK(status_of(pool + "health = { every = \"6h\", suite = \"gpu\" }\n").field() ==
        "pools[0].health.suite");
  CHECK(status_of(pool + "health = { every = \"6h\", runs_kept = 2 }\n").field() ==
        "pools[0].health.runs_kept");
  CHECK(status_of(pool + "health = { every = \"6h\", band_mads = 0 }\n").field() ==
        "pools[0].health.band_mads");
  CHECK(status_of(pool + "health = { every = \"6h\", band_mads = 11 }\n").field() ==
        "pools[0].health.band_mads");
  CHECK(status_of(pool + "health = { every = \"6h\", often = true }\n").field() ==
        "pools[0].health.often");
  CHECK(status_of(pool + "health = \"6h\"\n").field() == "pools[0].health");
}

TEST_CASE("without hosts tables the fleet is the one host of host", "[config]") {
  auto c = parse_daemon_config(R"(
[host]
name = "hc1"
libvirt_uri = "qemu+ssh://armhive@hc1/system"
[host.cpus]
dedicated = "2-15"
[[pools]]
name = "ci"
image = "tiny"
)");
  REQUIRE(c.is_ok());
  REQUIRE(c->hosts.size() == 1);
  CHECK(c->hosts[0].name == "hc1");
  CHECK(c->hosts[0].libvirt_uri == "qemu+ssh://armhive@hc1/system");
  CHECK(c->hosts[0].dedicated_cpus == std::optional<std::string>("2-15"));
  CHECK(c->hosts[0].labels.empty());

  auto defaults = parse_daemon_config("[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n");
  REQUIRE(defaults.is_ok());
  REQUIRE(defaults->hosts.size() == 1);
  CHECK(defaults->hosts[0].libvirt_uri == "qemu:///system");
  CHECK(defaults->libvirt_timeout == std::chrono::seconds(60));
  CHECK(c->libvirt_timeout == std::chrono::seconds(60));
}

TEST_CASE("hosts tables are read with labels and CPU sets, pools select them by labels",
          "[config]") {
  auto c = parse_daemon_config(R"(
[[hosts]]
name = "hc1"
libvirt_uri = "qemu+tls://hc1.lab/system"
labels = { board = "honeycomb" }
[hosts.cpus]
housekeeping = "0"
dedicated = "2-15"

[[hosts]]
name = "tx1"
libvirt_uri = "qemu+ssh://armhive@tx1.lab/system"
labels = { board = "thunderx", numa = "2" }

[[pools]]
name = "hc"
image = "tiny"
host_labels = { board = "honeycomb" }

[[pools]]
name = "any"
image = "tiny"
)");
  REQUIRE(c.is_ok());
  REQUIRE(c->hosts.size() == 2);
  CHECK(c->hosts[0].name == "hc1");
  CHECK(c->hosts[0].labels.at("board") == "honeycomb");
  CHECK(c->hosts[0].housekeeping_cpus == std::optional<std::string>("0"));
  CHECK(c->hosts[0].dedicated_cpus == std::optional<std::string>("2-15"));
  CHECK_FALSE(c->hosts[0].shared_cpus.has_value());
  CHECK(c->hosts[1].libvirt_uri == "qemu+ssh://armhive@tx1.lab/system");
  CHECK_FALSE(c->hosts[1].dedicated_cpus.has_value());
  CHECK(c->pools[0].host_labels.at("board") == "honeycomb");
  CHECK(c->pools[1].host_labels.empty());

  // Where a host keeps its VMs and shipped images, its L2 pairs and who guards its guests.
  auto lab = parse_daemon_config(R"(
[[hosts]]
name = "hc2"
libvirt_uri = "qemu+tls://hc2.lab/system"
l2_clusters = ["0-1", "2-3"]
vm_dir = "/srv/armhive/vms"
image_dir = "/srv/armhive/images"
network_guard = "host"
[[pools]]
name = "ci"
image = "tiny"
)");
  REQUIRE(lab.is_ok());
  CHECK(lab->hosts[0].l2_clusters == std::vector<std::string>{"0-1", "2-3"});
  CHECK(lab->hosts[0].vm_dir == "/srv/armhive/vms");
  CHECK(lab->hosts[0].image_dir == "/srv/armhive/images");
  CHECK(lab->hosts[0].network_guard == "host");
  CHECK(lab->hosts[0].field_prefix == "hosts[0].");
  CHECK(c->hosts[1].network_guard == "armhived");  // the default
  CHECK(c->hosts[1].vm_dir.empty());               // <state_dir>/vms

  // A single [[hosts]] entry is the host the daemon drives.
  auto one = parse_daemon_config(R"(
[[hosts]]
name = "hc1"
libvirt_uri = "qemu+tls://hc1.lab/system"
[hosts.cpus]
shared = "8-15"
[[pools]]
name = "ci"
image = "tiny"
)");
  REQUIRE(one.is_ok());
  CHECK(one->host_name == "hc1");
  CHECK(one->libvirt_uri == "qemu+tls://hc1.lab/system");
  CHECK(one->shared_cpus == std::optional<std::string>("8-15"));
}

TEST_CASE("hosts tables errors name the key, a pool matching no host names the pool", "[config]") {
  const std::string pool = "[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n";
  auto status_of = [&](const std::string& hosts) {
    return parse_daemon_config(hosts + pool).status();
  };
  CHECK(status_of("[[hosts]]\nlibvirt_uri = \"qemu:///system\"\n").field() == "hosts[0].name");
  CHECK(status_of("[[hosts]]\nname = \"a\"\n").field() == "hosts[0].libvirt_uri");
  CHECK(status_of("[[hosts]]\nname = \"a\"\nlibvirt_uri = \"hc1\"\n").field() ==
        "hosts[0].libvirt_uri");
  CHECK(status_of("[[hosts]]\nname = \"a\"\nlibvirt_uri = \"qemu:///sys tem\"\n").field() ==
        "hosts[0].libvirt_uri");
  CHECK(status_of("[[hosts]]\nname = \"a\"\nlibvirt_uri = \"qemu:///system\"\nuri = \"x\"\n")
            .field() == "hosts[0].uri");
  CHECK(status_of("[[hosts]]\nname = \"a\"\nlibvirt_uri = \"test:///default\"\n"
                  "[hosts.cpus]\nspare = \"1\"\n")
            .field() == "hosts[0].cpus.spare");
  Status twice = status_of(
      "[[hosts]]\nname = \"a\"\nlibvirt_uri = \"test:///default\"\n"
      "[[hosts]]\nname = \"a\"\nlibvirt_uri = \"test:///default\"\n");
  CHECK(twice.field() == "hosts[1].name");
  CHECK(twice.message().find("defined twice") != std::string::npos);
  CHECK(status_of("hosts = 3\n").field() == "hosts");
  const std::string host = "[[hosts]]\nname = \"a\"\nlibvirt_uri = \"test:///default\"\n";
  CHECK(status_of(host + "l2_clusters = [\"0-1\", \"2-x\"]\n").field() ==
        "hosts[0].l2_clusters[1]");
  CHECK(status_of(host + "vm_dir = \"vms\"\n").field() == "hosts[0].vm_dir");
  CHECK(status_of(host + "image_dir = \"/srv/../etc\"\n").field() == "hosts[0].image_dir");
  CHECK(status_of(host + "network_guard = \"nobody\"\n").field() == "hosts[0].network_guard");
  // [host] keys that belong to each host are refused beside [[hosts]], not silently ignored.
  CHECK(status_of("[host]\nlibvirt_uri = \"qemu:///system\"\n"
                  "[[hosts]]\nname = \"a\"\nlibvirt_uri = \"test:///default\"\n")
            .field() == "host.libvirt_uri");

  Status unmatched = parse_daemon_config(R"(
[[hosts]]
name = "hc1"
libvirt_uri = "qemu+tls://hc1.lab/system"
labels = { board = "honeycomb" }
[[pools]]
name = "ci"
image = "tiny"
[[pools]]
name = "altra"
image = "tiny"
host_labels = { board = "altra" }
)")
                         .status();
  CHECK(unmatched.code() == ErrorCode::kInvalidArgument);
  CHECK(unmatched.field() == "pools[1].host_labels");
  CHECK(unmatched.message().find("pool 'altra' matches no host") != std::string::npos);
  CHECK(unmatched.message().find("board=altra") != std::string::npos);
  // Without [[hosts]] the local host has no labels: a pool asking for some matches nothing.
  CHECK(parse_daemon_config(pool + "host_labels = { board = \"honeycomb\" }\n").status().field() ==
        "pools[0].host_labels");
}

TEST_CASE("network modes, egress allow-lists and access are read and checked", "[config]") {
  const std::string pools = "\n[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n";
  auto c = parse_daemon_config(R"(
[access]
listen = "10.78.0.1"
advertise = "armhive.example"
port_min = 23000
port_max = 23010
[[networks]]
name = "out"
mode = "nat"
[[networks.egress]]
cidr = "192.0.2.0/24"
ports = [80, 443]
[[networks.egress]]
cidr = "198.51.100.7"
)" + pools);
  REQUIRE(c.is_ok());
  CHECK(c->access.enabled);
  CHECK(c->access.listen == "10.78.0.1");
  CHECK(c->access.advertise == "armhive.example");
  CHECK(c->access.port_min == 23000);
  CHECK(c->access.port_max == 23010);
  REQUIRE(c->networks.size() == 1);
  CHECK(c->networks[0].mode == "nat");
  REQUIRE(c->networks[0].egress.size() == 2);
  CHECK(c->networks[0].egress[0].ports == std::vector<int>{80, 443});
  CHECK(c->networks[0].egress[1].ports.empty());

  auto no_access = parse_daemon_config(pools);
  REQUIRE(no_access.is_ok());
  CHECK_FALSE(no_access->access.enabled);

  auto field = [&](const std::string& text) {
    return parse_daemon_config(text + pools).status().field();
  };
  CHECK(field("[[networks]]\nmode = \"routed\"\n") == "networks[0].mode");
  CHECK(field("[[networks]]\n[[networks.egress]]\ncidr = \"192.0.2.0/24\"\n") ==
        "networks[0].egress");  // isolated
  CHECK(field("[[networks]]\nmode = \"nat\"\n[[networks.egress]]\ncidr = \"192.0.2.0/24\"\n"
              "ports = [0]\n") == "networks[0].egress[0].ports[0]");
  CHECK(field("[access]\nport_min = 23000\nport_max = 22000\n") == "access.port_max");
  CHECK(field("[access]\nlisten_port = 1\n") == "access.listen_port");
}

TEST_CASE("networks isolate their guests unless told not to, the guard check period is read",
          "[config]") {
  const std::string pools = "\n[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n";
  auto c = parse_daemon_config(
      "[[networks]]\nname = \"a\"\n[[networks]]\nname = \"b\"\n"
      "isolate_guests = false\n" +
      pools);
  REQUIRE(c.is_ok());
  REQUIRE(c->networks.size() == 2);
  CHECK(c->networks[0].isolate_guests);
  CHECK_FALSE(c->networks[1].isolate_guests);
  CHECK(c->guard_check_period == std::chrono::seconds(30));
  auto every = parse_daemon_config("[engine]\nguard_check_period = \"5s\"\n" + pools);
  REQUIRE(every.is_ok());
  CHECK(every->guard_check_period == std::chrono::seconds(5));
  auto bad = parse_daemon_config("[[networks]]\nisolate_guests = \"yes\"\n" + pools);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().field() == "networks[0].isolate_guests");
}

TEST_CASE("engine usage_period: how often leases' usage is sampled, at least 1s",
          "[config][usage]") {
  const std::string pools = "\n[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n";
  auto c = parse_daemon_config(pools);
  REQUIRE(c.is_ok());
  CHECK(c->usage_period == std::chrono::seconds(10));
  auto every = parse_daemon_config("[engine]\nusage_period = \"1m\"\n" + pools);
  REQUIRE(every.is_ok());
  CHECK(every->usage_period == std::chrono::minutes(1));
  for (const char* bad : {"\"500ms\"", "0"}) {
    auto fast = parse_daemon_config(std::string("[engine]\nusage_period = ") + bad + "\n" + pools);
    REQUIRE_FALSE(fast.is_ok());
    CHECK(fast.status().field() == "engine.usage_period");
  }
}

TEST_CASE("access listens on the access address by default, never every address unasked",
          "[config][access]") {
  const std::string pools = "\n[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n";
  auto listen = [&](const std::string& text) {
    auto c = parse_daemon_config(text + pools);
    INFO(c.status().to_string());
    REQUIRE(c.is_ok());
    return c->access.listen;
  };
  CHECK(listen("[access]\nadvertise = \"192.0.2.10\"\n") == "192.0.2.10");
  CHECK(listen("[server]\nbind = \"192.0.2.7\"\n[access]\nadvertise = \"a.example\"\n") ==
        "192.0.2.7");
  CHECK(listen("[access]\n") == "127.0.0.1");  // the API's own default bind
  CHECK(listen("[server]\nbind = \"0.0.0.0\"\n[access]\nlisten = \"0.0.0.0\"\n") ==
        "0.0.0.0");  // written: kept
  CHECK(listen("[access]\nlisten = \"::1\"\n") == "::1");
  auto wildcard = parse_daemon_config("[server]\nbind = \"0.0.0.0\"\n[access]\n" + pools);
  CHECK(wildcard.status().field() == "access.listen");
  CHECK_THAT(wildcard.status().message(), Catch::Contains("address runners reach"));
  CHECK(parse_daemon_config("[access]\nlisten = \"eth0\"\n" + pools).status().field() ==
        "access.listen");
}

TEST_CASE("access session caps and the idle timeout are read and checked", "[config][access]") {
  const std::string pools = "\n[[pools]]\nname = \"ci\"\nimage = \"tiny\"\n";
  auto defaults = parse_daemon_config("[access]\n" + pools);
  REQUIRE(defaults.is_ok());
  CHECK(defaults->access.max_sessions_per_forward == 64);
  CHECK(defaults->access.max_sessions == 1024);
  CHECK(defaults->access.forward_idle_timeout == std::chrono::minutes(15));
  auto c = parse_daemon_config(
      "[access]\nmax_sessions_per_forward = 8\nmax_sessions = 100\nforward_idle_timeout = "
      "\"90s\"\n" +
      pools);
  REQUIRE(c.is_ok());
  CHECK(c->access.max_sessions_per_forward == 8);
  CHECK(c->access.max_sessions == 100);
  CHECK(c->access.forward_idle_timeout == std::chrono::seconds(90));
  auto field = [&](const std::string& text) {
    return parse_daemon_config(text + pools).status().field();
  };
  CHECK(field("[access]\nmax_sessions_per_forward = 0\n") == "access.max_sessions_per_forward");
  CHECK(field("[access]\nmax_sessions = 0\n") == "access.max_sessions");
  CHECK(field("[access]\nforward_idle_timeout = \"soon\"\n") == "access.forward_idle_timeout");
}

TEST_CASE("a pool's max_extra_ports narrows access max_extra_ports, never widens it", "[config]") {
  auto pool = [](const std::string& keys) {
    return "[[pools]]\nname = \"ci\"\nimage = \"tiny\"\naccess_ports = [8080, 9000]\n" + keys;
  };
  auto c = parse_daemon_config("[access]\nmax_extra_ports = 3\n" + pool("max_extra_ports = 1\n") +
                               "[[pools]]\nname = \"wide\"\nimage = \"tiny\"\n");
  REQUIRE(c.is_ok());
  CHECK(c->access.max_extra_ports == 3);
  REQUIRE(c->pools.size() == 2);
  CHECK(c->pools[0].max_extra_ports == 1);
  CHECK_FALSE(c->pools[1].max_extra_ports.has_value());  // the daemon's cap applies

  // Equal to the daemon's is fine; above it (also above the default 4) names the pool's key.
  CHECK(parse_daemon_config("[access]\nmax_extra_ports = 2\n" + pool("max_extra_ports = 2\n"))
            .is_ok());
  auto over =
      parse_daemon_config("[access]\nmax_extra_ports = 2\n" + pool("max_extra_ports = 3\n"));
  CHECK(over.status().field() == "pools[0].max_extra_ports");
  CHECK_THAT(over.status().message(), Catch::Contains("[access] max_extra_ports (2)"));
  CHECK(parse_daemon_config(pool("max_extra_ports = 5\n")).status().field() ==
        "pools[0].max_extra_ports");
  CHECK(parse_daemon_config(pool("max_extra_ports = -1\n")).status().field() ==
        "pools[0].max_extra_ports");
  CHECK(parse_daemon_config(pool("max_extra_ports = \"2\"\n")).status().field() ==
        "pools[0].max_extra_ports");
}

TEST_CASE("min_warm auto: bounds inside max, every mistake named", "[config]") {
  auto pool = [](const std::string& lines) {
    return parse_daemon_config(
        "[host.cpus]\nhousekeeping = \"0\"\n[[pools]]\nname = "
        "\"ci\"\nimage = \"tiny\"\nmax = 6\n" +
        lines);
  };
  auto c = pool(
      "min_warm = \"auto\"\nauto_min = 1\nauto_max = 4\nscale_to_zero_after = \"30m\"\n"
      "burst_every = \"2h\"\n");
  REQUIRE(c.is_ok());
  REQUIRE(c->pools[0].auto_warm);
  CHECK(c->pools[0].auto_warm->auto_min == 1);
  CHECK(c->pools[0].auto_warm->auto_max == 4);
  CHECK(c->pools[0].auto_warm->scale_to_zero_after == Seconds(1800));
  CHECK(c->pools[0].auto_warm->burst_every == Seconds(7200));
  CHECK(c->pools[0].min_warm == 1);  // auto_min until the first scheduling pass
  // Defaults: auto_min 0, auto_max the pool's max, an hour idle, bursts once per 8 hours.
  auto d = pool("min_warm = \"auto\"\n");
  REQUIRE(d.is_ok());
  CHECK(d->pools[0].auto_warm->auto_min == 0);
  CHECK(d->pools[0].auto_warm->auto_max == 6);
  CHECK(d->pools[0].auto_warm->scale_to_zero_after == Seconds(3600));
  CHECK(d->pools[0].auto_warm->burst_every == Seconds(8 * 3600));
  CHECK_FALSE(pool("min_warm = 2\n")->pools[0].auto_warm);

  auto field = [&](const std::string& lines) {
    auto r = pool(lines);
    REQUIRE_FALSE(r.is_ok());
    return r.status().field();
  };
  CHECK(field("min_warm = \"lots\"\n") == "pools[0].min_warm");
  CHECK(field("min_warm = \"auto\"\nauto_max = 7\n") == "pools[0].auto_max");
  CHECK(field("min_warm = \"auto\"\nauto_min = 3\nauto_max = 2\n") == "pools[0].auto_min");
  CHECK(field("min_warm = \"auto\"\nauto_min = -1\n") == "pools[0].auto_min");
  CHECK(field("min_warm = \"auto\"\nscale_to_zero_after = \"0s\"\n") ==
        "pools[0].scale_to_zero_after");
  CHECK(field("min_warm = 1\nauto_max = 2\n") == "pools[0].auto_max");
  CHECK(field("min_warm = \"auto\"\nburst_every = \"10s\"\n") == "pools[0].burst_every");
  CHECK(field("min_warm = 1\nburst_every = \"8h\"\n") == "pools[0].burst_every");
}

}  // namespace
}  // namespace armhive
