// One LeaseEngine driving several hosts (issue 13 items 3–5, at the engine): a pool's VMs are
// spread over the hosts its labels select, every call for a VM goes to its own host, a host
// that cannot be listed or is drained holds only what would go to it, and a restart adopts
// each host's VMs from that host.
#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "daemon/engine/lease_engine.h"
#include "daemon/fleet/hypervisor_slot.h"
#include "daemon/store/database.h"
#include "daemon/store/sqlite_lease_store.h"
#include "tests/support/engine_harness.h"
#include "tests/support/topologies.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;
using Admin = HostHealthTracker::Admin;

CoreAllocator cores_of(const HostTopology& t) {
  auto a = CoreAllocator::create(t, default_cpu_sets(t));
  REQUIRE(a.is_ok());
  return std::move(a).value();
}

// A lab of two HoneyComb boards (hc1, hc2) and a ThunderX (tx1), each a FakeHypervisor
// behind its own fault plan, under one engine and one database.
struct Lab {
  struct Host {
    std::string name;
    std::string board;
    std::shared_ptr<FakeHypervisor> fake = std::make_shared<FakeHypervisor>();
    FaultPlan faults;
    std::unique_ptr<FaultyHypervisor> hv;
  };

  explicit Lab(std::vector<PoolConfig> pools) {
    for (auto [name, board] : {std::pair{"hc1", "honeycomb"}, std::pair{"hc2", "honeycomb"},
                               std::pair{"tx1", "thunderx"}}) {
      auto h = std::make_unique<Host>();
      h->name = name;
      h->board = board;
      h->hv = std::make_unique<FaultyHypervisor>(*h->fake, h->faults);
      hosts.push_back(std::move(h));
    }
    db = std::move(Database::open(":memory:").value());
    store = std::move(SqliteLeaseStore::open(*db).value());
    options.pools = std::move(pools);
    options.agent_poll = 1ms;
    options.reaper_period = 3600s;
    options.reconcile_period = 3600s;
    options.host_probe_period = 0ms;     // the tests probe with probe_hosts()
    options.host_probe_timeout = 200ms;  // a deadline, not a timing assertion
    options.schedule_period = 20ms;
    options.retry_backoff = 5ms;
    options.boot_timeout = 30s;
    options.threads = 2;
  }
  ~Lab() {
    if (engine) engine->stop();
  }

  // The engine over every host of the lab, or only those named.
  void make_engine(const std::set<std::string>& only = {}) {
    if (engine) engine->stop();
    engine.reset();
    std::vector<EngineHost> list;
    for (auto& h : hosts) {
      if (only.empty() || only.count(h->name)) list.push_back(engine_host(*h));
    }
    engine = std::make_unique<LeaseEngine>(options, std::move(list), *store, clock, &metrics);
  }

  static EngineHost engine_host(Host& h) {
    HostTopology t = h.board == "thunderx" ? thunderx_2s_topology() : lx2160a_topology();
    std::string host = h.name;
    return {h.name,
            h.hv.get(),
            cores_of(t),
            [host](const std::string& image) -> Result<BootImage> {
              return BootImage{image,
                               "1",
                               "/" + host + "/disk.qcow2",
                               "/" + host + "/vmlinuz",
                               "/" + host + "/initrd",
                               "console=ttyAMA0",
                               "root"};
            },
            {{"board", h.board}},
            "qemu+tls://" + h.name + ".lab/system"};
  }

  Host& host(const std::string& name) {
    for (auto& h : hosts) {
      if (h->name == name) return *h;
    }
    FAIL("no host " << name);
    return *hosts.front();
  }

  // Domains per host name (hosts without any are absent).
  std::map<std::string, int> spread() {
    std::map<std::string, int> out;
    for (auto& h : hosts) {
      if (!h->fake->domains().empty()) out[h->name] = static_cast<int>(h->fake->domains().size());
    }
    return out;
  }

  bool settle(int warm) { return settle_pool(*engine, warm); }

  Lease lease() {
    LeaseRequest req;
    req.pool = options.pools.front().name;
    req.owner = "ci-token";
    req.ssh_keys = {kTestKey};
    auto r = engine->create_lease(req);
    REQUIRE(r.is_ok());
    return *r;
  }

  HostView view(const std::string& name) {
    for (HostView& v : engine->hosts()) {
      if (v.topology.hostname == name) return v;
    }
    FAIL("no host view " << name);
    return {};
  }

  ManualClock clock;
  Metrics metrics;
  std::vector<std::unique_ptr<Host>> hosts;
  std::unique_ptr<Database> db;
  std::unique_ptr<SqliteLeaseStore> store;
  EngineOptions options;
  std::unique_ptr<LeaseEngine> engine;
};

