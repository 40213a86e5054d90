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
#include "base/metrics.h"
#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/core/clock.h"
#include "daemon/engine/lease_service.h"
#include "daemon/github/delivery_window.h"
#include "daemon/github/github_api.h"
#include "daemon/github/workflow_job.h"

namespace armhive {

struct GithubProviderOptions {
  std::string webhook_secret;  // a secret (from a 0600 file)
  // After reconfigure() changed webhook_secret, deliveries signed with the one before are
  // still accepted for this long (README "Reload"): GitHub's side and armhived's cannot change
  // at the same instant. Zero: the old secret is refused at once (a leaked secret).
  Seconds webhook_secret_overlap{600};
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
  // How often the provider reconciles with GitHub (README "Healing"): queued jobs without a
  // runner of ours get one, ghost runners are deleted, runners GitHub forgot are released.
  // The first pass is the first run_once() after start.
  Seconds reconcile_period{60};
  // The repositories ("OWNER/NAME") whose queued jobs a pass lists for missed webhooks (README
  // "Healing", pass 1): a repository scope's own, an organisation's [github] reconcile_repos;
  // none: passes 2 and 3 only. Each costs 2 + its runs calls a pass, so armhived bounds them
  // (the configuration allows 20). The runners are made at the scope whichever lists the job.
  std::vector<std::string> job_repositories;
  // The counters armhive_github_{rate_limited,reconciled_jobs,ghost_runners_deleted}_total;
  // null: none. Not owned; outlives the provider.
  Metrics* metrics = nullptr;
};

// What GET /v1/github shows of the provider (and /metrics of it).
struct GithubProviderState {
  TimePoint last_reconcile{};            // the end of the last pass; epoch: none yet
  std::string last_reconcile_error;      // empty: it succeeded
  size_t pending_jobs = 0;               // deliveries queued for the worker
  size_t runners = 0;                    // runners of ours
  GithubRateLimit rate_limit;            // as GitHub's last reply said
  uint64_t reconciled_jobs_total = 0;    // runners made for queued jobs no webhook announced
  uint64_t ghosts_deleted_total = 0;     // armhive-* runners without a lease, deleted
  uint64_t forgotten_runners_total = 0;  // our runners GitHub no longer lists, released
  uint64_t rate_limited_total = 0;       // calls refused for the rate limit
};

// What the provider tells the audit log: github.webhook_rejected (with why), github.webhook
// (accepted), github.runner_started, github.runner_released, github.runner_idle,
// github.error, github.reconciled (a queued job got a runner by reconciliation),
// github.ghost_deleted (a runner named armhive-* without a lease of ours),
// github.runner_forgotten (GitHub no longer lists a runner of ours: its lease released),
// github.rate_limited. Details name jobs, runners, leases and pools, never a secret.
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
//   a runner idle for idle_timeout -> deleted from GitHub, its lease released;
//   every reconcile_period, a pass over GitHub's runners and queued jobs (reconcile()).
// While GitHub rate limits us (GithubApi::rate_limit().backoff_until) the worker calls
// nothing: deliveries wait in the queue, in order, and the sweep and the pass wait too.
// The JIT configuration lives in memory only: here until it is handed to the startup runner,
// which keeps it until the guest agent started the command.
//
// Ownership: borrows the LeaseService, GithubApi and Clock; `set_startup` records a lease's
// startup command (StartupRunner::set_startup in armhived). Owns one worker thread: webhooks
// are verified and queued on the caller's (HTTP worker) thread and answered at once; GitHub
// calls and lease creation happen on the worker, each bounded by the API timeout.
// Threading: deliver() and reconfigure() are thread-safe; start()/stop() from the controlling
// thread; mu_ is never held across a GitHub, lease service or startup call. The options live in
// an immutable snapshot (Live) that reconfigure() swaps under mu_: the worker and deliver()
// each read one snapshot per job, delivery or pass.
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

