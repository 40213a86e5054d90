#include "daemon/core/reconciler.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

using Kind = ReconcileActionKind;

WantedVm vm(const std::string& name, VmState state, bool adopted = true,
            const std::string& lease = "", bool destroy_due = false) {
  WantedVm w;
  w.record.name = name;
  w.record.vm_id = name.substr(8);
  w.record.pool = "ci";
  w.record.state = state;
  w.record.lease_id = lease;
  w.adopted = adopted;
  w.destroy_due = destroy_due;
  return w;
}

VmInfo domain(const std::string& name, bool running = true, const std::string& lease = "") {
  VmInfo d;
  d.name = name;
  d.vm_id = name.substr(8);
  d.pool = "ci";
  d.lease_id = lease;
  d.running = running;
  return d;
}

WantedSnapshot wanted(std::vector<WantedVm> vms, std::map<std::string, std::string> leases = {}) {
  WantedSnapshot w;
  w.complete = true;
  w.vms = std::move(vms);
  w.leases = std::move(leases);
  return w;
}

HostSnapshot host(std::vector<VmInfo> domains, std::vector<std::string> files = {}) {
  HostSnapshot h;
  h.complete = true;
  h.domains = std::move(domains);
  h.files_complete = true;
  h.files = std::move(files);
  return h;
}

std::vector<ReconcileAction> actions(const ReconcilePlan& p) { return p.actions; }

TEST_CASE("reconcile: nothing at all happens when either snapshot failed", "[core][reconcile]") {
  // Everything that would be acted on with complete snapshots...
  WantedSnapshot w = wanted({vm("armhive-vm-ready", VmState::kLeased, true, "l-1"),
                             vm("armhive-vm-dying", VmState::kDestroying, true, "", true)},
                            {{"l-1", "armhive-vm-ready"}});
  HostSnapshot h = host({domain("armhive-vm-orphan")}, {"armhive-vm-stray"});
  ReconcileMemory seen{{"armhive-vm-orphan"}, {"armhive-vm-stray"}};
  REQUIRE_FALSE(plan_reconcile(w, h, seen).actions.empty());

  SECTION("libvirt could not be listed: no VM is gone, no orphan destroyed, memory reset") {
    HostSnapshot failed = h;
    failed.complete = false;
    failed.domains.clear();
    failed.error = "Unavailable: connection reset";
    ReconcilePlan p = plan_reconcile(w, failed, seen);
    CHECK(p.actions.empty());
    CHECK(p.memory == ReconcileMemory{});
    REQUIRE(p.problems.size() == 1);
    CHECK_THAT(p.problems[0], Catch::Contains("connection reset"));
  }
  SECTION("the database could not be read") {
    WantedSnapshot failed;
    failed.error = "Internal: database row cannot be read";
    ReconcilePlan p = plan_reconcile(failed, h, seen);
    CHECK(p.actions.empty());
    CHECK(p.memory == ReconcileMemory{});
    CHECK_THAT(p.problems.at(0), Catch::Contains("database unreadable"));
  }
}

TEST_CASE("reconcile: an unwanted domain is destroyed only on the second consecutive pass",
          "[core][reconcile]") {
  WantedSnapshot w = wanted({});
  HostSnapshot h = host({domain("armhive-vm-orphan")});
  ReconcilePlan first = plan_reconcile(w, h, {});
  CHECK(actions(first) ==
        std::vector<ReconcileAction>{{Kind::kSuspect, "armhive-vm-orphan", "no VM record"}});
  ReconcilePlan second = plan_reconcile(w, h, first.memory);
  CHECK(actions(second) ==
        std::vector<ReconcileAction>{{Kind::kDestroyDomain, "armhive-vm-orphan", "no VM record"}});

  SECTION("a failed pass in between starts the count again") {
    HostSnapshot failed;
    ReconcilePlan broken = plan_reconcile(w, failed, first.memory);
    ReconcilePlan after = plan_reconcile(w, h, broken.memory);
    CHECK(after.actions.at(0).kind == Kind::kSuspect);
  }
  SECTION("wanted again on the second pass: kept") {
    ReconcilePlan now_wanted =
        plan_reconcile(wanted({vm("armhive-vm-orphan", VmState::kWarm)}), h, first.memory);
    CHECK(now_wanted.actions.empty());
    CHECK(now_wanted.memory.unwanted_domains.empty());
  }
}

TEST_CASE("reconcile: a domain not positively marked as armhive's is never touched",
          "[core][reconcile]") {
  VmInfo foreign = domain("armhive-vm-foreign");
  foreign.vm_id.clear();
  ReconcilePlan p = plan_reconcile(wanted({}), host({foreign}), {{"armhive-vm-foreign"}, {}});
  CHECK(p.actions.empty());
}

