#include "daemon/github/github_provider.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include "daemon/github/webhook_signature.h"

namespace armhive {

namespace {

constexpr const char* kJitVariable = "ACTIONS_RUNNER_INPUT_JITCONFIG";
constexpr const char* kRunnerLabel = "github.runner";
constexpr const char* kRunnerPrefix = "armhive-";  // the names of the runners we make
constexpr size_t kMaxLaunchedJobs = 100000;        // launched_jobs_, as the delivery window
constexpr int kMaxLaunchesPerPass = 100;           // the rest wait for the next pass
constexpr const char* kRateLimitedMetric = "armhive_github_rate_limited_total";
constexpr const char* kReconciledMetric = "armhive_github_reconciled_jobs_total";
constexpr const char* kGhostsMetric = "armhive_github_ghost_runners_deleted_total";

// A header value fit for a log line: what is printable of its first 64 bytes.
std::string printable(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 64)) {
    out +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == ':') ? c : '?';
  }
  return out.empty() ? "-" : out;
}

// A repository "OWNER/NAME" fit for a log line: the configuration validated it, and this keeps
// the line one line whatever it holds.
std::string repository_text(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 201)) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/';
    out += ok ? c : '?';
  }
  return out;
}

std::string joined(const std::vector<std::string>& labels) {
  std::string out;
  for (const auto& l : labels) out += (out.empty() ? "" : ",") + printable(l);
  return out;
}

// Overwrites a secret before its memory is freed (best effort: copies made by libraries are
// out of reach).
void wipe(std::string& s) {
  std::fill(s.begin(), s.end(), '\0');
  s.clear();
}

int64_t ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

}  // namespace

GithubProvider::GithubProvider(GithubProviderOptions options, LeaseService& leases,
                               SetStartup set_startup, GithubApi& api, const Clock& clock,
                               EventSink sink)
    : owner_(options.owner),
      metrics_(options.metrics),
      leases_(leases),
      set_startup_(std::move(set_startup)),
      api_(api),
      clock_(clock),
      sink_(std::move(sink)),
      deliveries_(options.replay_window),
      job_actions_(options.replay_window) {
  if (metrics_ != nullptr) {
    metrics_->describe_counter(kRateLimitedMetric, "GitHub API calls refused for the rate limit");
    metrics_->describe_counter(
        kReconciledMetric, "Queued GitHub jobs that got a runner by reconciliation (no webhook)");
    metrics_->describe_counter(
        kGhostsMetric, "Runners named armhive-* without a lease of ours, deleted from GitHub");
    for (const char* m : {kRateLimitedMetric, kReconciledMetric, kGhostsMetric}) {
      metrics_->inc(m, {}, 0);  // reported from the start, at 0
    }
  }
  auto live = std::make_shared<Live>();
  live->options = std::move(options);
  MutexLock lock(mu_);
  live_ = std::move(live);
}

std::shared_ptr<const GithubProvider::Live> GithubProvider::live() const {
  MutexLock lock(mu_);
  return live_;
}

void GithubProvider::reconfigure(GithubProviderOptions next) {
  const TimePoint now = clock_.now();
  deliveries_.set_window(next.replay_window);
  job_actions_.set_window(next.replay_window);
  {
    MutexLock lock(mu_);
    auto live = std::make_shared<Live>();
    live->options = std::move(next);
    live->options.owner = owner_;
    live->options.metrics = metrics_;
    live->options.sweep_period = live_->options.sweep_period;
    if (live->options.webhook_secret != live_->options.webhook_secret) {
      // The running secret stays good for the overlap: GitHub's settings are changed by hand,
      // before or after this reload.
      if (live->options.webhook_secret_overlap.count() > 0) {
        live->previous_secret = live_->options.webhook_secret;
        live->previous_until = now + live->options.webhook_secret_overlap;
      }
    } else {
      live->previous_secret = live_->previous_secret;  // an overlap under way goes on
      live->previous_until = live_->previous_until;
    }
    // The next pass: one new period after the last one began (next_reconcile_ was set to that
    // start plus the old period); epoch (no pass yet) stays due at once.
    if (next_reconcile_ != TimePoint{}) {
      next_reconcile_ =
          next_reconcile_ - live_->options.reconcile_period + live->options.reconcile_period;
    }
    live_ = std::move(live);
  }
}

