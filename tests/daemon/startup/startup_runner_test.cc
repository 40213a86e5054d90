#include "daemon/startup/startup_runner.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "tests/support/engine_harness.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

constexpr const char* kSecret = "jit-s3cr3t-value-0123456789";

StartupRequestDto runner_command(bool release_on_exit) {
  StartupRequestDto c;
  c.argv = {"/opt/runner/run.sh", "--jitconfig-env"};
  c.env["LANG"] = {"C.UTF-8", false};
  c.env["RUNNER_JIT"] = {kSecret, true};
  c.release_on_exit = release_on_exit;
  return c;
}

struct Fixture {
  explicit Fixture(std::string db_path = ":memory:", int min_warm = 1)
      : h({ci_pool(min_warm, 3)}, std::move(db_path)) {
    h.start();
    open_runner();
  }
  void open_runner() {
    auto r = StartupRunner::open(*h.engine, *h.hypervisor, *h.db, h.clock, {},
                                 [this](const StartupEvent& e) {
                                   std::lock_guard lock(mu);
                                   events.push_back(e.type + " " + e.lease_id + " " + e.detail);
                                 });
    REQUIRE(r.is_ok());
    runner = std::move(r).value();
  }
  // Polls until `done` (the runner's thread is not started: tests step it).
  bool poll_until(const std::function<bool()>& done) {
    for (int i = 0; i < 2000; ++i) {
      runner->poll_once();
      if (done()) return true;
      std::this_thread::sleep_for(2ms);
    }
    return false;
  }
  std::string state(const std::string& id) {
    auto v = runner->view(id);
    return v ? v->state : "";
  }
  std::string all_events() {
    std::lock_guard lock(mu);
    std::string out;
    for (const auto& e : events) out += e + "\n";
    return out;
  }
  // Every text cell of every table: where a secret must not be.
  std::string dump_database() {
    std::string out;
    auto tables = h.db->query("SELECT name FROM sqlite_master WHERE type = 'table'");
    REQUIRE(tables.is_ok());
    for (const auto& t : *tables) {
      auto rows = h.db->query("SELECT * FROM \"" + sql_text(t[0]) + "\"");
      REQUIRE(rows.is_ok());
      for (const auto& row : *rows) {
        for (const auto& v : row) {
          if (std::holds_alternative<std::string>(v)) out += std::get<std::string>(v) + "|";
        }
      }
    }
    return out;
  }

  Harness h;
  std::unique_ptr<StartupRunner> runner;
  std::mutex mu;
  std::vector<std::string> events;
};

TEST_CASE("startup: the command runs after hand-out with its environment, its exit releases",
          "[startup]") {
  Fixture f;
  REQUIRE(f.h.settle(1));
  Lease l = f.h.lease();
  REQUIRE(l.state == LeaseState::kReady);
  REQUIRE(f.runner->set_startup(l.id, runner_command(true)).is_ok());
  CHECK(f.state(l.id) == "waiting");

  REQUIRE(f.poll_until([&] { return f.state(l.id) == "running"; }));
  auto pids = f.h.hypervisor->running_processes();
  REQUIRE(pids.size() == 1);
  auto env = f.h.hypervisor->started_env(pids[0]);
  CHECK(std::find(env.begin(), env.end(), "LANG=C.UTF-8") != env.end());
  CHECK(std::find(env.begin(), env.end(), std::string("RUNNER_JIT=") + kSecret) != env.end());
  // The rest of a login's environment: the guest agent would otherwise start it without PATH.
  CHECK(std::find(env.begin(), env.end(),
                  "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") !=
        env.end());
  CHECK(std::find(env.begin(), env.end(), "HOME=/root") != env.end());
  CHECK(f.h.hypervisor->saw(l.vm_name + ": /opt/runner/run.sh --jitconfig-env"));
  // The lease shows the command: non-secret values, secret names only.
  auto v = f.runner->view(l.id);
  REQUIRE(v);
  CHECK(v->env.at("LANG") == "C.UTF-8");
  CHECK(v->env.count("RUNNER_JIT") == 0);
  CHECK(v->secret_env == std::vector<std::string>{"RUNNER_JIT"});
  CHECK(v->started_at);

  REQUIRE(f.h.hypervisor->finish_process(pids[0], 0));
  REQUIRE(f.poll_until([&] { return f.state(l.id) == "exited"; }));
  v = f.runner->view(l.id);
  CHECK(v->exit_code == 0);
  CHECK(v->ended_at);
  auto after = f.h.engine->wait_lease(l.id, 5s);
  REQUIRE(after.is_ok());
  for (int i = 0; i < 500 && !is_terminal(after->state); ++i) {
    std::this_thread::sleep_for(5ms);
    after = f.h.engine->get_lease(l.id);
  }
  CHECK(after->state == LeaseState::kReleased);
  // The secret reached the guest and nothing else.
  CHECK(f.dump_database().find(kSecret) == std::string::npos);
  CHECK(f.all_events().find(kSecret) == std::string::npos);
  CHECK(f.all_events().find("startup.exited " + l.id + " state=exited exit_code=0") !=
        std::string::npos);
  for (const Event& e : f.h.engine->events_since(0, 0ms)) {
    CHECK(e.detail.find(kSecret) == std::string::npos);
  }
}

