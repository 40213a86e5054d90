// `armhive tunnel LEASE PORT`: one TCP connection to a port of a leased VM through the API
// (a WebSocket, api/tunnel_client.h) on stdin/stdout, for `ssh -o ProxyCommand=...` and for
// clients that can reach only the API port.
#include <csignal>
#include <iostream>

#include "api/tunnel_client.h"
#include "cli/command_group.h"
#include "cli/output.h"

namespace armhive {
namespace {

class TunnelCommand final : public CommandGroup {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("tunnel",
                              "relay stdin/stdout to a port of a leased VM through the API "
                              "(for ssh -o ProxyCommand; `armhive ssh --tunnel` uses it)");
    cmd_->add_option("lease", id_, "lease id")->required();
    cmd_->add_option("port", port_, "guest port: 22, or one the lease asked for with --port")
        ->required()
        ->check(CLI::Range(1, 65535));
  }
  bool parsed() const override { return cmd_->parsed(); }

  int run(const CommandContext& ctx) override {
    std::signal(SIGPIPE, SIG_IGN);  // a reader that went away ends the tunnel, not the process
    Status s = run_tunnel(*ctx.options, id_, port_, 0, 1);
    if (!s.is_ok()) return report(s);
    return kExitOk;
  }

 private:
  CLI::App* cmd_ = nullptr;
  std::string id_;
  int port_ = 22;
};

}  // namespace

std::unique_ptr<CommandGroup> make_tunnel_command() { return std::make_unique<TunnelCommand>(); }

}  // namespace armhive