namespace {

// Every active lease of `owner`, page by page (at most 100 pages of kMaxListLimit).
Result<std::vector<Lease>> active_leases(LeaseService& leases, const std::string& owner) {
  std::vector<Lease> out;
  LeaseFilter mine;
  mine.owner = owner;
  mine.include_ended = false;
  mine.limit = kMaxListLimit;
  for (int page = 0; page < 100; ++page) {
    ARMHIVE_ASSIGN_OR_RETURN(std::vector<Lease> list, leases.list_leases(mine));
    const bool last = list.size() < kMaxListLimit;
    if (!list.empty()) mine.after_id = list.back().id;
    for (Lease& l : list) out.push_back(std::move(l));
    if (last) break;
  }
  return out;
}

}  // namespace

void GithubProvider::count(const char* metric) {
  if (metrics_ != nullptr) metrics_->inc(metric);
}

bool GithubProvider::backed_off() const { return clock_.now() < api_.rate_limit().backoff_until; }

bool GithubProvider::rate_limited(const Status& s) {
  if (s.code() != kGithubRateLimited) return false;
  {
    MutexLock lock(mu_);
    ++rate_limited_total_;
  }
  count(kRateLimitedMetric);
  emit("github.rate_limited", "", s.message() + "; queued jobs wait");
  return true;
}

void GithubProvider::remember_launch(int64_t job_id) {
  const TimePoint now = clock_.now();
  MutexLock lock(mu_);
  const Seconds window = live_->options.replay_window;
  launched_jobs_[job_id] = now;
  for (auto it = launched_jobs_.begin(); it != launched_jobs_.end();) {
    it = now - it->second >= window ? launched_jobs_.erase(it) : std::next(it);
  }
  while (launched_jobs_.size() > kMaxLaunchedJobs) launched_jobs_.erase(launched_jobs_.begin());
}

GithubProviderState GithubProvider::state() {
  GithubProviderState st;
  st.rate_limit = api_.rate_limit();
  MutexLock lock(mu_);
  st.last_reconcile = last_reconcile_;
  st.last_reconcile_error = last_reconcile_error_;
  st.pending_jobs = queue_.size();
  st.runners = runners_.size();
  st.reconciled_jobs_total = reconciled_jobs_total_;
  st.ghosts_deleted_total = ghosts_deleted_total_;
  st.forgotten_runners_total = forgotten_runners_total_;
  st.rate_limited_total = rate_limited_total_;
  return st;
}

GithubProvider::~GithubProvider() noexcept { stop(); }

void GithubProvider::emit(const std::string& type, const std::string& lease_id,
                          const std::string& detail, const std::string& source) {
  if (sink_) sink_(GithubEvent{type, lease_id, detail, source});
}

void GithubProvider::start() {
  if (thread_.joinable()) return;
  // Runners of leases made before a restart. Whether their job runs is unknown: they count
  // as busy (never deleted as idle); `completed` or the runner's exit ends them.
  if (auto list = active_leases(leases_, owner_); list.is_ok()) {
    MutexLock lock(mu_);
    for (const Lease& l : *list) {
      auto name = l.labels.find(kRunnerLabel);
      if (name == l.labels.end()) continue;
      Runner r;
      r.runner_name = name->second;
      r.lease_id = l.id;
      r.created = l.created_at;
      r.busy = true;
      if (auto id = l.labels.find("github.runner_id"); id != l.labels.end()) {
        r.runner_id = std::strtoll(id->second.c_str(), nullptr, 10);
      }
      if (auto job = l.labels.find("github.job"); job != l.labels.end()) {
        r.job_id = std::strtoll(job->second.c_str(), nullptr, 10);
      }
      runners_[r.runner_name] = r;
    }
  }
  {
    MutexLock lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { work(); });
}

