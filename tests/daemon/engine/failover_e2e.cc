// Two armhived on one PostgreSQL with real guests (issue 36): the leader is killed with a lease
// ready and another waiting; the standby takes over, adopts the running VM (the same QEMU
// process, the same boot), serves both leases, and nothing is left behind.
#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "tests/support/daemon_process.h"
#include "tests/support/e2e_daemon.h"
#include "tests/support/files.h"
#include "tests/support/postgres_server.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

// The guest's boot id: the same one before and after means the VM never restarted.
std::string boot_id(Client& api, const std::string& lease) {
  ExecRequestDto req;
  req.argv = {"cat", "/proc/sys/kernel/random/boot_id"};
  auto r = api.exec(lease, req);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  REQUIRE(r->exit_code == 0);
  return r->out;
}

// A PostgreSQL database of the test's own (REQUIREd).
std::unique_ptr<TestPostgresDatabase> make_database() {
  auto pg = TestPostgresDatabase::make();
  INFO(pg.status().to_string());
  REQUIRE(pg.is_ok());
  return std::move(*pg);
}

// Two instances of one armhived on a database of their own: one state directory (one machine here;
// on a lab, each instance its own with the same contents) and one instance name (storage pool), so
// that the standby recognises the leader's domains as its own. Both are made before either starts
// (a DaemonProcess empties its state directory when made); the leader starts, the standby not.
struct Instances {
  const std::unique_ptr<TestPostgresDatabase> pg = make_database();
  const std::string state;
  DaemonProcess standby;
  DaemonProcess leader;
  Status standby_started = unavailable("not started");
  std::thread starter;

  Instances(const std::string& name, int port)
      : state(e2e_state() + "/" + name),
        standby(state, e2e_state() + "/images", port + 1, one_core_pool_toml(1) + store(*pg)),
        leader(state, e2e_state() + "/images", port, one_core_pool_toml(1) + store(*pg)) {
    standby.set_storage_pool("armhive-e2e-" + name);
    leader.set_storage_pool("armhive-e2e-" + name);
  }
  ~Instances() {
    if (starter.joinable()) starter.join();
  }
  static std::string store(const TestPostgresDatabase& pg) {
    return "\n[store]\nurl = \"postgresql:///?host=" + pg.dir() + "&dbname=" + pg.name() +
           "&user=armhive\"\nleader_lease = \"3s\"\n";
  }
  // What the leader held when the standby took over: a ready lease on a warm VM, its QEMU
  // process and its boot.
  struct Held {
    std::unique_ptr<Client> api;
    LeaseDto lease;
    pid_t qemu = -1;
    std::string boot;
  };
  // Starts the leader and leases its warm VM.
  Held lead_with_a_lease() {
    const Status started = leader.start();
    INFO(started.to_string() << "\n" << leader.log());
    REQUIRE(started.is_ok());
    Held h;
    h.api = leader.client();
    h.lease = lease_warm_vm(*h.api, state);
    h.qemu = qemu_pid(h.lease.vm->name);
    REQUIRE(h.qemu > 0);
    h.boot = boot_id(*h.api, h.lease.id);
    return h;
  }
  // Starts the standby (its start() returns once it serves, after a takeover) and waits until
  // it says it is one.
  void start_standby() {
    starter = std::thread([this] { standby_started = standby.start(std::chrono::seconds(300)); });
    REQUIRE(eventually(
        [&] { return read_file(state + "/armhived.log").find("standby: ") != std::string::npos; },
        120s));
  }
  // Waits for the standby to serve; REQUIREs it did.
  std::unique_ptr<Client> takeover() {
    starter.join();
    INFO(standby.log());
    REQUIRE(standby_started.is_ok());
    return standby.client();
  }
};

TEST_CASE("the leader of two armhived killed: the standby adopts its VM and serves its leases",
          "[failover]") {
  Instances two("failover", 18480);
  const std::string& state = two.state;
  DaemonProcess& leader = two.leader;
  const Instances::Held first = two.lead_with_a_lease();
  Client& api = *first.api;
  const LeaseDto& held = first.lease;
  const pid_t qemu = first.qemu;
  const std::string& boot = first.boot;
  // The pool holds one VM: a second lease waits for it.
  LeaseCreateRequest req;
  req.pool = "ci";
  req.ssh_keys = {make_ssh_key(state)};
  auto waiting = api.create_lease(req);
  REQUIRE(waiting.is_ok());
  CHECK(waiting->state == "pending");

  two.start_standby();
  leader.kill(SIGKILL);
  auto api_b = two.takeover();

  // The ready lease is served by the new leader on the same VM, which never stopped.
  auto still = api_b->get_lease(held.id);
  REQUIRE(still.is_ok());
  CHECK(still->state == "ready");
  REQUIRE(still->vm.has_value());
  CHECK(still->vm->name == held.vm->name);
  CHECK(qemu_pid(held.vm->name) == qemu);
  CHECK(boot_id(*api_b, held.id) == boot);
  // The waiting lease was not lost: it gets the VM the first one frees.
  REQUIRE(api_b->release_lease(held.id).is_ok());
  auto served = api_b->wait_lease(waiting->id, 300s);
  INFO(served.status().to_string());
  REQUIRE(served.is_ok());
  CHECK(served->state == "ready");
  REQUIRE(served->vm.has_value());
  CHECK(served->vm->name != held.vm->name);
  // No lease handed out twice, none lost: exactly the two, in the states they should be.
  auto listed = api_b->list_leases({});
  REQUIRE(listed.is_ok());
  CHECK(listed->items.size() == 2);

  REQUIRE(api_b->release_lease(waiting->id).is_ok());
  CHECK(eventually([&] { return api_b->get_lease(waiting->id)->state == "released"; }, 60s));
  two.standby.kill(SIGTERM);
  // The pool's warm VM is destroyed with the instance's domains by ~DaemonProcess.
}

TEST_CASE("a leader paused past its lease wakes, finds a successor, and exits touching nothing",
          "[failover]") {
  Instances two("failover-stop", 18483);
  const std::string& state = two.state;
  DaemonProcess& leader = two.leader;
  const Instances::Held first = two.lead_with_a_lease();
  const LeaseDto& held = first.lease;
  const pid_t qemu = first.qemu;
  const std::string& boot = first.boot;

  two.start_standby();
  // Paused (a stalled machine, a debugger): its lease runs out and the standby takes over.
  leader.signal_only(SIGSTOP);
  auto api_b = two.takeover();
  // Woken, the old leader sees its term over and exits (75) before acting again.
  leader.signal_only(SIGCONT);
  CHECK(leader.wait_exit() == 75);
  CHECK_THAT(read_file(state + "/armhived.log"), Catch::Contains("exiting now so that two"));
  // It destroyed nothing: the lease and its VM are as they were, served by the new leader.
  auto still = api_b->get_lease(held.id);
  REQUIRE(still.is_ok());
  CHECK(still->state == "ready");
  CHECK(qemu_pid(held.vm->name) == qemu);
  CHECK(boot_id(*api_b, held.id) == boot);
  REQUIRE(api_b->release_lease(held.id).is_ok());
  CHECK(eventually([&] { return api_b->get_lease(held.id)->state == "released"; }, 60s));
  two.standby.kill(SIGTERM);
}

}  // namespace
}  // namespace armhive
