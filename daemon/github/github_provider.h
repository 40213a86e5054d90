#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "api/types.h"
#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/core/clock.h"
#include "daemon/engine/lease_service.h"
#include "daemon/github/delivery_window.h"
#include "daemon/github/github_api.h"
#include "daemon/github/workflow_job.h"

namespace armhive {

struct GithubProviderOptions {
  std::string webhook_secret;                      // a secret (from a 0600 file)
  std::map<std::string, std::string> label_pools;  // runs-on label -> pool
  int64_t runner_group_id = 1;
  // A runner that took no job within this time is deleted from GitHub and its VM released.
  Seconds idle_timeout{300};
  Seconds replay_window{std::chrono::hours(24)};  // delivery ids are remembered this long
  // The runner in the image; it reads its JIT configuration from the secret variable
  // ACTIONS_RUNNER_INPUT_JITCONFIG (actions/runner takes every --option also as
  // ACTIONS_RUNNER_INPUT_<OPTION>), so the configuration is never on a command line.
  std::vector<std::string> runner_command{"/opt/actions-runner/run.sh"};  // argv, no shell
  std::string owner = "github";                                           // the leases' owner
  std::chrono::milliseconds sweep_period{std::chrono::seconds(5)};
};

// What the provider tells the audit log: github.webhook_rejected (with why), github.webhook
// (accepted), github.runner_started, github.runner_released, github.runner_idle,
// github.error. Details name jobs, runners, leases and pools, never a secret.
struct GithubEvent {
  std::string type;
  std::string lease_id;
  std::string detail;
  // For a refused delivery (github.webhook_rejected): the address it came from. Anyone who
  // reaches the endpoint can cause those, so the sink rate limits them by it (issue 33
  // finding 3). Empty for events of GitHub's own deliveries and of the provider.
  std::string source;
};

// The GitHub Actions provider: turns `workflow_job` webhooks into just-in-time runners in
// fresh VMs.
//   queued (labels map to a pool) -> generate-jitconfig, a lease of that pool (owner
//     options.owner, labels github.job/github.runner_id/github.runner, Idempotency-Key
//     github-job-ID), its startup command = the runner with the JIT configuration as a secret
//     variable and release_on_exit;
//   in_progress -> the runner named in it took a job (no idle deletion);
//   completed -> that runner's lease is released;
//   a runner idle for idle_timeout -> deleted from GitHub, its lease released.
// The JIT configuration lives in memory only: here until it is handed to the startup runner,
// which keeps it until the guest agent started the command.
//
// Ownership: borrows the LeaseService, GithubApi and Clock; `set_startup` records a lease's
// startup command (StartupRunner::set_startup in armhived). Owns one worker thread: webhooks
// are verified and queued on the caller's (HTTP worker) thread and answered at once; GitHub
// calls and lease creation happen on the worker, each bounded by the API timeout.
// Threading: deliver() is thread-safe; start()/stop() from the controlling thread; mu_ is never
// held across a GitHub, lease service or startup call.
class GithubProvider {
 public:
  using SetStartup = std::function<Status(const std::string&, const StartupRequestDto&)>;
  using EventSink = std::function<void(const GithubEvent&)>;

  GithubProvider(GithubProviderOptions options, LeaseService& leases, SetStartup set_startup,
                 GithubApi& api, const Clock& clock, EventSink sink = {});
  ~GithubProvider() noexcept;  // stop()
  GithubProvider(const GithubProvider&) = delete;
  GithubProvider& operator=(const GithubProvider&) = delete;

  // Rebuilds the runners of active leases (by their labels), then starts the worker.
  void start() EXCLUDES(mu_);
  void stop() EXCLUDES(mu_);

  // One webhook delivery (POST /v1/github/webhook), from its headers and raw body. Checks, in
  // order: signature (kUnauthenticated), delivery id and replay (kInvalidArgument /
  // kConflict), event and body (kInvalidArgument naming the member). Every refusal is audited.
  // ok: accepted (queued when it is a workflow_job this provider acts on; other events and
  // jobs for other labels are accepted and ignored, as GitHub expects a 2xx).
  Status deliver(const std::string& event, const std::string& delivery_id,
                 const std::string& signature, const std::string& body, const std::string& remote)
      EXCLUDES(mu_);

  // Processes queued jobs and sweeps idle runners now (tests; the worker does this too).
  void run_once() EXCLUDES(mu_);

  struct Runner {
    int64_t runner_id = 0;
    std::string runner_name;
    std::string lease_id;
    int64_t job_id = 0;  // the job it was made for (it may take another with the same labels)
    TimePoint created;
    bool busy = false;  // a job is in progress on it
  };
  std::vector<Runner> runners() EXCLUDES(mu_);

 private:
  void handle(const WorkflowJob& job) EXCLUDES(mu_);
  void launch(const WorkflowJob& job, const std::string& pool) EXCLUDES(mu_);
  void release(const Runner& runner, const std::string& event, const std::string& why,
               bool delete_from_github) EXCLUDES(mu_);
  void sweep() EXCLUDES(mu_);
  void work() EXCLUDES(mu_);
  void emit(const std::string& type, const std::string& lease_id, const std::string& detail,
            const std::string& source = {});

  GithubProviderOptions options_;
  LeaseService& leases_;
  SetStartup set_startup_;
  GithubApi& api_;
  const Clock& clock_;
  EventSink sink_;
  DeliveryWindow deliveries_;
  DeliveryWindow job_actions_;  // "JOB/ACTION" acted on, whatever delivery id carried it

  Mutex mu_;
  std::condition_variable_any wake_;
  std::deque<WorkflowJob> queue_ GUARDED_BY(mu_);
  std::map<std::string, Runner> runners_ GUARDED_BY(mu_);  // by runner name
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace armhive
