// `armhive ssh`, `armhive exec`, `armhive console`: into a leased VM.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>

#include "api/host_key_alias.h"
#include "api/json.h"
#include "base/process_runner.h"
#include "cli/command_group.h"
#include "cli/config.h"
#include "cli/output.h"
#include "cli/table.h"

namespace armhive {
namespace {

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789@%_-+=:,./") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A fresh ed25519 key for one lease and a certificate for it from the server (valid until the
// lease expires, for that lease only). Returns the private key's path (the certificate is next
// to it as KEY-cert.pub), or the server's error: kUnavailable when it has no SSH CA.
Result<std::string> lease_certificate(Client& client, const std::string& lease_id) {
  ARMHIVE_ASSIGN_OR_RETURN(std::string dir, lease_key_dir(lease_id));
  const std::string key = dir + "/id_ed25519";
  std::error_code ec;
  std::filesystem::remove(key, ec);
  std::filesystem::remove(key + ".pub", ec);
  std::filesystem::remove(key + "-cert.pub", ec);
  SubprocessRunner runner;
  auto made = runner.run({.argv = {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                                   "armhive " + lease_id, "-f", key},
                          .timeout = std::chrono::seconds(30)});
  if (!made.is_ok()) return made.status().annotate("ssh-keygen (install openssh-client)");
  if (!made->ok()) return unavailable("ssh-keygen failed: " + made->err);
  std::ifstream pub_in(key + ".pub");
  std::string pub;
  std::getline(pub_in, pub);
  ARMHIVE_ASSIGN_OR_RETURN(SshCertificateDto cert, client.ssh_certificate(lease_id, pub));
  std::ofstream out(key + "-cert.pub", std::ios::trunc);
  out << cert.certificate << "\n";
  if (!out.flush()) return unavailable("cannot write " + key + "-cert.pub");
  return key;
}

class GuestCommands final : public CommandGroup {
 public:
  void add_to(CLI::App& app) override {
    ssh_ = app.add_subcommand("ssh", "ssh into a leased VM (runs the system ssh)");
    ssh_->add_option("lease", id_, "lease id")->required();
    ssh_->add_option("-i,--identity", identity_,
                     "private key file for ssh -i (default: a fresh key with a certificate for "
                     "this lease from the server)");
    ssh_->add_flag("--no-cert", no_cert_,
                   "do not ask the server for a certificate; use your own keys (ssh-agent)");
    ssh_->add_flag("--tunnel", tunnel_,
                   "reach the VM through the API (armhive tunnel as ssh's ProxyCommand), for "
                   "when only the API port is reachable");
    ssh_->add_flag("--dry-run", dry_run_, "print the ssh command instead of running it");
    ssh_->add_option("--wait", ssh_wait_,
                     "seconds to wait for the lease to be ready with its VM's host keys "
                     "(default 300; 0: do not wait)")
        ->check(CLI::Range(0, 24 * 3600));
    ssh_->add_flag("--accept-new-host-key", accept_new_host_key_,
                   "when the server knows no host keys for the VM, trust the key it shows on "
                   "first use (ssh's StrictHostKeyChecking=accept-new, in a known_hosts file "
                   "for this lease only)");
    ssh_->add_option("command", command_, "remote command (after --)");

    exec_ = app.add_subcommand("exec", "run a command in a VM through its guest agent");
    exec_->add_option("lease", id_, "lease id")->required();
    exec_->add_option("command", command_, "command and arguments (after --)")->required();
    exec_
        ->add_option("--timeout", exec_timeout_,
                     "seconds before the command is killed (default: none, the lease bounds it; "
                     "with --json 60, at most 3600)")
        ->check(CLI::Range(0, 30 * 24 * 3600));
    exec_->add_flag("--stdin", with_stdin_, "send our standard input to the command");

    console_ = app.add_subcommand("console", "print the tail of a VM's serial console");
    console_->add_option("lease", id_, "lease id")->required();
    console_->add_option("--bytes", console_bytes_, "at most this many bytes");
  }

  bool parsed() const override { return ssh_->parsed() || exec_->parsed() || console_->parsed(); }