void GithubProvider::stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status GithubProvider::deliver(const std::string& event, const std::string& delivery_id,
                               const std::string& signature, const std::string& body,
                               const std::string& remote) {
  const std::string who = "delivery " + printable(delivery_id) + " from " + printable(remote);
  auto reject = [&](Status s) {
    emit("github.webhook_rejected", "", who + ": " + s.message(), printable(remote));
    return s;
  };
  if (body.size() > kMaxWebhookBodyBytes) {
    return reject(
        Status(ErrorCode::kPayloadTooLarge,
               "a webhook body may be at most " + std::to_string(kMaxWebhookBodyBytes) + " bytes"));
  }
  // The signature first: an unsigned caller must not fill the replay window.
  const std::shared_ptr<const Live> live = this->live();
  bool previous_secret = false;
  if (Status s = verify_webhook_signature(live->options.webhook_secret, body, signature);
      !s.is_ok()) {
    previous_secret = !live->previous_secret.empty() && clock_.now() < live->previous_until &&
                      verify_webhook_signature(live->previous_secret, body, signature).is_ok();
    if (!previous_secret) return reject(s);
  }
  if (Status s = deliveries_.admit(delivery_id, clock_.now()); !s.is_ok()) return reject(s);
  if (previous_secret) {
    // Accepted, and said: GitHub still signs with the secret the last reload replaced.
    emit("github.webhook", "",
         who + ": signed with the previous webhook secret (accepted until " +
             to_rfc3339(live->previous_until) + "; set the new one in GitHub's webhook settings)");
  }
  if (event != "workflow_job") {
    emit("github.webhook", "", who + ": event " + printable(event) + " ignored");
    return Status::ok();
  }
  auto job = parse_workflow_job(body);
  if (!job.is_ok()) return reject(job.status());
  emit("github.webhook", "",
       who + ": workflow_job " + printable(job->action) + " job=" + std::to_string(job->job_id) +
           " labels=" + joined(job->labels) +
           (job->runner_name.empty() ? "" : " runner=" + printable(job->runner_name)));
  if (job->action == "queued" || job->action == "in_progress" || job->action == "completed") {
    // The delivery id is a header outside the signature: a captured body sent again under a
    // fresh id, or GitHub delivering one event twice, must not act twice (a second runner
    // for a job that already ran). Acted on once per job and action within the window.
    const std::string key = std::to_string(job->job_id) + "/" + job->action;
    if (!job_actions_.admit(key, clock_.now()).is_ok()) {
      emit("github.webhook", "",
           who + ": workflow_job " + job->action + " job=" + std::to_string(job->job_id) +
               " was delivered before: ignored");
      return Status::ok();
    }
    {
      MutexLock lock(mu_);
      queue_.push_back(std::move(job).value());
    }
    wake_.notify_all();
  }
  return Status::ok();
}

std::vector<GithubProvider::Runner> GithubProvider::runners() {
  MutexLock lock(mu_);
  std::vector<Runner> out;
  for (const auto& [name, r] : runners_) out.push_back(r);
  return out;
}