PoolConfig honeycomb_pool(int min_warm, int max) {
  PoolConfig p = ci_pool(min_warm, max);
  p.host_labels = {{"board", "honeycomb"}};
  return p;
}

TEST_CASE("fleet engine: a pool spread over two hosts hands out VMs from both", "[engine][fleet]") {
  Lab lab({honeycomb_pool(4, 12)});
  lab.make_engine();
  REQUIRE(lab.engine->start().is_ok());
  REQUIRE(lab.settle(4));
  // Its labels select the HoneyComb boards only, and the VMs are spread evenly over them.
  CHECK(lab.spread() == std::map<std::string, int>{{"hc1", 2}, {"hc2", 2}});

  std::set<std::string> hosts_used;
  std::map<std::string, uint64_t> served;
  // Warm VMs are handed out in name order and the pool refills between leases (on either
  // board when both hold as many): lease until both boards have served, at most 8.
  for (int i = 0; i < 8 && hosts_used.size() < 2; ++i) {
    Lease l = lab.lease();
    REQUIRE(l.state == LeaseState::kReady);
    hosts_used.insert(l.host);
    ++served[l.host];
    // The VM is on the host the lease names, booted from that host's copy of the image.
    auto domains = lab.host(l.host).fake->domains();
    REQUIRE(domains.count(l.vm_name) == 1);
    CHECK(domains.at(l.vm_name).spec.base_disk == "/" + l.host + "/disk.qcow2");
    CHECK(domains.at(l.vm_name).keys == std::vector<std::string>{kTestKey});
    // Guest commands go to that host too.
    GuestExecRequest run;
    run.argv = {"uname", "-m"};
    REQUIRE(lab.engine->exec(l.id, run).is_ok());
    CHECK(lab.host(l.host).fake->saw(l.vm_name + ": uname -m"));
    // So do those of callers that know the VM by name only (benchmarks, startup commands).
    run.argv = {"nproc"};
    REQUIRE(lab.engine->guest_agent().exec(l.vm_name, run).is_ok());
    CHECK(lab.host(l.host).fake->saw(l.vm_name + ": nproc"));
    CHECK_FALSE(lab.host(l.host == "hc1" ? "hc2" : "hc1").fake->saw(l.vm_name + ": nproc"));
  }
  CHECK(lab.engine->guest_agent()
            .exec("armhive-vm-nobody", GuestExecRequest{{"true"}, "", 1s})
            .status()
            .code() == ErrorCode::kNotFound);
  CHECK(hosts_used == std::set<std::string>{"hc1", "hc2"});
  CHECK(lab.host("tx1").fake->creates() == 0);
  // Hand-out latency is labelled by the host that served it.
  for (const auto& [host, n] : served) {
    CHECK(lab.metrics.count("armhive_handout_seconds",
                            {{"pool", "ci"}, {"host", host}, {"path", "warm"}}) == n);
  }
  REQUIRE(lab.settle(4));  // refilled

  SECTION("each host shows its own cores and VMs") {
    std::vector<HostView> views = lab.engine->hosts();
    REQUIRE(views.size() == 3);
    CHECK(views[0].topology.hostname == "hc1");
    CHECK(views[0].labels.at("board") == "honeycomb");
    CHECK(views[2].topology.hostname == "tx1");
    CHECK(views[2].topology.cpus.size() == thunderx_2s_topology().cpus.size());
    for (const HostView& v : views) {
      int held = 0;
      for (const CoreUse& c : v.cores) held += c.vm_name.empty() ? 0 : 1;
      INFO(v.topology.hostname);
      CHECK(held == 2 * static_cast<int>(lab.host(v.topology.hostname).fake->domains().size()));
    }
  }
  SECTION("a released VM is destroyed on its own host; the pool refills") {
    Lease l = lab.engine->list_leases({}).value().front();
    std::string other = l.host == "hc1" ? "hc2" : "hc1";
    size_t others = lab.host(other).fake->domains().size();
    REQUIRE(lab.engine->release_lease(l.id).is_ok());
    REQUIRE(lab.settle(4));
    CHECK(lab.host(l.host).fake->domains().count(l.vm_name) == 0);
    CHECK(lab.host(other).fake->domains().size() >= others);
  }
}