  int run(const CommandContext& ctx) override {
    if (ssh_->parsed()) return ssh(*ctx.client, *ctx.options);
    if (exec_->parsed()) return exec(*ctx.client, ctx.json_out);
    auto r = ctx.client->console(id_, console_bytes_);
    if (!r.is_ok()) return report(r.status());
    std::cout << *r;
    return kExitOk;
  }

 private:
  // The lease once it is ready with its VM's host keys, waiting up to --wait seconds (a line on
  // stderr says so); otherwise as it stands when the wait ends.
  Result<LeaseDto> lease_for_ssh(Client& client) {
    auto r = client.get_lease(id_);
    if (!r.is_ok()) return r;
    auto settled = [](const LeaseDto& l) {
      bool waiting = l.state == "pending" || l.state == "provisioning";
      bool keys_missing = l.state == "ready" && l.ssh && l.ssh->host_keys.empty();
      return !waiting && !keys_missing;
    };
    if (settled(*r) || ssh_wait_ == 0) return r;
    std::cerr << "armhive: waiting up to " << ssh_wait_ << " s for lease " << id_
              << " to be ready with its VM's SSH host keys (" << r->state << ")...\n";
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(ssh_wait_);
    while (!settled(*r)) {
      auto left = std::chrono::ceil<std::chrono::seconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      if (r->state == "ready") {
        // Ready without keys (a server that reads them later): look again in a second.
        std::this_thread::sleep_for(std::chrono::seconds(1));
        r = client.get_lease(id_);
      } else {
        r = client.wait_lease(id_, std::min(left, std::chrono::seconds(30)));
      }
      if (!r.is_ok()) return r;
    }
    return r;
  }

  // ssh's host key options for the lease: its keys, written to a known_hosts file of its own
  // under its alias (addresses and forward ports are reused by later VMs with other keys, the
  // alias never), checked strictly. Without keys only --accept-new-host-key goes on (trust on
  // first use, into that file); otherwise an error saying why and what to do.
  Result<std::vector<std::string>> host_key_args(const LeaseDto& l) {
    const std::string alias =
        l.ssh->host_key_alias.empty() ? host_key_alias(l.id) : l.ssh->host_key_alias;
    if (!l.ssh->host_keys.empty()) {
      std::string lines;
      for (const auto& key : l.ssh->host_keys) lines += alias + " " + key + "\n";
      ARMHIVE_ASSIGN_OR_RETURN(std::string file, write_known_hosts(l.id, lines));
      return std::vector<std::string>{"-o", "HostKeyAlias=" + alias,
                                      "-o", "StrictHostKeyChecking=yes",
                                      "-o", "UserKnownHostsFile=" + file};
    }
    if (!accept_new_host_key_) {
      return unavailable(
          "the server does not know the host keys of lease " + l.id + "'s VM" +
          (ssh_wait_ > 0 ? " after waiting " + std::to_string(ssh_wait_) + " s" : "") +
          ", so ssh could not verify it is talking to that VM; retry later (armhive ssh " + l.id +
          " --wait 600), or pass --accept-new-host-key to trust the key the VM shows on first "
          "use");
    }
    std::cerr << "armhive: no host keys known for lease " << l.id
              << "'s VM; trusting the one it shows now (--accept-new-host-key)\n";
    ARMHIVE_ASSIGN_OR_RETURN(std::string file, write_known_hosts(l.id, ""));
    return std::vector<std::string>{"-o", "HostKeyAlias=" + alias,
                                    "-o", "StrictHostKeyChecking=accept-new",
                                    "-o", "UserKnownHostsFile=" + file};
  }

