// `armhive gitlab config|prepare|run|cleanup`: a GitLab Runner custom executor driver
// (docs.gitlab.com/runner/executors/custom). One VM per job: prepare leases it (labelled with
// the job's ids, Idempotency-Key per job), run finds it again by the gitlab.job label and runs
// each stage's script in it with live output, cleanup releases whatever carries the label.
// Exit codes follow the runner's BUILD_FAILURE_EXIT_CODE / SYSTEM_FAILURE_EXIT_CODE: a script
// that fails is a build failure; a VM or server that cannot be had is a system failure.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>

#include "base/version.h"
#include "cli/command_group.h"
#include "cli/gitlab_job.h"
#include "cli/output.h"

namespace armhive {
namespace {

using SteadyClock = std::chrono::steady_clock;

const char* real_env(const char* name) { return std::getenv(name); }

class GitlabCommands final : public CommandGroup {
 public:
  void add_to(CLI::App& app) override {
    gitlab_ = app.add_subcommand("gitlab", "GitLab Runner custom executor driver");
    gitlab_->require_subcommand(1);
    config_ = gitlab_->add_subcommand("config", "print the executor configuration (config_exec)");
    config_->add_option("--builds-dir", builds_dir_, "builds directory in the VM");
    config_->add_option("--cache-dir", cache_dir_, "cache directory in the VM");
    prepare_ = gitlab_->add_subcommand("prepare", "lease the job's VM (prepare_exec)");
    prepare_->add_option("--pool", pool_, "pool when the job sets no ARMHIVE_POOL variable");
    prepare_->add_option("--wait-timeout", wait_s_, "seconds to wait for the VM (default 900)");
    run_ = gitlab_->add_subcommand("run", "run one stage's script in the VM (run_exec)");
    run_->add_option("script", script_, "the script GitLab Runner wrote")->required();
    run_->add_option("stage", stage_, "the stage name")->required();
    run_->add_option("--shell", shell_,
                     "the guest shell that runs scripts (default: the script's #! line, else "
                     "/bin/sh)");
    cleanup_ = gitlab_->add_subcommand("cleanup", "release the job's VM (cleanup_exec)");
  }

  bool parsed() const override { return gitlab_->parsed(); }
  bool needs_server() const override { return !config_->parsed(); }

  int run(const CommandContext& ctx) override {
    codes_ = gitlab_exit_codes(real_env);
    if (config_->parsed()) {
      std::cout << gitlab_config_json(builds_dir_, cache_dir_, kVersion) << "\n";
      return kExitOk;
    }
    auto response = read_job_response();
    if (!response.is_ok()) {
      int code = system_failure(response.status().message());
      return cleanup_->parsed() ? kExitOk : code;
    }
    auto job = gitlab_job_from_env(real_env, *response, pool_);
    if (!job.is_ok()) {
      int code = system_failure(job.status().message() + " (" + job.status().field() + ")");
      return cleanup_->parsed() ? kExitOk : code;  // cleanup always exits 0 (below)
    }
    if (prepare_->parsed()) return prepare(*ctx.client, *job);
    if (run_->parsed()) return run_stage(*ctx.client, *job);
    return cleanup(*ctx.client, *job);
  }

 private:
  // The text of $JOB_RESPONSE_FILE: the job's identity as GitLab sent it (gitlab_job.h).
  static Result<std::string> read_job_response() {
    const char* path = real_env("JOB_RESPONSE_FILE");
    if (path == nullptr || *path == '\0') {
      return invalid_argument("JOB_RESPONSE_FILE",
                              "JOB_RESPONSE_FILE is not set: the driver takes the job's identity "
                              "from the job response GitLab Runner (14.1 or later) writes for "
                              "its custom executor, never from variables a job can set");
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) return invalid_argument("JOB_RESPONSE_FILE", std::string("cannot read ") + path);
    // A job response carries the job's variables; far below this unless something is wrong.
    constexpr size_t kMaxBytes = 64 << 20;
    std::string text;
    char buf[64 * 1024];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
      text.append(buf, static_cast<size_t>(in.gcount()));
      if (text.size() > kMaxBytes) {
        return invalid_argument("JOB_RESPONSE_FILE", std::string(path) + " is over 64 MiB");
      }
    }
    return text;
  }

  int system_failure(const std::string& why) {
    std::cerr << "armhive gitlab: " << why << "\n";
    return codes_.system_failure;
  }