TEST_CASE("reconcile: a wanted VM whose domain is gone or stopped is reported gone",
          "[core][reconcile]") {
  WantedSnapshot w = wanted({vm("armhive-vm-warm", VmState::kWarm),
                             vm("armhive-vm-leased", VmState::kLeased, true, "l-1"),
                             vm("armhive-vm-stopped", VmState::kLeased, true, "l-2"),
                             vm("armhive-vm-booting", VmState::kStarting)},
                            {{"l-1", "armhive-vm-leased"}, {"l-2", "armhive-vm-stopped"}});
  ReconcilePlan p = plan_reconcile(w, host({domain("armhive-vm-stopped", false)}), {});
  CHECK(actions(p) == std::vector<ReconcileAction>{
                          {Kind::kVmGone, "armhive-vm-leased", "domain no longer exists"},
                          {Kind::kVmGone, "armhive-vm-stopped", "domain is not running"},
                          {Kind::kVmGone, "armhive-vm-warm", "domain no longer exists"}});
  // The booting VM is its boot task's business (its domain may not exist yet).
}

TEST_CASE("reconcile: startup adopts running VMs whose lease is live", "[core][reconcile]") {
  WantedSnapshot w = wanted({vm("armhive-vm-warm", VmState::kWarm, false),
                             vm("armhive-vm-leased", VmState::kLeased, false, "l-1"),
                             vm("armhive-vm-ended", VmState::kLeased, false, "l-gone"),
                             vm("armhive-vm-boot", VmState::kStarting, false, "l-2"),
                             vm("armhive-vm-lostboot", VmState::kStarting, false)},
                            {{"l-1", "armhive-vm-leased"}, {"l-2", "armhive-vm-boot"}});
  HostSnapshot h = host({domain("armhive-vm-warm"), domain("armhive-vm-leased", true, "l-1"),
                         domain("armhive-vm-ended", true, "l-gone"), domain("armhive-vm-boot")});
  ReconcilePlan p = plan_reconcile(w, h, {});
  CHECK(actions(p) == std::vector<ReconcileAction>{
                          {Kind::kAdopt, "armhive-vm-boot", ""},
                          {Kind::kAdopt, "armhive-vm-leased", ""},
                          {Kind::kAdopt, "armhive-vm-warm", ""},
                          {Kind::kVmGone, "armhive-vm-lostboot", "domain no longer exists"},
                          {Kind::kSuspect, "armhive-vm-ended", "its lease l-gone has ended"},
                      });
  SECTION("a domain whose lease is served by another VM is not adopted") {
    WantedSnapshot moved = w;
    moved.leases["l-1"] = "armhive-vm-other";
    ReconcilePlan q = plan_reconcile(moved, h, {});
    CHECK(std::count(q.actions.begin(), q.actions.end(),
                     ReconcileAction{Kind::kSuspect, "armhive-vm-leased",
                                     "its lease l-1 is served by armhive-vm-other"}) == 1);
  }
}

TEST_CASE("reconcile: destroying VMs are retried when due, whatever libvirt lists",
          "[core][reconcile]") {
  WantedSnapshot w = wanted({vm("armhive-vm-due", VmState::kDestroying, true, "", true),
                             vm("armhive-vm-wait", VmState::kDestroying, true, "", false),
                             vm("armhive-vm-startup", VmState::kDestroying, false, "", true)});
  ReconcilePlan p = plan_reconcile(w, host({domain("armhive-vm-due")}), {});
  CHECK(actions(p) ==
        std::vector<ReconcileAction>{{Kind::kRetryDestroy, "armhive-vm-due", ""},
                                     {Kind::kRetryDestroy, "armhive-vm-startup", ""}});
}

TEST_CASE("reconcile: stray files go on the second pass, only with a complete file listing",
          "[core][reconcile]") {
  WantedSnapshot w = wanted({vm("armhive-vm-kept", VmState::kWarm)});
  HostSnapshot h = host({domain("armhive-vm-kept")},
                        {"armhive-vm-kept", "armhive-vm-stray", "armhive-vm-stray"});
  ReconcilePlan first = plan_reconcile(w, h, {});
  CHECK(first.actions.empty());
  CHECK(first.memory.stray_files == std::set<std::string>{"armhive-vm-stray"});
  ReconcilePlan second = plan_reconcile(w, h, first.memory);
  CHECK(actions(second) ==
        std::vector<ReconcileAction>{{Kind::kDeleteFiles, "armhive-vm-stray", "stray files"}});
  HostSnapshot no_files = h;
  no_files.files_complete = false;
  no_files.files_error = "permission denied";
  ReconcilePlan blind = plan_reconcile(w, no_files, first.memory);
  CHECK(blind.actions.empty());
  CHECK(blind.memory.stray_files.empty());
  CHECK_THAT(blind.problems.at(0), Catch::Contains("permission denied"));
}

