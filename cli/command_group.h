#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <vector>

#include "api/client.h"

namespace armhive {

// What a command runs with, made by main() after parsing: the resolved server options, the
// API client (null for commands that need no server) and --json.
struct CommandContext {
  const ClientOptions* options = nullptr;
  Client* client = nullptr;
  bool json_out = false;
};

// One group of `armhive` subcommands (lease, guest access, cluster views, bench, completion).
// add_to() declares its subcommands with their options bound to the group's members; after
// CLI11 parsed the command line, main() runs the group whose command was given. Main thread
// only; a group lives as long as the CLI::App it was added to.
class CommandGroup {
 public:
  virtual ~CommandGroup() = default;
  virtual void add_to(CLI::App& app) = 0;
  // Whether one of this group's commands was on the command line.
  virtual bool parsed() const = 0;
  virtual bool needs_server() const { return true; }
  // Runs the command that was given; returns the exit code (see main.cc).
  virtual int run(const CommandContext& ctx) = 0;
};

// The groups in the order their commands appear in --help; one file each.
std::unique_ptr<CommandGroup> make_lease_commands();    // lease_commands.cc
std::unique_ptr<CommandGroup> make_guest_commands();    // guest_commands.cc: ssh, exec, console
std::unique_ptr<CommandGroup> make_cluster_commands();  // cluster_commands.cc: pools, hosts, events
std::unique_ptr<CommandGroup> make_bench_commands();    // bench_commands.cc
std::unique_ptr<CommandGroup> make_completion_command();  // completion_command.cc
std::unique_ptr<CommandGroup> make_gitlab_commands();     // gitlab_commands.cc
std::unique_ptr<CommandGroup> make_cp_command();          // cp_command.cc
std::unique_ptr<CommandGroup> make_tunnel_command();      // tunnel_command.cc
std::unique_ptr<CommandGroup> make_usage_command();       // usage_command.cc
std::unique_ptr<CommandGroup> make_github_command();      // github_command.cc

}  // namespace armhive
