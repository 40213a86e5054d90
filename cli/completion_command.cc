// `armhive completion bash`: the shell completion script (needs no server).
#include <iostream>

#include "cli/command_group.h"
#include "cli/output.h"

namespace armhive {
namespace {

constexpr const char* kBashCompletion = R"BASH(# bash completion for armhive; install with:
#   armhive completion bash > /etc/bash_completion.d/armhive   (or source it from ~/.bashrc)
_armhive() {
  local cur prev words cword
  _init_completion 2>/dev/null || { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
  local top="@TOP@"
  local global="--server --token --config --ca-file --insecure --json --help"
  case "$prev" in
    --ssh-key|-i|--config|--ca-file|-o|--output) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --purpose) COMPREPLY=($(compgen -W "ci dev" -- "$cur")); return ;;
    --suite) COMPREPLY=($(compgen -W "network compression network,compression" -- "$cur")); return ;;
    --group-by) COMPREPLY=($(compgen -W "owner pool label" -- "$cur")); return ;;
    --state) COMPREPLY=($(compgen -W "pending provisioning ready releasing released expired failed host_unreachable lost" -- "$cur")); return ;;
  esac
  if [[ $cword -eq 1 ]]; then COMPREPLY=($(compgen -W "$top $global" -- "$cur")); return; fi
  case "${words[1]}" in
    lease)
      if [[ $cword -eq 2 ]]; then COMPREPLY=($(compgen -W "create ls show renew rm" -- "$cur")); return; fi
      case "${words[2]}" in
        create) COMPREPLY=($(compgen -W "--pool --ttl --ssh-key --label --purpose --wait --wait-timeout --idempotency-key $global" -- "$cur")) ;;
        ls) COMPREPLY=($(compgen -W "--pool --state --label --owner --all --limit $global" -- "$cur")) ;;
        renew) COMPREPLY=($(compgen -W "--ttl $global" -- "$cur")) ;;
        *) COMPREPLY=($(compgen -W "$global" -- "$cur")) ;;
      esac ;;
    bench)
      if [[ $cword -eq 2 ]]; then COMPREPLY=($(compgen -W "show ls report compare --suite --wait" -- "$cur")); return; fi
      COMPREPLY=($(compgen -W "--suite --wait --output --csv --lease $global" -- "$cur")) ;;
    ssh) COMPREPLY=($(compgen -W "-i --identity --tunnel --no-cert --dry-run $global" -- "$cur")) ;;
    exec) COMPREPLY=($(compgen -W "--timeout --stdin $global" -- "$cur")) ;;
    events) COMPREPLY=($(compgen -W "--since --no-follow $global" -- "$cur")) ;;
    hosts) COMPREPLY=($(compgen -W "--svg $global" -- "$cur")) ;;
    usage) COMPREPLY=($(compgen -W "--since --until --group-by --label --csv $global" -- "$cur")) ;;
    completion) COMPREPLY=($(compgen -W "bash" -- "$cur")) ;;
    *) COMPREPLY=($(compgen -W "$global" -- "$cur")) ;;
  esac
}
complete -F _armhive armhive
)BASH";

class CompletionCommand final : public CommandGroup {
 public:
  void add_to(CLI::App& app) override {
    app_ = &app;
    completion_ = app.add_subcommand("completion", "print a shell completion script");
    completion_->add_option("shell", shell_, "bash")->required()->check(CLI::IsMember({"bash"}));
  }
  bool parsed() const override { return completion_->parsed(); }
  bool needs_server() const override { return false; }
  // The top-level words are the app's own subcommands, so a new command cannot be missing.
  int run(const CommandContext& /*ctx*/) override {
    std::string top;
    for (const CLI::App* sub : app_->get_subcommands([](CLI::App*) { return true; })) {
      if (!top.empty()) top += ' ';
      top += sub->get_name();
    }
    std::string script = kBashCompletion;
    const std::string marker = "@TOP@";
    script.replace(script.find(marker), marker.size(), top);
    std::cout << script;
    return kExitOk;
  }

 private:
  CLI::App* app_ = nullptr;
  CLI::App* completion_ = nullptr;
  std::string shell_;
};

}  // namespace

std::unique_ptr<CommandGroup> make_completion_command() {
  return std::make_unique<CompletionCommand>();
}

}  // namespace armhive