TEST_CASE("fleet engine: a drained host's free VMs go, the pool refills on the others",
          "[engine][fleet][drain]") {
  Lab lab({honeycomb_pool(4, 8)});
  lab.make_engine();
  REQUIRE(lab.engine->start().is_ok());
  REQUIRE(lab.settle(4));
  Lease on_hc1;
  for (int i = 0; i < 4 && on_hc1.id.empty(); ++i) {  // 2 of the 4 warm VMs are on hc1
    Lease l = lab.lease();
    if (l.host == "hc1") on_hc1 = l;
  }
  REQUIRE(!on_hc1.id.empty());
  REQUIRE(lab.settle(4));

  REQUIRE(lab.engine->set_host_admin("hc1", Admin::kDrain).is_ok());
  REQUIRE(lab.settle(4));
  // hc1 keeps only the leased VM; the warm VMs it held were replaced on hc2.
  auto hc1 = lab.host("hc1").fake->domains();
  CHECK(hc1.size() == 1);
  CHECK(hc1.count(on_hc1.vm_name) == 1);
  CHECK(lab.engine->get_lease(on_hc1.id)->state == LeaseState::kReady);
  CHECK(lab.view("hc1").admin == Admin::kDrain);
  // New leases are served by hc2 without waiting.
  Lease next = lab.lease();
  CHECK(next.state == LeaseState::kReady);
  CHECK(next.host == "hc2");

  SECTION("every host of the pool drained: leases wait, naming that") {
    REQUIRE(lab.engine->set_host_admin("hc2", Admin::kMaintenance).is_ok());
    REQUIRE(lab.settle(0));
    Lease waiting = lab.lease();
    CHECK(waiting.state == LeaseState::kPending);
    lab.engine->schedule();
    lab.engine->wait_idle(5s);
    CHECK_THAT(lab.engine->get_lease(waiting.id)->reason,
               Catch::Contains("no host of pool 'ci' takes new VMs (hc1 draining, hc2 "
                               "maintenance)"));
    CHECK(lab.host("tx1").fake->creates() == 0);  // its labels never select tx1
    REQUIRE(lab.engine->set_host_admin("hc2", Admin::kNone).is_ok());
    CHECK(lab.engine->wait_lease(waiting.id, 10s)->state == LeaseState::kReady);
    CHECK(lab.engine->get_lease(waiting.id)->host == "hc2");
  }
  SECTION("the drain is per host and survives a restart") {
    lab.make_engine();
    REQUIRE(lab.engine->start().is_ok());
    CHECK(lab.view("hc1").admin == Admin::kDrain);
    CHECK(lab.view("hc2").admin == Admin::kNone);
  }
}

TEST_CASE("fleet engine: a host that cannot be listed holds only itself",
          "[engine][fleet][faults]") {
  Lab lab({honeycomb_pool(2, 8)});
  lab.host("hc2").faults.fail_method("list_vms", FaultKind::kTransient);
  lab.make_engine();
  REQUIRE(lab.engine->start().is_ok());
  REQUIRE(lab.settle(2));
  // hc2's running domains (hence its free cores) are unknown: nothing goes there.
  CHECK(lab.spread() == std::map<std::string, int>{{"hc1", 2}});
  HostView hc2 = lab.view("hc2");
  CHECK(hc2.state == HostState::kDegraded);
  CHECK(lab.metrics.value(
            "armhive_engine_errors_total",
            {{"op", "hypervisor.list_vms"}, {"code", "unavailable"}, {"host", "hc2"}}) >= 1);
  CHECK_THAT(hc2.last_error, Catch::Contains("hypervisor.list_vms"));
  CHECK(lab.view("hc1").state == HostState::kOk);
  Status pass = lab.engine->reconcile();
  CHECK(pass.code() == ErrorCode::kUnavailable);
  CHECK_THAT(pass.message(), Catch::Contains("host hc2"));

  // Listed again: the next VMs go to hc2 (it holds fewer of the pool).
  lab.host("hc2").faults.clear_method("list_vms");
  Status listed = lab.engine->reconcile();
  INFO(listed.to_string());
  REQUIRE(listed.is_ok());
  CHECK(lab.view("hc2").state == HostState::kOk);
  Lease a = lab.lease();
  REQUIRE(lab.settle(2));
  CHECK(a.host == "hc1");  // a warm VM was there
  CHECK(lab.spread().count("hc2") == 1);
}

