// armhive: the command-line client of armhived's REST API (api/openapi.yaml).
//
// Exit codes (stable, for scripts):
//   0  ok
//   1  usage error (bad flags or arguments, unreadable key file, bad config file)
//   2  the API refused the request (HTTP 4xx: invalid, unauthenticated, forbidden, not found,
//      conflict, quota)
//   3  the server failed or cannot be reached (HTTP 5xx, connection refused), or the lease
//      failed while waiting for it
//   4  timed out (waiting for a lease or benchmark, or the guest command timed out)
//   N  `armhive exec`: the remote command's exit code (128+signal when killed by a signal)
//
// main() only wires: global options, the command groups (one file each, command_group.h), the
// server options and client, then the group whose command was given.
#include <CLI/CLI.hpp>
#include <array>
#include <iostream>

#include "api/client.h"
#include "base/version.h"
#include "cli/command_group.h"
#include "cli/config.h"
#include "cli/output.h"

namespace armhive {
namespace {

// The command groups, in --help order.
constexpr std::array kCommandGroups = {
    make_lease_commands,     make_guest_commands,  make_cluster_commands, make_bench_commands,
    make_completion_command, make_gitlab_commands, make_cp_command,       make_tunnel_command,
    make_usage_command,      make_github_command};

int run(int argc, char** argv) {
  CLI::App app{"armhive: lease ephemeral aarch64 VMs from armhived"};
  app.fallthrough();
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 ok, 1 usage, 2 API refused (4xx), 3 server failed or unreachable, "
      "4 timeout, N for exec = the remote command's code.\n"
      "Server and token: --server/--token, ARMHIVE_SERVER/ARMHIVE_TOKEN, or "
      "~/.config/armhive/config.toml (server = \"...\", token = \"ah_...\").\n"
      "Several servers (armhived sharing one database), as URL,URL or a TOML array: each call "
      "goes to the one that last answered and moves on to the next when a server cannot be "
      "reached or answers 503.");
  CliSettings settings;
  bool json_out = false;
  app.add_option("--server", settings.server,
                 "armhived URL, e.g. http://127.0.0.1:8470; several as URL,URL (tried in turn)");
  app.add_option("--token", settings.token, "API token (ah_...)");
  app.add_option("--config", settings.config_path, "config file (TOML)");
  app.add_option("--ca-file", settings.ca_file, "CA bundle to trust for https");
  app.add_flag("--insecure", settings.insecure, "https: do not verify the certificate");
  app.add_flag("--json", json_out, "machine-readable JSON output");
  app.set_version_flag("--version", "armhive " + std::string(kVersion));

  std::vector<std::unique_ptr<CommandGroup>> groups;
  for (auto make : kCommandGroups) {
    groups.push_back(make());
    groups.back()->add_to(app);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }

  CommandGroup* given = nullptr;
  for (const auto& g : groups) {
    if (g->parsed()) given = g.get();
  }
  if (given == nullptr) {
    std::cerr << app.help();
    return kExitUsage;
  }
  CommandContext ctx;
  ctx.json_out = json_out;
  if (!given->needs_server()) return given->run(ctx);

  auto options = resolve_client_options(settings);
  if (!options.is_ok()) {
    std::cerr << "armhive: " << options.status().message() << "\n";
    return kExitUsage;
  }
  auto made = Client::create(*options);
  if (!made.is_ok()) {
    std::cerr << "armhive: --server " << made.status().message() << "\n";
    return kExitUsage;
  }
  ctx.options = &*options;
  ctx.client = made->get();
  return given->run(ctx);
}

}  // namespace
}  // namespace armhive

int main(int argc, char** argv) { return armhive::run(argc, argv); }
