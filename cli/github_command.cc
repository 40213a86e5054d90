// `armhive github`: the GitHub provider's state (GET /v1/github, admin tokens): its last
// reconcile pass, the deliveries waiting, its runners, GitHub's rate limit and any backoff.
#include <iostream>

#include "api/json.h"
#include "cli/command_group.h"
#include "cli/output.h"
#include "cli/table.h"

namespace armhive {
namespace {

// "2026-01-02T03:04:05.000Z (3m ago)".
std::string when(const std::string& rfc3339) {
  return rfc3339 + " (" + relative_time(rfc3339) + ")";
}

// "1 runner" / "2 runners".
std::string count(int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

void print_state(const GithubStateDto& g, std::ostream& out) {
  out << "Last reconcile:  ";
  if (!g.last_reconcile) {
    out << "none yet\n";
  } else {
    out << when(*g.last_reconcile)
        << (g.last_reconcile_error.empty() ? ", ok" : ", failed: " + g.last_reconcile_error)
        << "\n";
  }
  out << "Pending jobs:    " << g.pending_jobs << " (deliveries waiting to be served)\n"
      << "Runners:         " << g.runners << "\n"
      << "Rate limit:      ";
  if (g.rate_limit_remaining) {
    out << *g.rate_limit_remaining << " remaining";
    if (g.rate_limit_reset) out << ", resets " << when(*g.rate_limit_reset);
    out << "\n";
  } else {
    out << "not known yet (GitHub has not answered a call)\n";
  }
  out << "Backoff:         "
      << (g.backoff_until ? "until " + when(*g.backoff_until) + ": no call to GitHub before then"
                          : std::string("none"))
      << "\n"
      << "Totals:          " << count(g.reconciled_jobs_total, "job", "jobs") << " reconciled, "
      << count(g.ghosts_deleted_total, "ghost runner", "ghost runners") << " deleted, "
      << count(g.forgotten_runners_total, "runner", "runners") << " forgotten, "
      << count(g.rate_limited_total, "rate-limited reply", "rate-limited replies") << "\n";
}

class GithubCommand final : public CommandGroup {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("github",
                              "the GitHub Actions provider's state: last reconcile pass, pending "
                              "jobs, runners, rate limit and backoff (admin token)");
  }
  bool parsed() const override { return cmd_->parsed(); }

  int run(const CommandContext& ctx) override {
    auto r = ctx.client->github_state();
    if (!r.is_ok()) {
      const Status& s = r.status();
      // report()'s hints are about leases and ci/dev tokens: wrong here.
      if (s.code() == ErrorCode::kNotFound) {
        std::cerr << "armhive: GitHub is not configured on " << ctx.client->current_server()
                  << " (its configuration has no [github] table; see daemon/github/README.md)\n";
        return exit_code_for(s);
      }
      if (s.code() == ErrorCode::kPermissionDenied) {
        std::cerr << "armhive: " << s.message() << "\n"
                  << "hint: use an admin token (`armhived token create NAME --role admin`)\n";
        return exit_code_for(s);
      }
      return report(s);
    }
    if (ctx.json_out) {
      print_json(to_json(*r));
      return kExitOk;
    }
    print_state(*r, std::cout);
    return kExitOk;
  }

 private:
  CLI::App* cmd_ = nullptr;
};

}  // namespace

std::unique_ptr<CommandGroup> make_github_command() { return std::make_unique<GithubCommand>(); }

}  // namespace armhive