TEST_CASE("fleet engine: a host whose calls hang does not hold up the others' hand-outs",
          "[engine][fleet][faults]") {
  Lab lab({honeycomb_pool(0, 8)});  // max_starting 2: per host in a fleet
  Lab::Host& hung = lab.host("hc2");
  hung.faults.set_hang(std::chrono::minutes(10));  // until release_hangs()
  hung.faults.fail_method("create_vm", FaultKind::kHang);
  lab.make_engine();  // options.threads = 2: each host has two workers
  REQUIRE(lab.engine->start().is_ok());

  // Cold boots are spread over the two boards; the two on hc2 hang in create_vm and use up
  // hc2's boot slots and workers. Everything else goes to hc1.
  std::vector<Lease> leases;
  for (int i = 0; i < 6; ++i) leases.push_back(lab.lease());
  auto settled = [&] {
    int ready = 0, stuck = 0;
    for (const Lease& l : leases) {
      Lease now = lab.engine->get_lease(l.id).value();
      ready += now.state == LeaseState::kReady ? 1 : 0;
      stuck += now.state == LeaseState::kProvisioning && now.host == "hc2" ? 1 : 0;
    }
    return std::pair{ready, stuck};
  };
  for (int i = 0; i < 4000 && settled() != std::pair{4, 2}; ++i) {
    lab.engine->wait_idle(5ms);
    std::this_thread::sleep_for(5ms);
  }
  REQUIRE(settled() == std::pair{4, 2});
  for (const Lease& l : leases) {
    Lease now = lab.engine->get_lease(l.id).value();
    if (now.state == LeaseState::kReady) CHECK(now.host == "hc1");
  }
  // Every worker of hc2 is still stuck, and hc1 served the rest all the same.
  CHECK(hung.faults.hanging() == 2);
  CHECK(lab.host("hc1").fake->domains().size() == 4);

  // hc2 answers again: its stuck boots fail with a timeout, which is the host's fault: their
  // leases wait for another VM rather than fail, and are served.
  hung.faults.clear_method("create_vm");
  hung.faults.release_hangs();
  while (hung.faults.hanging() > 0) std::this_thread::sleep_for(1ms);
  lab.engine->wait_idle(5s);
  lab.clock.advance(std::chrono::minutes(1));  // past the pool's boot backoff
  lab.engine->schedule();
  for (const Lease& l : leases) {
    Result<Lease> done = lab.engine->wait_lease(l.id, 20s);
    REQUIRE(done.is_ok());
    CHECK(done->state == LeaseState::kReady);
  }
}

// The owner's view of a lease's story: the event types for it, in order.
std::vector<std::string> lease_events(LeaseEngine& engine, const std::string& lease_id,
                                      const std::string& owner) {
  std::vector<std::string> out;
  for (const Event& e : engine.events_since(0, 0ms)) {
    if (e.lease_id != lease_id) continue;
    CHECK(e.owner == owner);  // what the owner's event stream is filtered by
    out.push_back(e.type);
  }
  return out;
}