  int prepare(Client& client, const GitlabJob& job) {
    auto pools = client.pools();
    if (!pools.is_ok()) return system_failure("cannot list pools: " + pools.status().to_string());
    std::string names;
    bool known = false;
    GitlabJob lease_job = job;
    for (const auto& p : *pools) {
      names += (names.empty() ? "" : ", ") + p.name;
      if (p.name != job.pool) continue;
      known = true;
      // A job timeout beyond what the pool allows asks for the pool's longest lease rather than
      // a refusal; an ARMHIVE_TTL the job set itself is refused as it is (the job's author
      // chose it).
      const bool from_timeout =
          job.timeout_s > 0 && job.ttl_seconds == job.timeout_s + kGitlabCleanupMargin;
      if (from_timeout && p.max_ttl_seconds > 0 && *job.ttl_seconds > p.max_ttl_seconds) {
        lease_job.ttl_seconds = p.max_ttl_seconds;
      }
    }
    if (!known) {
      return system_failure(
          "the CI variable ARMHIVE_POOL (CUSTOM_ENV_ARMHIVE_POOL) names pool \"" + job.pool +
          "\", which armhived does not serve; its pools: " + (names.empty() ? "(none)" : names));
    }
    sweep(client, job);
    LeaseCreateRequest req;
    req.pool = job.pool;
    req.ttl_seconds = lease_job.ttl_seconds;
    req.labels = gitlab_labels(job, unix_now());
    auto lease = client.create_lease(req, gitlab_idempotency_key(job));
    if (!lease.is_ok()) return system_failure("cannot lease a VM: " + lease.status().message());
    std::cerr << "armhive gitlab: job " << job.job_id << " gets lease " << lease->id << " (pool "
              << job.pool << ")";
    if (job.timeout_s > 0 && job.ttl_seconds == job.timeout_s + kGitlabCleanupMargin) {
      std::cerr << "; if cleanup never comes it ends by itself in " << *lease_job.ttl_seconds
                << " s (the job's timeout " << job.timeout_s << " s + " << kGitlabCleanupMargin
                << " s"
                << (lease_job.ttl_seconds != job.ttl_seconds ? ", cut to the pool's max_ttl" : "")
                << ")";
    }
    std::cerr << "\n";
    auto deadline = SteadyClock::now() + std::chrono::seconds(wait_s_);
    LeaseDto l = *lease;
    while (l.state != "ready") {
      if (l.state == "failed" || l.state == "released" || l.state == "expired" ||
          l.state == "lost" || l.state == "releasing") {
        return system_failure("lease " + l.id + " is " + l.state +
                              (l.reason.empty() ? "" : ": " + l.reason));
      }
      auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - SteadyClock::now());
      if (left.count() <= 0) {
        auto rel = client.release_lease(l.id);
        (void)rel;  // best effort; cleanup releases it again
        return system_failure("no VM within " + std::to_string(wait_s_) + " s (lease " + l.id +
                              " still " + l.state + ")");
      }
      auto r = client.wait_lease(l.id, std::min(left, std::chrono::seconds(30)));
      if (!r.is_ok())
        return system_failure("waiting for lease " + l.id + ": " + r.status().message());
      l = *r;
    }
    std::cerr << "armhive gitlab: VM " << (l.vm ? l.vm->name : std::string("?")) << " is ready\n";
    return kExitOk;
  }

  static int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  // Releases this runner's leases whose jobs GitLab has failed by their timeout (the runner
  // stopped between their prepare and cleanup, so no cleanup will come). Best effort: their
  // TTL ends them anyway, shortly after.
  void sweep(Client& client, const GitlabJob& job) {
    if (job.runner_id.empty()) return;
    LeaseQuery q;
    q.labels = {{kGitlabRunnerLabel, job.runner_id}};
    q.active = true;
    auto page = client.list_leases(q);
    if (!page.is_ok()) return;
    const int64_t now = unix_now();
    for (const auto& l : page->items) {
      if (!gitlab_job_timed_out(l.labels, now)) continue;
      auto it = l.labels.find(kGitlabJobLabel);
      const std::string other = it == l.labels.end() ? std::string("?") : it->second;
      if (other == job.job_id) continue;
      auto r = client.release_lease(l.id);
      std::cerr << "armhive gitlab: " << (r.is_ok() ? "released" : "could not release") << " lease "
                << l.id << " of job " << other
                << ": GitLab's timeout for that job has passed and its cleanup never came (the "
                   "runner stopped before it)"
                << (r.is_ok() ? "" : ": " + r.status().message()) << "\n";
    }
  }