Status GithubProvider::launch(const WorkflowJob& job, const std::string& pool) {
  const std::shared_ptr<const Live> live = this->live();
  const auto t0 = std::chrono::steady_clock::now();
  JitRequest req;
  req.name = "armhive-" + std::to_string(job.job_id);
  req.runner_group_id = live->options.runner_group_id;
  req.labels = job.labels;
  auto jit = api_.generate_jitconfig(req);
  if (!jit.is_ok()) {
    if (jit.status().code() != kGithubRateLimited) {
      emit("github.error", "",
           "job " + std::to_string(job.job_id) +
               ": no runner configuration: " + jit.status().message());
    }
    return jit.status();
  }
  const int64_t jit_ms = ms_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  const std::string name = jit->runner_name.empty() ? req.name : jit->runner_name;

  LeaseRequest lr;
  lr.pool = pool;
  lr.owner = owner_;
  lr.purpose = Purpose::kCi;
  lr.idempotency_key = "github-job-" + std::to_string(job.job_id);
  lr.labels = {{"github.job", std::to_string(job.job_id)},
               {"github.runner_id", std::to_string(jit->runner_id)},
               {kRunnerLabel, name.substr(0, 256)}};
  auto lease = leases_.create_lease(lr);
  if (!lease.is_ok()) {
    wipe(jit->encoded_jit_config);
    (void)api_.delete_runner(jit->runner_id);
    emit("github.error", "",
         "job " + std::to_string(job.job_id) + ": no VM from pool " + pool + ": " +
             lease.status().message() + " (runner " + std::to_string(jit->runner_id) + " deleted)");
    // Not GitHub's refusal (a quota's kResourceExhausted must not read as its rate limit).
    return Status(ErrorCode::kUnavailable, "no VM: " + lease.status().message());
  }
  const int64_t lease_ms = ms_since(t1);

  StartupRequestDto startup;
  startup.argv = live->options.runner_command;
  startup.env[kJitVariable] = StartupEnvVar{jit->encoded_jit_config, true};
  startup.release_on_exit = true;
  Status s = set_startup_(lease->id, startup);
  wipe(startup.env[kJitVariable].value);
  wipe(jit->encoded_jit_config);
  if (!s.is_ok()) {
    (void)leases_.release_lease(lease->id);
    (void)api_.delete_runner(jit->runner_id);
    emit("github.error", lease->id,
         "job " + std::to_string(job.job_id) + ": startup not recorded: " + s.message());
    return Status(ErrorCode::kUnavailable, "startup not recorded: " + s.message());
  }
  Runner r;
  r.runner_id = jit->runner_id;
  r.runner_name = name;
  r.lease_id = lease->id;
  r.job_id = job.job_id;
  r.created = clock_.now();
  {
    MutexLock lock(mu_);
    runners_[name] = r;
  }
  remember_launch(job.job_id);
  emit("github.runner_started", lease->id,
       "job=" + std::to_string(job.job_id) + " runner=" + printable(name) +
           " runner_id=" + std::to_string(r.runner_id) + " pool=" + pool +
           " jitconfig_ms=" + std::to_string(jit_ms) + " lease_ms=" + std::to_string(lease_ms) +
           " lease_state=" + std::string(to_string(lease->state)));
  return Status::ok();
}

void GithubProvider::release(const Runner& runner, const std::string& event, const std::string& why,
                             bool delete_from_github) {
  {
    MutexLock lock(mu_);
    runners_.erase(runner.runner_name);
  }
  std::string detail = "runner=" + printable(runner.runner_name) +
                       " runner_id=" + std::to_string(runner.runner_id) + ": " + why;
  if (delete_from_github && runner.runner_id > 0) {
    if (Status s = api_.delete_runner(runner.runner_id); !s.is_ok()) {
      // Rate limited: the lease goes now, the runner at a later pass (a ghost by then).
      (void)rate_limited(s);
      detail += " (deleting it from GitHub failed: " + s.message() + ")";
    }
  }
  auto released = leases_.release_lease(runner.lease_id);
  if (!released.is_ok()) detail += " (release failed: " + released.status().message() + ")";
  emit(event, runner.lease_id, detail);
}

bool GithubProvider::handle(const WorkflowJob& job) {
  std::optional<Runner> target;
  {
    MutexLock lock(mu_);
    if (job.action == "queued") {
      // A redelivery of a job we serve already, or the late webhook of a job a reconcile
      // pass gave a runner.
      if (launched_jobs_.count(job.job_id) > 0) return true;
      for (const auto& [name, r] : runners_) {
        if (r.job_id == job.job_id) return true;
      }
    } else {
      auto it = runners_.find(job.runner_name);
      if (it == runners_.end() && job.runner_name.empty()) {
        // Completed before any runner took it (cancelled): the runner made for it is idle.
        for (auto& [name, r] : runners_) {
          if (r.job_id == job.job_id && !r.busy) it = runners_.find(name);
        }
      }
      if (it == runners_.end()) return true;  // another runner's job
      if (job.action == "in_progress") {
        it->second.busy = true;
        return true;
      }
      target = it->second;
    }
  }
  if (target) {
    const bool ran = !job.runner_name.empty();
    release(*target, "github.runner_released",
            "job " + std::to_string(job.job_id) + " completed" + (ran ? "" : " without it"), !ran);
    return true;
  }
  auto pool = pool_for_labels(live()->options.label_pools, job.labels);
  if (!pool.is_ok()) {
    emit("github.error", "", "job " + std::to_string(job.job_id) + ": " + pool.status().message());
    return true;
  }
  if (!*pool) return true;  // for other runners
  return !rate_limited(launch(job, **pool));
}

