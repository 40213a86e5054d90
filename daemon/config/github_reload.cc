#include "daemon/config/github_reload.h"

#include "base/validation.h"

namespace armhive {
namespace {

std::string text(const std::string& v) { return "'" + v + "'"; }
std::string text(int64_t v) { return std::to_string(v); }
std::string text(std::chrono::milliseconds d) {
  return format_duration(std::chrono::duration_cast<std::chrono::seconds>(d).count());
}
std::string text(const std::vector<std::string>& argv) {
  std::string out = "[";
  for (const std::string& a : argv) out += (out.size() > 1 ? ", " : "") + text(a);
  return out + "]";
}
std::string text(const std::map<std::string, std::string>& labels) {
  std::string out = "{";
  for (const auto& [k, v] : labels) out += (out.size() > 1 ? ", " : "") + k + " = " + v;
  return out + "}";
}

}  // namespace

GithubReload plan_github_reload(const GithubConfig& running, const GithubSecrets& running_secrets,
                                const GithubConfig& next, const GithubSecrets& next_secrets) {
  GithubReload out;
  out.config = running;
  if (!running.enabled && !next.enabled) return out;
  if (running.enabled != next.enabled) {
    out.restart_needed.push_back(
        std::string("[github] ") + (next.enabled ? "added" : "removed") +
        ": it takes effect at the next start (the webhook endpoint and the provider are built "
        "at start; VMs keep running across a restart)");
    return out;
  }
  auto restart = [&out](const char* key, const std::string& from, const std::string& to) {
    if (from == to) return;
    out.restart_needed.push_back(std::string("[github] ") + key + ": " + from + " -> " + to +
                                 " needs a restart (the runners of the running scope would read "
                                 "as ghosts or forgotten under another; VMs keep running across "
                                 "a restart)");
  };
  restart("api_url", text(running.api_url), text(next.api_url));
  restart("org", text(running.org), text(next.org));
  restart("repo", text(running.repo), text(next.repo));

  // Everything else is taken from `next`.
  GithubConfig& c = out.config;
  auto take = [&out](const char* key, auto& field, const auto& value, const std::string& from,
                     const std::string& to, bool* flag) {
    if (field == value) return;
    field = value;
    out.applied.push_back(std::string("github: ") + key + " " + from + " -> " + to);
    *flag = true;
  };
  bool& settings = out.settings;
  bool& credentials = out.credentials;
  take("webhook_secret_file", c.webhook_secret_file, next.webhook_secret_file,
       text(running.webhook_secret_file), text(next.webhook_secret_file), &settings);
  take("webhook_secret_overlap", c.webhook_secret_overlap, next.webhook_secret_overlap,
       text(running.webhook_secret_overlap), text(next.webhook_secret_overlap), &settings);
  take("runner_group_id", c.runner_group_id, next.runner_group_id, text(running.runner_group_id),
       text(next.runner_group_id), &settings);
  take("idle_timeout", c.idle_timeout, next.idle_timeout, text(running.idle_timeout),
       text(next.idle_timeout), &settings);
  take("replay_window", c.replay_window, next.replay_window, text(running.replay_window),
       text(next.replay_window), &settings);
  take("reconcile_period", c.reconcile_period, next.reconcile_period,
       text(running.reconcile_period), text(next.reconcile_period), &settings);
  // The repositories pass 1 lists are the organisation's: under another org (a restart's) the
  // list read with it waits for that restart too, as the org does.
  if (running.org == next.org) {
    take("reconcile_repos", c.reconcile_repos, next.reconcile_repos, text(running.reconcile_repos),
         text(next.reconcile_repos), &settings);
  } else if (running.reconcile_repos != next.reconcile_repos) {
    out.restart_needed.push_back("[github] reconcile_repos: " + text(running.reconcile_repos) +
                                 " -> " + text(next.reconcile_repos) +
                                 " is kept until the restart the org needs (they are its "
                                 "repositories)");
  }
  take("runner_command", c.runner_command, next.runner_command, text(running.runner_command),
       text(next.runner_command), &settings);
  take("labels", c.labels, next.labels, text(running.labels), text(next.labels), &settings);
  take("token_file", c.token_file, next.token_file, text(running.token_file), text(next.token_file),
       &credentials);
  take("app_id", c.app_id, next.app_id, text(running.app_id), text(next.app_id), &credentials);
  take("app_private_key_file", c.app_private_key_file, next.app_private_key_file,
       text(running.app_private_key_file), text(next.app_private_key_file), &credentials);
  take("installation_id", c.installation_id, next.installation_id, text(running.installation_id),
       text(next.installation_id), &credentials);
  // What the files hold: named, never shown.
  if (running_secrets.webhook_secret != next_secrets.webhook_secret) {
    out.applied.push_back(
        next.webhook_secret_overlap.count() > 0
            ? "github: the webhook secret changed (deliveries signed with the previous one are "
              "accepted for " +
                  text(next.webhook_secret_overlap) + " more)"
            : "github: the webhook secret changed (the previous one is refused from now on)");
    settings = true;
  }
  if (running_secrets.token != next_secrets.token) {
    out.applied.push_back("github: the token changed");
    credentials = true;
  }
  if (running_secrets.app_private_key != next_secrets.app_private_key) {
    out.applied.push_back("github: the App's private key changed");
    credentials = true;
  }
  return out;
}

}  // namespace armhive
