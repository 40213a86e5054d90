#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/types.h"
#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/core/clock.h"
#include "daemon/core/hypervisor.h"
#include "daemon/engine/lease_service.h"
#include "daemon/store/database.h"

namespace armhive {

struct StartupRunnerOptions {
  // How often each running command is asked for its status (one guest-exec-status call).
  std::chrono::milliseconds poll{1000};
  // How often waiting commands are checked for a ready lease (an in-memory lookup); lease
  // events wake the watcher sooner.
  std::chrono::milliseconds wake{100};
};

// What the runner tells the outside world (audit log, daemon log): type is startup.started,
// startup.exited, startup.failed, startup.not_run or startup.lost; detail names variables,
// never their values.
struct StartupEvent {
  std::string type;
  std::string lease_id;
  std::string detail;
};

// The environment a startup command starts with: PATH, HOME, USER, LOGNAME and SHELL as a root
// login has them, then `env` and `secrets` (which replace those). Always the whole environment:
// the guest agent's guest-exec replaces its own environment with any it is given, so a command
// given one variable alone would run without PATH (cmake, for one, then cannot find itself).
std::vector<std::string> startup_environment(const std::map<std::string, std::string>& env,
                                             const std::map<std::string, std::string>& secrets);

// Runs each lease's startup command in its guest right after hand-out (guest-exec through the
// agent, with its environment), watches it until it exits, records state and exit code, and
// with release_on_exit releases the lease when it exits (or cannot be started).
//
// Secrets: secret variable values are held in this object's memory only, from set_startup()
// until the command was started or the lease ended; the table `startups` holds the argv, the
// non-secret variables and the secret variables' names. Nothing here logs a value. After a
// daemon restart a waiting command with secrets cannot run: it becomes `lost` (and its lease
// is released when release_on_exit is set); a running one is watched again by its pid.
//
// Ownership: borrows the LeaseService, GuestAgent, Database and Clock (they outlive it); owns
// one watcher thread. Threading: set_startup() and view() are thread-safe (HTTP workers);
// start()/stop() from the controlling thread. mu_ is never held across a guest-agent, lease
// service or database call; every guest-agent call has the agent's timeout, so stop() returns
// within one such call.
class StartupRunner {
 public:
  using EventSink = std::function<void(const StartupEvent&)>;

  // Creates the table if needed and loads unfinished commands (see above).
  static Result<std::unique_ptr<StartupRunner>> open(LeaseService& leases, GuestAgent& agent,
                                                     Database& db, const Clock& clock,
                                                     StartupRunnerOptions options = {},
                                                     EventSink sink = {});
  ~StartupRunner() noexcept;  // stop()
  StartupRunner(const StartupRunner&) = delete;
  StartupRunner& operator=(const StartupRunner&) = delete;

  void start();
  void stop();

  // Records the startup command of a lease just created. A second call for the same lease (an
  // idempotent retry of the create) keeps the first. kInternal when it cannot be persisted.
  Status set_startup(const std::string& lease_id, const StartupRequestDto& command) EXCLUDES(mu_);
  // The command as the lease's JSON shows it; nullopt when the lease has none.
  std::optional<StartupStatusDto> view(const std::string& lease_id) EXCLUDES(mu_);

  // One pass over the unfinished commands (the watcher's body; tests call it directly).
  void poll_once() EXCLUDES(mu_);

 private:
  struct Entry {
    StartupStatusDto status;
    std::map<std::string, std::string> secrets;  // name -> value; memory only
    int64_t pid = 0;
    std::chrono::steady_clock::time_point next_status{};  // running: when to ask again
  };

  StartupRunner(LeaseService& leases, GuestAgent& agent, Database& db, const Clock& clock,
                StartupRunnerOptions options, EventSink sink);
  Status load() EXCLUDES(mu_);
  Status persist(const std::string& lease_id, const StartupStatusDto& status, int64_t pid);
  void step(const std::string& lease_id) EXCLUDES(mu_);
  void finish(const std::string& lease_id, StartupStatusDto status, const std::string& event,
              bool release) EXCLUDES(mu_);
  void emit(const std::string& type, const std::string& lease_id, const std::string& detail);
  void watch();

  LeaseService& leases_;
  GuestAgent& agent_;
  Database& db_;
  const Clock& clock_;
  StartupRunnerOptions options_;
  EventSink sink_;

  Mutex mu_;
  std::map<std::string, Entry> active_ GUARDED_BY(mu_);  // unfinished commands by lease id
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace armhive
