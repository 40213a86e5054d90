#pragma once

#include <string>
#include <vector>

#include "daemon/config/daemon_config.h"

namespace armhive {

// What re-reading the configuration (SIGHUP) does to the [github] table, decided from the
// running table and the file's, and from what their secret files hold, without I/O.
//
// Live: the webhook secret (its file and what it holds) and webhook_secret_overlap, the token or
// GitHub App (token_file, app_id, app_private_key_file, installation_id and what the files
// hold), runner_group_id, idle_timeout, replay_window, reconcile_period, reconcile_repos,
// runner_command and labels. Restart-only, kept and named: api_url, org and repo (the scope:
// the runners and leases of the running one would read as ghosts or forgotten under another),
// reconcile_repos when the org changes too (they are the org's repositories), and the table
// being added or removed (the webhook route and the provider are built at start).
struct GithubSecrets {
  std::string webhook_secret;
  std::string token;            // token_file's, or empty
  std::string app_private_key;  // app_private_key_file's PEM, or empty
};

struct GithubReload {
  // The table in force after the reload: `next` with the restart-only keys as they run.
  GithubConfig config;
  bool settings = false;     // the provider's settings change (GithubProvider::reconfigure)
  bool credentials = false;  // the token or App changes (GithubApi::set_credentials)
  // One line per change applied: "github: reconcile_period 1h -> 10s"; a secret is named,
  // never shown: "github: the webhook secret changed".
  std::vector<std::string> applied;
  // One line per restart-only change: "[github] org: 'a' -> 'b' needs a restart (...)".
  std::vector<std::string> restart_needed;
};

// Pure. Both tables disabled, or equal with equal secrets: nothing (no lines, no flags).
GithubReload plan_github_reload(const GithubConfig& running, const GithubSecrets& running_secrets,
                                const GithubConfig& next, const GithubSecrets& next_secrets);

}  // namespace armhive