void GithubProvider::sweep() {
  const Seconds idle_timeout = live()->options.idle_timeout;
  const TimePoint now = clock_.now();
  for (const Runner& r : runners()) {
    auto lease = leases_.get_lease(r.lease_id);
    if (lease.is_ok() && is_terminal(lease->state)) {
      // The runner exited (release_on_exit) or the lease ended otherwise. A JIT runner
      // removes itself after its job; one that never ran a job is removed here.
      release(r, "github.runner_released", "its lease ended (" + lease->reason + ")", !r.busy);
      continue;
    }
    if (!r.busy && now - r.created >= idle_timeout) {
      release(r, "github.runner_idle",
              "took no job within " + std::to_string(idle_timeout.count()) + " s", true);
    }
  }
}

void GithubProvider::run_once() {
  if (backed_off()) return;  // nothing touches GitHub until the backoff ends
  for (;;) {
    WorkflowJob job;
    {
      MutexLock lock(mu_);
      if (queue_.empty() || stop_) break;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!handle(job)) {
      MutexLock lock(mu_);
      queue_.push_front(std::move(job));  // kept, in order, for after the backoff
      return;
    }
  }
  if (backed_off()) return;
  sweep();
  const TimePoint now = clock_.now();
  {
    MutexLock lock(mu_);
    if (stop_ || now < next_reconcile_) return;
    next_reconcile_ = now + live_->options.reconcile_period;
  }
  Status s = reconcile();
  MutexLock lock(mu_);
  last_reconcile_ = clock_.now();
  last_reconcile_error_ = s.is_ok() ? "" : s.message();
}