TEST_CASE("reconcile: a host's snapshot speaks for that host only", "[core][reconcile]") {
  auto on = [](WantedVm w, const std::string& h) {
    w.record.host = h;
    return w;
  };
  // hc1 runs its VM; tx1's VMs (leased, starting unadopted, destroying) run on tx1.
  WantedSnapshot w =
      wanted({on(vm("armhive-vm-hc1a", VmState::kLeased, true, "l-1"), "hc1"),
              on(vm("armhive-vm-tx1a", VmState::kLeased, true, "l-2"), "tx1"),
              on(vm("armhive-vm-tx1b", VmState::kWarm, false), "tx1"),
              on(vm("armhive-vm-tx1c", VmState::kDestroying, true, "", true), "tx1")},
             {{"l-1", "armhive-vm-hc1a"}, {"l-2", "armhive-vm-tx1a"}});
  HostSnapshot hc1 = host({domain("armhive-vm-hc1a", true, "l-1")}, {"armhive-vm-tx1a"});
  hc1.name = "hc1";
  ReconcilePlan p1 = plan_reconcile(w, hc1, {});
  ReconcilePlan p2 = plan_reconcile(w, hc1, p1.memory);
  // hc1 lacks tx1's domains: nothing is gone, retried or adopted because of it, and files
  // named after a tx1 VM are not strays.
  CHECK(p1.actions.empty());
  CHECK(p2.actions.empty());
  CHECK(p2.problems.empty());

  // tx1's own snapshot: its destroying VM is retried, its vanished leased VM is gone.
  HostSnapshot tx1 = host({domain("armhive-vm-tx1b")});
  tx1.name = "tx1";
  CHECK(actions(plan_reconcile(w, tx1, {})) ==
        std::vector<ReconcileAction>{{Kind::kAdopt, "armhive-vm-tx1b", ""},
                                     {Kind::kVmGone, "armhive-vm-tx1a", "domain no longer exists"},
                                     {Kind::kRetryDestroy, "armhive-vm-tx1c", ""}});

  // A domain on hc1 whose record names tx1 is reported, never destroyed.
  HostSnapshot odd =
      host({domain("armhive-vm-hc1a", true, "l-1"), domain("armhive-vm-tx1a", true, "l-2")});
  odd.name = "hc1";
  ReconcilePlan q1 = plan_reconcile(w, odd, {});
  ReconcilePlan q2 = plan_reconcile(w, odd, q1.memory);
  CHECK(q2.actions.empty());
  REQUIRE(q2.problems.size() == 1);
  CHECK(q2.problems[0] == "domain armhive-vm-tx1a runs on hc1 but its record names host tx1");

  // Records from before hosts were recorded belong to whichever host lists them.
  WantedSnapshot old =
      wanted({vm("armhive-vm-old", VmState::kLeased, true, "l-3")}, {{"l-3", "armhive-vm-old"}});
  HostSnapshot empty = host({});
  empty.name = "hc1";
  CHECK(actions(plan_reconcile(old, empty, {})) ==
        std::vector<ReconcileAction>{{Kind::kVmGone, "armhive-vm-old", "domain no longer exists"}});
}

// Every combination of record state, adoption, domain presence/running and lease liveness for
// one VM name, over two passes: the destructive actions appear only under the safety rules.
TEST_CASE("reconcile: exhaustive single-VM cases obey the safety rules", "[core][reconcile]") {
  const std::string name = "armhive-vm-x";
  for (int record = 0; record <= 4; ++record) {  // 4: no record
    for (int adopted = 0; adopted <= 1; ++adopted) {
      for (int dom = 0; dom <= 2; ++dom) {  // 0 none, 1 running, 2 stopped
        for (int lease_live = 0; lease_live <= 1; ++lease_live) {
          for (int due = 0; due <= 1; ++due) {
            for (int host_ok = 0; host_ok <= 1; ++host_ok) {
              WantedSnapshot w = wanted({});
              if (record < 4) {
                w.vms.push_back(
                    vm(name, static_cast<VmState>(record), adopted == 1, "l-x", due == 1));
              }
              if (lease_live) w.leases["l-x"] = name;
              HostSnapshot h = host({});
              if (dom > 0) h.domains.push_back(domain(name, dom == 1, "l-x"));
              h.complete = host_ok == 1;
              ReconcilePlan p1 = plan_reconcile(w, h, {});
              ReconcilePlan p2 = plan_reconcile(w, h, p1.memory);
              INFO("record " << record << " adopted " << adopted << " domain " << dom << " lease "
                             << lease_live << " due " << due << " host " << host_ok);
              for (const ReconcilePlan* p : {&p1, &p2}) {
                if (!host_ok) CHECK(p->actions.empty());
                for (const ReconcileAction& a : p->actions) {
                  CHECK(a.name == name);
                  if (a.kind == Kind::kDestroyDomain) {
                    CHECK(p == &p2);  // never on the first sighting
                    CHECK(dom > 0);
                    // The database positively does not want it.
                    CHECK((record == 4 || (!lease_live && !adopted)));
                  }
                  if (a.kind == Kind::kRetryDestroy) {
                    CHECK(record == static_cast<int>(VmState::kDestroying));
                    CHECK(due == 1);
                  }
                  if (a.kind == Kind::kVmGone) CHECK(dom != 1);
                  if (a.kind == Kind::kAdopt) {
                    CHECK(dom == 1);
                    CHECK(adopted == 0);
                    CHECK(lease_live == 1);
                  }
                }
              }
              // A running, adopted, wanted VM is never acted upon.
              if (record < 3 && adopted && dom == 1 && host_ok) CHECK(p2.actions.empty());
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace armhive