  int ssh(Client& client, const ClientOptions& options) {
    auto r = lease_for_ssh(client);
    if (!r.is_ok()) return report(r.status());
    if (r->state == "ready" && !r->ssh) {
      // No ssh block: the pool's image has no sshd (its `ssh = false`), or armhived cannot
      // reach the VM (another host's own network).
      std::string why =
          " cannot be reached through armhived (a remote host's nat or isolated "
          "network)";
      if (auto pools = client.pools(); pools.is_ok()) {
        for (const PoolDto& p : *pools) {
          if (p.name == r->pool && !p.ssh) {
            why = "'s image has no sshd (pool " + p.name + " says ssh = false)";
          }
        }
      }
      std::cerr << "armhive: lease " << id_ << " offers no SSH: its VM"
                << (r->vm && !r->vm->host.empty() && why[0] == ' '
                        ? " runs on host " + r->vm->host + " and"
                        : "")
                << why << "; use `armhive exec " << id_ << " -- CMD` or `armhive cp`"
                << (why[0] == ' ' ? ", or a pool on a bridge network" : "") << "\n";
      return kExitApi;
    }
    if (r->state != "ready" || !r->ssh) {
      const bool waiting = r->state == "pending" || r->state == "provisioning";
      std::cerr << "armhive: lease " << id_ << " is " << r->state << ", not ready for ssh"
                << (waiting
                        ? " (still waiting after " + std::to_string(ssh_wait_) +
                              " s; wait longer with --wait, or `armhive lease show " + id_ + "`)"
                        : "")
                << "\n";
      return waiting ? kExitTimeout : kExitApi;
    }
    if (r->purpose == "dev" && !dry_run_) {
      // A developer's VM goes away at expiry with everything on it: say when, up front.
      std::cerr << "armhive: dev lease " << r->id << " ends " << relative_time(r->expires_at)
                << " (" << r->expires_at << "); extend it with `armhive lease renew " << r->id
                << " --ttl 1h`\n";
    }
    std::vector<std::string> args{"ssh"};
    auto keys = host_key_args(*r);
    if (!keys.is_ok()) {
      std::cerr << "armhive: " << keys.status().message() << "\n";
      return kExitServer;
    }
    args.insert(args.end(), keys->begin(), keys->end());
    const std::string alias =
        r->ssh->host_key_alias.empty() ? host_key_alias(r->id) : r->ssh->host_key_alias;
    args.insert(args.end(), {"-o", "LogLevel=ERROR"});
    if (!identity_.empty()) {
      args.push_back("-i");
      args.push_back(expand_home(identity_));
    } else if (!no_cert_ && !dry_run_) {
      auto key = lease_certificate(client, r->id);
      if (key.is_ok()) {
        args.insert(args.end(), {"-i", *key, "-o", "CertificateFile=" + *key + "-cert.pub", "-o",
                                 "IdentitiesOnly=yes"});
      } else if (key.status().code() == ErrorCode::kUnavailable) {
        // No CA on this server (or the guest did not take its trust): the lease's ssh_keys
        // may still open it.
        std::cerr << "armhive: no SSH certificate (" << key.status().message()
                  << "); trying your own keys\n";
      } else {
        return report(key.status());
      }
    }
    if (tunnel_) {
      auto proxy = tunnel_proxy_command(options, r->id);
      if (!proxy.is_ok()) return report(proxy.status());
      args.insert(args.end(), {"-o", "ProxyCommand=" + *proxy});
      args.push_back(r->ssh->user + "@" + alias);
    } else {
      if (r->ssh->port != 22) {
        args.push_back("-p");
        args.push_back(std::to_string(r->ssh->port));
      }
      args.push_back(r->ssh->user + "@" + r->ssh->host);
    }
    if (!command_.empty()) {
      args.push_back("--");
      args.insert(args.end(), command_.begin(), command_.end());
    }
    if (dry_run_) {
      std::vector<std::string> quoted;
      for (const auto& a : args) quoted.push_back(shell_quote(a));
      std::cout << join(quoted, " ") << "\n";
      return kExitOk;
    }
    std::vector<char*> cargv;
    for (auto& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    std::cout.flush();
    execvp("ssh", cargv.data());
    std::cerr << "armhive: cannot run ssh: " << std::strerror(errno)
              << " (install openssh-client)\n";
    return kExitServer;
  }

  int exec(Client& client, bool json_out) {
    ExecRequestDto req;
    req.argv = command_;
    req.timeout_s = exec_timeout_;
    if (with_stdin_) {
      req.stdin_data.assign(std::istreambuf_iterator<char>(std::cin),
                            std::istreambuf_iterator<char>());
    }
    if (!json_out) return exec_streamed(client, req);
    if (req.timeout_s == 0) req.timeout_s = 60;
    if (req.timeout_s > kMaxExecTimeoutSeconds) {
      std::cerr << "armhive: --timeout with --json is at most " << kMaxExecTimeoutSeconds
                << " s (without --json the output streams and there is no such limit)\n";
      return kExitUsage;
    }
    exec_timeout_ = static_cast<int>(req.timeout_s);
    auto r = client.exec(id_, req);
    if (!r.is_ok()) return report(r.status());
    if (json_out) {
      print_json(to_json(*r));
    } else {
      std::cout.write(r->out.data(), static_cast<std::streamsize>(r->out.size()));
      std::cerr.write(r->err.data(), static_cast<std::streamsize>(r->err.size()));
      std::cout.flush();
    }
    if (r->timed_out) {
      std::cerr << "armhive: the command timed out after " << exec_timeout_
                << " s and was killed (raise --timeout)\n";
      return kExitTimeout;
    }
    if (r->signal > 0) return 128 + r->signal;
    return r->exit_code < 0 ? kExitServer : r->exit_code;
  }

  // Output as it arrives (stdout to stdout, stderr to stderr, unbuffered); the command's exit
  // code, 128+signal when a signal ended it.
  int exec_streamed(Client& client, const ExecRequestDto& req) {
    auto r = client.exec_stream(id_, req, [](std::string_view stream, std::string_view data) {
      std::ostream& os = stream == "stderr" ? std::cerr : std::cout;
      os.write(data.data(), static_cast<std::streamsize>(data.size()));
      os.flush();
    });
    std::cout.flush();
    if (!r.is_ok()) return report(r.status());
    if (r->cancelled) {
      std::cerr << "armhive: the lease ended while the command ran; it was killed\n";
      return kExitServer;
    }
    if (r->result.timed_out) {
      std::cerr << "armhive: the command timed out after " << req.timeout_s
                << " s and was killed (raise --timeout)\n";
      return kExitTimeout;
    }
    if (r->result.signal > 0) return 128 + r->result.signal;
    return r->result.exit_code < 0 ? kExitServer : r->result.exit_code;
  }

  // ssh's ProxyCommand for --tunnel: this binary's `tunnel LEASE 22`. The server, token and CA
  // file reach it through the environment (ARMHIVE_*), not its command line (visible in ps).
  static Result<std::string> tunnel_proxy_command(const ClientOptions& options,
                                                  const std::string& lease_id) {
    std::error_code ec;
    std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) return unavailable("cannot find the armhive binary for ProxyCommand: " + ec.message());
    std::string servers;
    for (const auto& s : options.servers) servers += (servers.empty() ? "" : ",") + s;
    setenv("ARMHIVE_SERVER", servers.c_str(), 1);
    setenv("ARMHIVE_TOKEN", options.token.c_str(), 1);
    if (!options.ca_file.empty()) setenv("ARMHIVE_CA_FILE", options.ca_file.c_str(), 1);
    std::string cmd = shell_quote(self) + (options.insecure ? " --insecure" : "") + " tunnel " +
                      shell_quote(lease_id) + " 22";
    std::string escaped;  // ssh expands %-tokens in ProxyCommand
    for (char c : cmd) escaped += c == '%' ? std::string("%%") : std::string(1, c);
    return escaped;
  }

  bool no_cert_ = false;
  bool tunnel_ = false;
  CLI::App* ssh_ = nullptr;
  CLI::App* exec_ = nullptr;
  CLI::App* console_ = nullptr;
  std::string id_, identity_;
  bool dry_run_ = false;
  int ssh_wait_ = 300;
  bool accept_new_host_key_ = false;
  std::vector<std::string> command_;
  int exec_timeout_ = 0;
  bool with_stdin_ = false;
  size_t console_bytes_ = 0;
};

}  // namespace

std::unique_ptr<CommandGroup> make_guest_commands() { return std::make_unique<GuestCommands>(); }

}  // namespace armhive