  // A reload (SIGHUP): `next`'s webhook_secret, webhook_secret_overlap, label_pools,
  // runner_group_id, idle_timeout, replay_window, reconcile_period, job_repositories and
  // runner_command replace the running ones (a pass under way ends with the ones it began with);
  // owner, sweep_period and metrics stay. Deliveries verified from now on use the new secret; when
  // it differs, the running one is still accepted for `next`'s overlap. A new reconcile_period
  // moves the next pass to one new period after the last one began (when that is past: at the
  // worker's next turn, within sweep_period). Runners, leases and queued jobs are kept; a job
  // already queued is handled with the new labels and command. Any thread; never blocks on GitHub.
  void reconfigure(GithubProviderOptions next) EXCLUDES(mu_);

  // Processes queued jobs, sweeps idle runners and reconciles when a pass is due (tests; the
  // worker does this too). Does nothing while GitHub's backoff lasts.
  void run_once() EXCLUDES(mu_);

  GithubProviderState state() EXCLUDES(mu_);

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
  // false: GitHub rate limits us; the job must wait (at the queue's front).
  bool handle(const WorkflowJob& job) EXCLUDES(mu_);
  // A runner for `job` in a lease of `pool`. Its failures are told (github.error) here, but
  // for kGithubRateLimited, which the caller handles; only GitHub's rate limit has that code
  // (a lease refused for a quota is kUnavailable here).
  Status launch(const WorkflowJob& job, const std::string& pool) EXCLUDES(mu_);
  void release(const Runner& runner, const std::string& event, const std::string& why,
               bool delete_from_github) EXCLUDES(mu_);
  void sweep() EXCLUDES(mu_);
  // One pass: GitHub's runners and the queued jobs of job_repositories against runners_ and
  // our active leases. kGithubRateLimited, a runner listing that failed and a lease listing
  // that failed end the pass early; what was done stays done. A repository whose jobs could
  // not be listed is told (github.error) and skipped: the other repositories and passes 2 and 3
  // go on, and the pass returns that failure (the first one) at its end.
  Status reconcile() EXCLUDES(mu_);
  // True (and counted, and told) when `s` is GitHub's rate limit.
  bool rate_limited(const Status& s) EXCLUDES(mu_);
  bool backed_off() const;
  void remember_launch(int64_t job_id) EXCLUDES(mu_);
  void count(const char* metric);
  void work() EXCLUDES(mu_);
  void emit(const std::string& type, const std::string& lease_id, const std::string& detail,
            const std::string& source = {});

  // The options in force, with the webhook secret they replaced while its overlap lasts.
  // Immutable once published: a caller takes the pointer under mu_ and reads it without (a
  // reload publishes a new one), so no lock is held across a GitHub or lease call.
  struct Live {
    GithubProviderOptions options;
    std::string previous_secret;  // empty: none
    TimePoint previous_until{};   // accepted while now < this
  };
  std::shared_ptr<const Live> live() const EXCLUDES(mu_);

  const std::string owner_;  // options.owner, fixed
  Metrics* const metrics_;   // options.metrics, fixed
  LeaseService& leases_;
  SetStartup set_startup_;
  GithubApi& api_;
  const Clock& clock_;
  EventSink sink_;
  DeliveryWindow deliveries_;
  DeliveryWindow job_actions_;  // "JOB/ACTION" acted on, whatever delivery id carried it

  mutable Mutex mu_;
  std::shared_ptr<const Live> live_ GUARDED_BY(mu_);
  std::condition_variable_any wake_;
  std::deque<WorkflowJob> queue_ GUARDED_BY(mu_);
  std::map<std::string, Runner> runners_ GUARDED_BY(mu_);  // by runner name
  // Jobs a runner was made for (by a webhook or a pass), for the replay window: a `queued`
  // delivery of one of them (a redelivery, or the webhook of a job a pass found first) makes
  // no second runner, even after the first is gone. Bounded like the delivery window.
  std::map<int64_t, TimePoint> launched_jobs_ GUARDED_BY(mu_);
  TimePoint next_reconcile_ GUARDED_BY(mu_) = TimePoint{};
  TimePoint last_reconcile_ GUARDED_BY(mu_) = TimePoint{};
  std::string last_reconcile_error_ GUARDED_BY(mu_);
  uint64_t reconciled_jobs_total_ GUARDED_BY(mu_) = 0;
  uint64_t ghosts_deleted_total_ GUARDED_BY(mu_) = 0;
  uint64_t forgotten_runners_total_ GUARDED_BY(mu_) = 0;
  uint64_t rate_limited_total_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace armhive