// Probes until every host answers (at most ~5 s): a host's probe worker is free again only
// once the call stuck in it has returned, a moment after the fault plan let it go.
bool probed_reachable(LeaseEngine& engine) {
  for (int i = 0; i < 500; ++i) {
    if (engine.probe_hosts().empty()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// Runs scheduling passes until `done` (at most ~5 s): a drain's retirements are queued by a
// pass that may come after the pool already looks settled.
template <class Pred>
bool converges(LeaseEngine& engine, Pred done) {
  for (int i = 0; i < 500; ++i) {
    engine.schedule();
    engine.wait_idle(5s);
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

TEST_CASE("fleet engine: a host that stops answering holds its leases, then loses them",
          "[engine][fleet][unreachable]") {
  Lab lab({honeycomb_pool(2, 8)});
  lab.options.unreachable_grace = 5min;
  lab.make_engine();
  REQUIRE(lab.engine->start().is_ok());
  REQUIRE(lab.settle(2));
  REQUIRE(lab.spread() == std::map<std::string, int>{{"hc1", 1}, {"hc2", 1}});
  Lease on_hc2;
  for (int i = 0; i < 6 && on_hc2.id.empty(); ++i) {  // warm VMs are taken in name order
    Lease l = lab.lease();
    if (l.host == "hc2") on_hc2 = l;
    REQUIRE(lab.settle(2));
  }
  REQUIRE(!on_hc2.id.empty());
  REQUIRE(lab.settle(2));
  CHECK(lab.engine->probe_hosts().empty());

  // hc2's libvirtd stops answering (a SIGSTOP, a cut cable): its probe misses its deadline.
  Lab::Host& hc2 = lab.host("hc2");
  hc2.faults.set_hang(std::chrono::minutes(10));  // until release_hangs()
  hc2.faults.fail_method("list_vms", FaultKind::kHang);
  CHECK(lab.engine->probe_hosts() == std::vector<std::string>{"hc2"});
  Lease held = lab.engine->get_lease(on_hc2.id).value();
  CHECK(held.state == LeaseState::kHostUnreachable);
  CHECK_THAT(held.reason, Catch::Contains("host hc2 unreachable"));
  CHECK_THAT(held.reason, Catch::Contains("the VM may still run"));
  // Lost 5 minutes after it went, unless it answers (the test's clock did not move).
  CHECK_THAT(held.reason, Catch::Contains("ends as lost at " +
                                          to_rfc3339(lab.clock.now() + std::chrono::minutes(5))));
  HostView view = lab.view("hc2");
  CHECK(view.state == HostState::kUnreachable);
  CHECK(view.unreachable_since.has_value());
  CHECK_THAT(view.last_error, Catch::Contains("did not answer"));
  CHECK(lab.view("hc1").state == HostState::kOk);
  // A second probe while the first is still stuck keeps it unreachable without another wait.
  CHECK(lab.engine->probe_hosts() == std::vector<std::string>{"hc2"});
  CHECK(hc2.faults.hanging() == 1);

  // Its warm VM left the pool (not destroyed: nothing is known of it); the pool refilled on
  // hc1, and a new lease is served there at once.
  std::set<std::string> hc2_before;
  for (const auto& [name, d] : hc2.fake->domains()) hc2_before.insert(name);
  REQUIRE(lab.settle(2));  // warm VMs of reachable hosts only
  Lease next = lab.lease();
  CHECK(next.state == LeaseState::kReady);
  CHECK(next.host == "hc1");
  auto hc2_kept = [&] {
    for (const std::string& name : hc2_before) {
      if (!hc2.fake->domains().count(name)) return false;
    }
    return true;
  };
  CHECK(hc2_kept());
  GuestExecRequest run;
  run.argv = {"true"};
  CHECK(lab.engine->exec(on_hc2.id, run).status().code() == ErrorCode::kConflict);

  auto answer_again = [&] {
    hc2.faults.clear_method("list_vms");
    hc2.faults.release_hangs();
    while (hc2.faults.hanging() > 0) std::this_thread::sleep_for(1ms);
  };

  SECTION("back within the grace period: the lease resumes and nothing is destroyed") {
    lab.clock.advance(std::chrono::minutes(4));
    lab.engine->expire_due_leases();
    CHECK(lab.engine->get_lease(on_hc2.id)->state == LeaseState::kHostUnreachable);
    answer_again();
    CHECK(probed_reachable(*lab.engine));
    Lease back = lab.engine->get_lease(on_hc2.id).value();
    CHECK(back.state == LeaseState::kReady);
    CHECK(back.expires_at == on_hc2.expires_at);  // its TTL ran on meanwhile, unchanged
    lab.engine->wait_idle(5s);
    REQUIRE(lab.engine->reconcile().is_ok());
    lab.engine->wait_idle(5s);
    CHECK(lab.view("hc2").state == HostState::kOk);
    CHECK(hc2_kept());  // nothing destroyed there: its warm VM serves again
    REQUIRE(lab.engine->exec(on_hc2.id, run).is_ok());
    CHECK(hc2.fake->saw(on_hc2.vm_name + ": true"));
    std::vector<std::string> story = lease_events(*lab.engine, on_hc2.id, "ci-token");
    CHECK(has(story, "lease.host_unreachable"));
    CHECK(story.back() == "lease.ready");
  }
  SECTION("past the grace period: the lease is lost, its VM destroyed once the host answers") {
    lab.clock.advance(std::chrono::minutes(6));
    lab.engine->expire_due_leases();
    Lease lost = lab.engine->get_lease(on_hc2.id).value();
    CHECK(lost.state == LeaseState::kLost);
    CHECK_THAT(lost.reason, Catch::Contains("longer than the grace of 300s"));
    std::vector<std::string> story = lease_events(*lab.engine, on_hc2.id, "ci-token");
    CHECK(story.back() == "lease.lost");
    LeaseFilter live;
    live.include_ended = false;
    std::vector<Lease> still_live = lab.engine->list_leases(live).value();
    for (const Lease& l : still_live) CHECK(l.id != on_hc2.id);

    answer_again();
    CHECK(probed_reachable(*lab.engine));
    lab.engine->wait_idle(5s);
    lab.clock.advance(std::chrono::minutes(1));  // past any destroy retry backoff
    REQUIRE(lab.engine->reconcile().is_ok());
    lab.engine->wait_idle(5s);
    REQUIRE(lab.settle(2));
    // The lost lease's VM and the warm VM hc2 held are gone; whatever hc2 holds now is new.
    for (const std::string& name : hc2_before) {
      INFO(name);
      CHECK(hc2.fake->domains().count(name) == 0);
    }
  }
  SECTION("a restart while the host is away: start is not held up, the lease resumes later") {
    lab.make_engine();
    REQUIRE(lab.engine->start().is_ok());  // hc2's listing waited for the probe's deadline only
    CHECK(lab.view("hc2").state == HostState::kUnreachable);
    CHECK(lab.engine->get_lease(on_hc2.id)->state == LeaseState::kHostUnreachable);
    CHECK(lab.engine->get_lease(next.id)->state == LeaseState::kReady);
    Lease more = lab.lease();
    CHECK(more.state == LeaseState::kReady);
    CHECK(more.host == "hc1");
    answer_again();
    CHECK(probed_reachable(*lab.engine));
    lab.engine->wait_idle(5s);
    REQUIRE(lab.engine->reconcile().is_ok());  // adopts hc2's VMs now that it lists
    lab.engine->wait_idle(5s);
    CHECK(lab.engine->get_lease(on_hc2.id)->state == LeaseState::kReady);
    CHECK(hc2_kept());
    REQUIRE(lab.engine->exec(on_hc2.id, run).is_ok());
  }
  SECTION("released while its host is away: the lease ends now, the VM goes once it answers") {
    Lease released = lab.engine->release_lease(on_hc2.id).value();
    CHECK(released.state == LeaseState::kReleased);
    answer_again();
    CHECK(probed_reachable(*lab.engine));
    lab.engine->wait_idle(5s);
    lab.clock.advance(std::chrono::minutes(1));
    REQUIRE(lab.engine->reconcile().is_ok());
    lab.engine->wait_idle(5s);
    CHECK(hc2.fake->domains().count(on_hc2.vm_name) == 0);
  }
}

TEST_CASE("fleet engine: a host not connected at a restart is driven through its slot until it is",
          "[engine][fleet][unreachable]") {
  // Before the lab: the engine that borrows it goes first.
  HypervisorSlot slot("hc2", "unable to connect to server at 'hc2.lab:16514': Connection refused");
  Lab lab({honeycomb_pool(2, 8)});
  lab.make_engine();
  REQUIRE(lab.engine->start().is_ok());
  REQUIRE(lab.settle(2));
  Lease on_hc2;
  for (int i = 0; i < 6 && on_hc2.id.empty(); ++i) {
    Lease l = lab.lease();
    if (l.host == "hc2") on_hc2 = l;
    REQUIRE(lab.settle(2));
  }
  REQUIRE(!on_hc2.id.empty());
  Lab::Host& hc2 = lab.host("hc2");
  std::set<std::string> hc2_before;
  for (const auto& [name, d] : hc2.fake->domains()) hc2_before.insert(name);
  const int creates = hc2.fake->creates();

  // armhived restarts while hc2 cannot be reached: it gets hc2 through a slot that nothing
  // is attached to yet, with the topology hc2 had.
  lab.engine->stop();
  lab.engine.reset();
  std::vector<EngineHost> hosts;
  hosts.push_back(Lab::engine_host(lab.host("hc1")));
  EngineHost late = Lab::engine_host(hc2);
  late.hypervisor = &slot;
  hosts.push_back(std::move(late));
  lab.engine = std::make_unique<LeaseEngine>(lab.options, std::move(hosts), *lab.store, lab.clock,
                                             &lab.metrics);
  REQUIRE(lab.engine->start().is_ok());
  // Refused twice in a row (once may be libvirt reconnecting): unreachable.
  lab.engine->probe_hosts();
  CHECK(lab.engine->probe_hosts() == std::vector<std::string>{"hc2"});
  HostView away = lab.view("hc2");
  CHECK(away.state == HostState::kUnreachable);
  CHECK_THAT(away.last_error, Catch::Contains("host hc2 is not connected"));
  CHECK_THAT(away.last_error, Catch::Contains("Connection refused"));
  Lease held = lab.engine->get_lease(on_hc2.id).value();
  CHECK(held.state == LeaseState::kHostUnreachable);
  Lease more = lab.lease();  // hc1 serves meanwhile
  CHECK(more.state == LeaseState::kReady);
  CHECK(more.host == "hc1");
  CHECK_FALSE(lab.engine->reconcile().is_ok());  // hc2 named, nothing done there
  CHECK(hc2.fake->domains().size() == hc2_before.size());

  // hc2 answers: attached, probed, its VMs adopted; nothing of it destroyed or booted again.
  REQUIRE(slot.attach(hc2.hv.get()).is_ok());
  CHECK(probed_reachable(*lab.engine));
  lab.engine->wait_idle(5s);
  REQUIRE(lab.engine->reconcile().is_ok());
  lab.engine->wait_idle(5s);
  CHECK(lab.engine->get_lease(on_hc2.id)->state == LeaseState::kReady);
  GuestExecRequest run;
  run.argv = {"uname", "-m"};
  CHECK(lab.engine->exec(on_hc2.id, run).is_ok());
  for (const std::string& name : hc2_before) CHECK(hc2.fake->domains().count(name) == 1);
  CHECK(hc2.fake->creates() == creates);
  CHECK(lab.view("hc2").state == HostState::kOk);
}

TEST_CASE("fleet engine: a hand-out caught by a host that hangs is served by another host",
          "[engine][fleet][unreachable]") {
  Lab lab({honeycomb_pool(4, 8)});
  lab.options.handout_wait = 20ms;  // create_lease returns while the hand-out is stuck
  lab.make_engine();
  REQUIRE(lab.engine->start().is_ok());
  REQUIRE(lab.settle(4));
  REQUIRE(lab.spread() == std::map<std::string, int>{{"hc1", 2}, {"hc2", 2}});

  // hc2 hangs: its hand-out calls first (what a lease meets), then its listing.
  Lab::Host& hc2 = lab.host("hc2");
  hc2.faults.set_hang(std::chrono::minutes(10));  // until release_hangs()
  hc2.faults.fail_method("set_authorized_keys", FaultKind::kHang);
  Lease caught;
  std::vector<std::string> taken;
  for (int i = 0; i < 4 && caught.id.empty(); ++i) {  // warm VMs are taken in name order
    Lease l = lab.lease();
    taken.push_back(l.id);
    if (l.state == LeaseState::kProvisioning && l.host == "hc2") caught = l;
  }
  REQUIRE(!caught.id.empty());
  while (hc2.faults.hanging() == 0) std::this_thread::sleep_for(1ms);
  hc2.faults.fail_method("list_vms", FaultKind::kHang);
  CHECK(lab.engine->probe_hosts() == std::vector<std::string>{"hc2"});

  // The caught lease was not handed out yet: it takes a VM on hc1 rather than wait for hc2.
  Result<Lease> served = lab.engine->wait_lease(caught.id, 20s);
  REQUIRE(served.is_ok());
  CHECK(served->state == LeaseState::kReady);
  CHECK(served->host == "hc1");
  CHECK(served->vm_name != caught.vm_name);

  // hc2 answers: the stuck hand-out returns and finds its lease gone to another VM; its VM is
  // destroyed and the lease stays where it is.
  hc2.faults.clear_method("set_authorized_keys");
  hc2.faults.clear_method("list_vms");
  hc2.faults.release_hangs();
  while (hc2.faults.hanging() > 0) std::this_thread::sleep_for(1ms);
  CHECK(probed_reachable(*lab.engine));
  lab.engine->wait_idle(5s);
  Lease after = lab.engine->get_lease(caught.id).value();
  CHECK(after.state == LeaseState::kReady);
  CHECK(after.vm_name == served->vm_name);
  CHECK(hc2.fake->domains().count(caught.vm_name) == 0);
  GuestExecRequest run;
  run.argv = {"true"};
  REQUIRE(lab.engine->exec(caught.id, run).is_ok());
  CHECK(lab.host("hc1").fake->saw(served->vm_name + ": true"));
}

TEST_CASE("fleet engine: a host added at runtime serves its pools, only an empty one is removed",
          "[engine][fleet][hosts]") {
  Lab lab({honeycomb_pool(2, 8)});
  lab.make_engine({"hc1", "tx1"});
  REQUIRE(lab.engine->start().is_ok());
  REQUIRE(lab.settle(2));
  CHECK(lab.spread() == std::map<std::string, int>{{"hc1", 2}});

  // hc2 joins: listed on its own workers, then the pool spreads onto it.
  REQUIRE(lab.engine->add_host(Lab::engine_host(lab.host("hc2"))).is_ok());
  Status again = lab.engine->add_host(Lab::engine_host(lab.host("hc2")));
  CHECK(again.code() == ErrorCode::kConflict);
  CHECK(again.field() == "name");
  REQUIRE(lab.engine->reconcile().is_ok());  // its first listing, done before we look
  Lease first = lab.lease();
  Lease second = lab.lease();
  REQUIRE(lab.settle(2));  // the refills go to hc2, which holds none of the pool
  CHECK(lab.spread() == std::map<std::string, int>{{"hc1", 2}, {"hc2", 2}});
  CHECK(lab.view("hc2").uri == "qemu+tls://hc2.lab/system");
  CHECK(lab.view("hc2").labels.at("board") == "honeycomb");
  // A warm VM of the new host (warm VMs are taken in name order: one of hc1's may come first).
  Lease third;
  for (int i = 0; i < 4 && third.host != "hc2"; ++i) {
    third = lab.lease();
    REQUIRE(lab.settle(2));
  }
  CHECK(third.host == "hc2");
  GuestExecRequest run;
  run.argv = {"uname", "-m"};
  REQUIRE(lab.engine->exec(third.id, run).is_ok());
  CHECK(lab.host("hc2").fake->saw(third.vm_name + ": uname -m"));

  // Removal: a host with VMs or leases must be drained and emptied first; the first host
  // never goes; an empty one goes at once, and can come back.
  Status busy = lab.engine->remove_host("hc2");
  CHECK(busy.code() == ErrorCode::kConflict);
  CHECK_THAT(busy.message(), Catch::Contains("drain it first"));
  CHECK(lab.engine->remove_host("hc1").code() == ErrorCode::kConflict);
  CHECK(lab.engine->remove_host("rk1").code() == ErrorCode::kNotFound);
  REQUIRE(lab.engine->remove_host("tx1").is_ok());
  CHECK(lab.engine->hosts().size() == 2);
  CHECK(lab.engine->remove_host("tx1").code() == ErrorCode::kNotFound);
  CHECK(lab.engine->set_host_admin("tx1", Admin::kDrain).code() == ErrorCode::kNotFound);
  REQUIRE(lab.engine->add_host(Lab::engine_host(lab.host("tx1"))).is_ok());
  CHECK(lab.engine->hosts().size() == 3);

  REQUIRE(lab.engine->set_host_admin("hc2", Admin::kDrain).is_ok());
  // Its leases end (third, and second if the refill had reached hc2 before it was handed out).
  LeaseFilter live;
  live.include_ended = false;
  const std::vector<Lease> leases = lab.engine->list_leases(live).value();
  for (const Lease& l : leases) {
    if (l.host == "hc2") REQUIRE(lab.engine->release_lease(l.id).is_ok());
  }
  REQUIRE(lab.settle(2));  // refilled on hc1; hc2's free VMs go
  CHECK(converges(*lab.engine, [&] { return lab.host("hc2").fake->domains().empty(); }));
  REQUIRE(lab.engine->remove_host("hc2").is_ok());
  CHECK(lab.store->host_admin()->count("hc2") == 0);  // its drain is forgotten with it
  Lease fourth = lab.lease();
  CHECK(fourth.host == "hc1");
  CHECK(lab.engine->get_lease(first.id)->state == LeaseState::kReady);
}

TEST_CASE("fleet engine: a restart adopts each host's VMs from that host",
          "[engine][fleet][recovery]") {
  Lab lab({ci_pool(3, 8)});
  lab.make_engine();
  REQUIRE(lab.engine->start().is_ok());
  REQUIRE(lab.settle(3));
  std::map<std::string, int> before = lab.spread();
  CHECK(before.size() == 3);  // no labels: every host, one each
  Lease l = lab.lease();
  REQUIRE(l.state == LeaseState::kReady);
  REQUIRE(lab.settle(3));
  before = lab.spread();
  int creates = 0;
  for (auto& h : lab.hosts) creates += h->fake->creates();

  lab.make_engine();
  REQUIRE(lab.engine->start().is_ok());
  REQUIRE(lab.settle(3));
  CHECK(lab.spread() == before);
  int after = 0;
  for (auto& h : lab.hosts) after += h->fake->creates();
  CHECK(after == creates);  // nothing destroyed and booted again
  Lease again = lab.engine->get_lease(l.id).value();
  CHECK(again.state == LeaseState::kReady);
  CHECK(again.host == l.host);
  REQUIRE(lab.engine->reconcile().is_ok());
  REQUIRE(lab.engine->reconcile().is_ok());  // a second pass would destroy what is unwanted
  CHECK(lab.spread() == before);
}

TEST_CASE("fleet engine: a pool whose labels match no host, or a bad host list, fails start",
          "[engine][fleet]") {
  SECTION("labels match no host") {
    PoolConfig p = ci_pool(1, 2);
    p.host_labels = {{"board", "rockpro64"}};
    Lab lab({p});
    lab.make_engine();
    Status s = lab.engine->start();
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK(s.field() == "host_labels");
    CHECK_THAT(s.message(), Catch::Contains("pool ci"));
    for (auto& h : lab.hosts) CHECK(h->fake->creates() == 0);
  }
  SECTION("two hosts of one name") {
    Lab lab({ci_pool(1, 2)});
    lab.host("hc2").name = "hc1";
    lab.make_engine();
    Status s = lab.engine->start();
    CHECK(s.code() == ErrorCode::kConflict);
    CHECK_THAT(s.message(), Catch::Contains("host 'hc1'"));
  }
  SECTION("no host") {
    Lab lab({ci_pool(1, 2)});
    lab.hosts.clear();
    lab.make_engine();
    CHECK(lab.engine->start().code() == ErrorCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace armhive