Status GithubProvider::reconcile() {
  const std::shared_ptr<const Live> live = this->live();
  const TimePoint start = clock_.now();
  auto listed = api_.list_runners();
  if (!listed.is_ok()) {
    (void)rate_limited(listed.status());
    return listed.status();
  }
  // Pass 1's lists, repository by repository. One that cannot be listed (gone, renamed, out of
  // the token's or App's reach, GitHub failing) must not keep the others or passes 2 and 3 from
  // their turn: it is told and skipped. GitHub's rate limit ends the pass, as for any call.
  struct RepositoryJob {
    const std::string* repository;  // in live->options.job_repositories
    QueuedJob job;
  };
  std::vector<RepositoryJob> queued;
  Status listing_failed;
  for (const std::string& repository : live->options.job_repositories) {
    auto jobs = api_.list_queued_jobs(repository);
    if (!jobs.is_ok()) {
      if (rate_limited(jobs.status())) return jobs.status();
      std::string why = jobs.status().message();
      if (jobs.status().code() == ErrorCode::kNotFound) {
        why += " (no such repository, or the token or App cannot see it)";
      }
      emit("github.error", "",
           "repository " + repository_text(repository) +
               ": its queued jobs were not listed: " + why);
      if (listing_failed.is_ok()) {
        listing_failed =
            Status(jobs.status().code(), "repository " + repository_text(repository) + ": " + why);
      }
      continue;
    }
    for (QueuedJob& q : *jobs) queued.push_back(RepositoryJob{&repository, std::move(q)});
  }
  // After GitHub's lists: a runner made since is in a lease listed now, never a ghost.
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<Lease> leases, active_leases(leases_, owner_));
  std::set<std::string> leased_names;
  std::set<int64_t> leased_ids;
  std::set<int64_t> leased_jobs;
  for (const Lease& l : leases) {
    if (auto it = l.labels.find(kRunnerLabel); it != l.labels.end())
      leased_names.insert(it->second);
    if (auto it = l.labels.find("github.runner_id"); it != l.labels.end()) {
      leased_ids.insert(std::strtoll(it->second.c_str(), nullptr, 10));
    }
    if (auto it = l.labels.find("github.job"); it != l.labels.end()) {
      leased_jobs.insert(std::strtoll(it->second.c_str(), nullptr, 10));
    }
  }

  // Ghosts: runners of our naming whose VM is gone (no active lease has them).
  std::set<int64_t> listed_ids;
  std::set<std::string> listed_names;
  for (const GithubRunnerInfo& g : *listed) {
    listed_ids.insert(g.id);
    listed_names.insert(g.name);
    if (g.name.rfind(kRunnerPrefix, 0) != 0 || leased_ids.count(g.id) > 0 ||
        leased_names.count(g.name) > 0) {
      continue;
    }
    Status s = api_.delete_runner(g.id);
    if (rate_limited(s)) return s;
    if (!s.is_ok()) {
      emit("github.error", "", "ghost runner_id=" + std::to_string(g.id) + ": " + s.message());
      continue;
    }
    {
      MutexLock lock(mu_);
      ++ghosts_deleted_total_;
    }
    count(kGhostsMetric);
    emit("github.ghost_deleted", "",
         "runner=" + printable(g.name) + " runner_id=" + std::to_string(g.id) + " (" +
             printable(g.status) + (g.busy ? ", busy" : "") + "): no active lease of ours has it");
  }

  // Runners GitHub forgot (deregistered, removed by hand): their VMs serve nobody. One made
  // within the grace may not be listed yet. A listing cut at its bound proves nothing.
  const bool complete = listed->size() < static_cast<size_t>(kMaxRunnerPages) * 100;
  const auto grace = 2 * live->options.reconcile_period;
  for (const Runner& r : runners()) {
    if (!complete || listed_ids.count(r.runner_id) > 0 || listed_names.count(r.runner_name) > 0 ||
        start - r.created < grace) {
      continue;
    }
    {
      MutexLock lock(mu_);
      ++forgotten_runners_total_;
    }
    release(r, "github.runner_forgotten",
            "GitHub no longer lists it (" + std::to_string(grace.count()) + " s after it was made)",
            /*delete_from_github=*/false);
  }

  // Queued jobs without a runner of ours: a webhook we missed (armhived down, a delivery
  // lost). Launched exactly as the webhook would have.
  // At most kMaxLaunchesPerPass in all, whichever repositories list them.
  int launches = 0;
  for (const auto& [repository, q] : queued) {
    auto pool = pool_for_labels(live->options.label_pools, q.labels);
    if (!pool.is_ok() || !*pool || leased_jobs.count(q.job_id) > 0) continue;
    bool served = false;
    {
      MutexLock lock(mu_);
      for (const auto& [name, r] : runners_) served |= r.job_id == q.job_id;
    }
    if (served) continue;
    if (launches++ >= kMaxLaunchesPerPass) break;
    WorkflowJob job;
    job.action = "queued";
    job.job_id = q.job_id;
    job.run_id = q.run_id;
    job.labels = q.labels;
    Status s = launch(job, **pool);
    if (rate_limited(s)) return s;
    if (!s.is_ok()) continue;  // told by launch
    {
      MutexLock lock(mu_);
      ++reconciled_jobs_total_;
    }
    count(kReconciledMetric);
    emit("github.reconciled", "",
         "job=" + std::to_string(q.job_id) + " run=" + std::to_string(q.run_id) +
             " repository=" + repository_text(*repository) + " pool=" + **pool +
             ": queued without a runner of ours (a missed webhook); runner made");
  }
  return listing_failed;
}

void GithubProvider::work() {
  for (;;) {
    // While backed off, a delivery does not wake the worker: it would only wait again.
    const bool waiting = backed_off();
    {
      MutexLock lock(mu_);
      wake_.wait_for(lock, live_->options.sweep_period,
                     [&]() REQUIRES(mu_) { return stop_ || (!waiting && !queue_.empty()); });
      if (stop_) return;
    }
    run_once();
  }
}

}  // namespace armhive