  // The job's ready lease, found by its gitlab.job label.
  Result<LeaseDto> job_lease(Client& client, const GitlabJob& job) {
    LeaseQuery q;
    q.labels = {{kGitlabJobLabel, job.job_id}};
    q.active = true;
    ARMHIVE_ASSIGN_OR_RETURN(LeasePage page, client.list_leases(q));
    for (const auto& l : page.items) {
      if (l.state == "ready") return l;
    }
    return not_found("job " + job.job_id + " has no ready lease (did prepare succeed?)");
  }

  int run_stage(Client& client, const GitlabJob& job) {
    if (Status s = check_gitlab_stage(stage_); !s.is_ok()) return system_failure(s.message());
    std::ifstream in(script_, std::ios::binary);
    if (!in) return system_failure("cannot read the script " + script_);
    std::string script((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto lease = job_lease(client, job);
    if (!lease.is_ok()) return system_failure(lease.status().message());
    const std::string path = gitlab_script_path(stage_);
    // The script travels as the upload command's stdin; paths are arguments, not script text.
    ExecRequestDto upload;
    upload.argv = {"/bin/sh", "-c", R"(mkdir -p "${1%/*}" && cat > "$1" && chmod 700 "$1")",
                   "upload", path};
    const std::vector<std::string> argv = gitlab_stage_argv(script, shell_, path);
    upload.stdin_data = std::move(script);
    upload.timeout_s = 120;
    auto up = client.exec(lease->id, upload);
    if (!up.is_ok()) return system_failure("cannot upload the script: " + up.status().message());
    if (up->exit_code != 0) {
      return system_failure("cannot upload the script (exit " + std::to_string(up->exit_code) +
                            "): " + up->err);
    }
    ExecRequestDto exec;
    exec.argv = argv;
    exec.timeout_s = 0;  // GitLab's job timeout applies: it signals us, and our exit kills it
    auto r =
        client.exec_stream(lease->id, exec, [](std::string_view stream, std::string_view data) {
          std::ostream& os = stream == "stderr" ? std::cerr : std::cout;
          os.write(data.data(), static_cast<std::streamsize>(data.size()));
          os.flush();
        });
    std::cout.flush();
    if (!r.is_ok()) return system_failure("stage " + stage_ + ": " + r.status().message());
    if (r->cancelled) return system_failure("stage " + stage_ + ": the lease ended meanwhile");
    if (r->result.exit_code != 0 || r->result.signal != 0) {
      std::cerr << "armhive gitlab: stage " << stage_ << " failed (exit " << r->result.exit_code
                << (r->result.signal ? ", signal " + std::to_string(r->result.signal) : "")
                << ")\n";
      return codes_.build_failure;
    }
    return kExitOk;
  }

  // Releases every active lease of the job. Always exits 0: GitLab ignores cleanup's exit
  // code, and a lease already gone is what cleanup wants.
  int cleanup(Client& client, const GitlabJob& job) {
    LeaseQuery q;
    q.labels = {{kGitlabJobLabel, job.job_id}};
    q.active = true;
    auto page = client.list_leases(q);
    if (!page.is_ok()) {
      std::cerr << "armhive gitlab: cannot list the job's leases: " << page.status().message()
                << " (the lease's TTL still ends it)\n";
      return kExitOk;
    }
    for (const auto& l : page->items) {
      auto r = client.release_lease(l.id);
      std::cerr << "armhive gitlab: " << (r.is_ok() ? "released " : "could not release ") << l.id
                << (r.is_ok() ? "" : ": " + r.status().message()) << "\n";
    }
    return kExitOk;
  }

  CLI::App* gitlab_ = nullptr;
  CLI::App* config_ = nullptr;
  CLI::App* prepare_ = nullptr;
  CLI::App* run_ = nullptr;
  CLI::App* cleanup_ = nullptr;
  std::string builds_dir_ = "/builds", cache_dir_ = "/cache", pool_, script_, stage_;
  std::string shell_;  // empty: as the script asks (gitlab_stage_argv)
  int64_t wait_s_ = 900;
  GitlabExitCodes codes_;
};

}  // namespace

std::unique_ptr<CommandGroup> make_gitlab_commands() { return std::make_unique<GitlabCommands>(); }

}  // namespace armhive