TEST_CASE("startup: without release_on_exit the lease stays and shows the exit code", "[startup]") {
  Fixture f;
  REQUIRE(f.h.settle(1));
  Lease l = f.h.lease();
  REQUIRE(f.runner->set_startup(l.id, runner_command(false)).is_ok());
  REQUIRE(f.poll_until([&] { return f.state(l.id) == "running"; }));
  REQUIRE(f.h.hypervisor->finish_process(f.h.hypervisor->running_processes().at(0), 3));
  REQUIRE(f.poll_until([&] { return f.state(l.id) == "exited"; }));
  CHECK(f.runner->view(l.id)->exit_code == 3);
  CHECK(f.h.engine->get_lease(l.id)->state == LeaseState::kReady);
  // A retried create (same lease) does not run it twice.
  REQUIRE(f.runner->set_startup(l.id, runner_command(false)).is_ok());
  f.runner->poll_once();
  CHECK(f.state(l.id) == "exited");
  CHECK(f.h.hypervisor->running_processes().empty());
}

TEST_CASE("startup: a cold lease runs its command once it is ready", "[startup]") {
  Fixture f(":memory:", 0);
  Lease l = f.h.lease();
  REQUIRE(f.runner->set_startup(l.id, runner_command(true)).is_ok());
  f.runner->poll_once();
  f.h.wait_ready(l.id);
  REQUIRE(f.poll_until([&] { return f.state(l.id) == "running"; }));
  CHECK(f.h.hypervisor->running_processes().size() == 1);
}

TEST_CASE("startup: a lease released before it was ready never runs the command", "[startup]") {
  Fixture f(":memory:", 0);
  f.h.hypervisor->never_ready = true;
  Lease l = f.h.lease();
  REQUIRE(f.runner->set_startup(l.id, runner_command(true)).is_ok());
  f.runner->poll_once();
  REQUIRE(f.h.engine->release_lease(l.id).is_ok());
  REQUIRE(f.poll_until([&] { return f.state(l.id) == "not_run"; }));
  CHECK(f.h.hypervisor->running_processes().empty());
}

TEST_CASE("startup: a command the agent cannot start fails and releases the lease", "[startup]") {
  Fixture f;
  REQUIRE(f.h.settle(1));
  Lease l = f.h.lease();
  StartupRequestDto bad = runner_command(true);
  bad.argv.clear();  // the agent refuses an empty argv (the API never sends one)
  REQUIRE(f.runner->set_startup(l.id, bad).is_ok());
  REQUIRE(f.poll_until([&] { return f.state(l.id) == "failed"; }));
  CHECK(f.runner->view(l.id)->detail.find("could not start") != std::string::npos);
  auto after = f.h.engine->get_lease(l.id);
  for (int i = 0; i < 500 && !is_terminal(after->state); ++i) {
    std::this_thread::sleep_for(5ms);
    after = f.h.engine->get_lease(l.id);
  }
  CHECK(after->state == LeaseState::kReleased);
}

TEST_CASE(
    "startup: after a restart a running command is watched again and a waiting one "
    "with secrets is lost",
    "[startup]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("armhive-startup-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "armhive.db").string();
  std::filesystem::remove(db);
  {
    Fixture f(db, 2);
    REQUIRE(f.h.settle(2));
    Lease running = f.h.lease();
    REQUIRE(f.runner->set_startup(running.id, runner_command(false)).is_ok());
    REQUIRE(f.poll_until([&] { return f.state(running.id) == "running"; }));
    // A second lease whose command has not started when the daemon goes down.
    f.h.hypervisor->never_ready = true;
    LeaseRequest cold;
    cold.pool = "ci";
    cold.owner = "ci";
    cold.ssh_keys = {kTestKey};
    auto waiting = f.h.engine->create_lease(cold);
    REQUIRE(waiting.is_ok());
    StartupRequestDto c = runner_command(true);
    REQUIRE(f.runner->set_startup(waiting->id, c).is_ok());

    // Restart: same database and guests, new engine and runner (the secret is gone).
    f.runner.reset();
    f.h.make_engine();
    f.h.start();
    f.open_runner();
    auto w = f.runner->view(waiting->id);
    REQUIRE(w);
    CHECK(w->state == "lost");
    CHECK(w->detail.find("only in memory") != std::string::npos);
    CHECK(f.runner->view(running.id)->state == "running");
    auto pids = f.h.hypervisor->running_processes();
    REQUIRE(pids.size() == 1);
    REQUIRE(f.h.hypervisor->finish_process(pids[0], 7));
    REQUIRE(f.poll_until([&] { return f.state(running.id) == "exited"; }));
    CHECK(f.runner->view(running.id)->exit_code == 7);
    CHECK(f.dump_database().find(kSecret) == std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("startup: the command's own variables replace the login defaults", "[startup]") {
  auto env = startup_environment({{"PATH", "/opt/bin"}, {"LANG", "C.UTF-8"}}, {{"HOME", "/srv"}});
  CHECK(env == std::vector<std::string>{"HOME=/srv", "LANG=C.UTF-8", "LOGNAME=root",
                                        "PATH=/opt/bin", "SHELL=/bin/sh", "USER=root"});
}

}  // namespace
}  // namespace armhive
