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
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "api/client.h"
#include "api/json.h"
#include "base/validation.h"
#include "base/version.h"
#include "cli/bench_summary.h"
#include "cli/config.h"
#include "cli/table.h"

namespace armhive {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitUsage = 1;
constexpr int kExitApi = 2;
constexpr int kExitServer = 3;
constexpr int kExitTimeout = 4;

using SteadyClock = std::chrono::steady_clock;

int exit_code_for(const Status& s) {
  switch (s.code()) {
    case ErrorCode::kOk:
      return kExitOk;
    case ErrorCode::kTimeout:
      return kExitTimeout;
    case ErrorCode::kInternal:
    case ErrorCode::kUnavailable:
      return kExitServer;
    default:
      return kExitApi;
  }
}

// Prints the problem and what to do about it; returns the exit code.
int report(const Status& s, const ClientOptions& /*o*/) {
  std::cerr << "armhive: " << s.message();
  if (!s.field().empty() && s.message().find(s.field()) == std::string::npos) {
    std::cerr << " (field " << s.field() << ")";
  }
  std::cerr << "\n";
  switch (s.code()) {
    case ErrorCode::kUnauthenticated:
      std::cerr << "hint: give a token with --token, ARMHIVE_TOKEN or `token = \"ah_...\"` in "
                   "~/.config/armhive/config.toml (an admin creates one with `armhived token "
                   "create NAME --role ci`)\n";
      break;
    case ErrorCode::kPermissionDenied:
      std::cerr << "hint: this token's role does not allow it; use a ci or dev token\n";
      break;
    case ErrorCode::kNotFound:
      std::cerr << "hint: `armhive lease ls` lists your leases, `armhive pools` the pools\n";
      break;
    default:
      break;
  }
  return exit_code_for(s);
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string labels_text(const std::map<std::string, std::string>& labels) {
  std::string out;
  for (const auto& [k, v] : labels) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out.empty() ? "-" : out;
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

// Shows progress on stderr while the main thread blocks: an animated spinner line with the
// state and elapsed time on a terminal, one plain line per state change otherwise.
class Progress {
 public:
  explicit Progress(std::string what)
      : what_(std::move(what)), tty_(isatty(STDERR_FILENO) == 1), start_(SteadyClock::now()) {
    if (tty_) spinner_ = std::thread([this] { spin(); });
  }
  ~Progress() { finish(); }

  void update(const std::string& state, const std::string& detail) {
    std::lock_guard lock(mu_);
    if (state == state_ && detail == detail_) return;
    state_ = state;
    detail_ = detail;
    if (!tty_) {
      std::cerr << what_ << ": " << state << (detail.empty() ? "" : " (" + detail + ")")
                << " after " << elapsed() << "s\n";
    }
  }

  void finish() {
    {
      std::lock_guard lock(mu_);
      if (done_) return;
      done_ = true;
    }
    cv_.notify_all();
    if (spinner_.joinable()) spinner_.join();
    if (tty_) std::cerr << "\r\033[K" << std::flush;
  }

 private:
  long elapsed() const {
    return static_cast<long>(
        std::chrono::duration_cast<std::chrono::seconds>(SteadyClock::now() - start_).count());
  }
  void spin() {
    static constexpr const char* kFrames[] = {"|", "/", "-", "\\"};
    size_t i = 0;
    std::unique_lock lock(mu_);
    while (!done_) {
      std::cerr << "\r\033[K" << kFrames[i++ % 4] << " " << what_ << ": " << state_
                << (detail_.empty() ? "" : " (" + detail_ + ")") << " " << elapsed() << "s"
                << std::flush;
      cv_.wait_for(lock, std::chrono::milliseconds(120));
    }
  }

  std::string what_;
  bool tty_;
  SteadyClock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string state_ = "waiting";
  std::string detail_;
  bool done_ = false;
  std::thread spinner_;
};

void print_lease(const LeaseDto& l, std::ostream& out) {
  out << "Lease:    " << l.id << "\n"
      << "Pool:     " << l.pool << "\n"
      << "Owner:    " << l.owner << "\n"
      << "State:    " << l.state << (l.reason.empty() ? "" : " (" + l.reason + ")") << "\n"
      << "Purpose:  " << l.purpose << "\n"
      << "Labels:   " << labels_text(l.labels) << "\n"
      << "Created:  " << l.created_at << "\n"
      << "Expires:  " << l.expires_at << " (" << relative_time(l.expires_at) << ", ttl "
      << format_duration(l.ttl_seconds) << ")\n";
  if (l.vm) {
    std::vector<std::string> cpus;
    for (int c : l.vm->cpus) cpus.push_back(std::to_string(c));
    out << "VM:       " << l.vm->name << " at " << or_dash(l.vm->address) << ", host CPUs "
        << (cpus.empty() ? "-" : join(cpus, ",")) << "\n";
  }
  if (l.ssh) out << "SSH:      " << l.ssh->command << "\n";
  if (!l.history.empty()) {
    out << "History:\n";
    for (const auto& t : l.history) {
      out << "  " << t.at << "  " << t.from << " -> " << t.to
          << (t.reason.empty() ? "" : "  " + t.reason) << "\n";
    }
  }
}

void print_json(const nlohmann::json& j) { std::cout << dump_json(j, 2) << "\n"; }

Result<std::vector<std::string>> read_ssh_keys(const std::vector<std::string>& args) {
  std::vector<std::string> keys;
  for (const auto& arg : args) {
    if (arg.rfind("ssh-", 0) == 0 || arg.rfind("ecdsa-", 0) == 0 || arg.rfind("sk-", 0) == 0) {
      ARMHIVE_RETURN_IF_ERROR(check_ssh_key("--ssh-key", arg));
      keys.push_back(arg);
      continue;
    }
    std::string path = expand_home(arg);
    // Given the private key (as for ssh -i), use its .pub.
    if (path.size() < 4 || path.substr(path.size() - 4) != ".pub") {
      std::ifstream pub(path + ".pub");
      if (pub) path += ".pub";
    }
    std::ifstream in(path);
    if (!in) return invalid_argument("--ssh-key", "cannot read " + path);
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      ARMHIVE_RETURN_IF_ERROR(check_ssh_key("--ssh-key " + path, line));
      keys.push_back(line);
      ++n;
    }
    if (n == 0) return invalid_argument("--ssh-key", path + " has no public key");
  }
  return keys;
}

Result<std::map<std::string, std::string>> parse_labels(const std::vector<std::string>& args) {
  std::map<std::string, std::string> out;
  for (const auto& kv : args) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return invalid_argument("--label", "must be key=value (got \"" + kv + "\")");
    }
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

// Waits for a lease to be ready; exit code 0, 3 (failed/ended) or 4 (timeout).
int wait_ready(Client& client, LeaseDto& lease, std::chrono::seconds limit,
               const ClientOptions& o) {
  Progress progress(lease.id);
  auto deadline = SteadyClock::now() + limit;
  while (lease.state != "ready") {
    progress.update(lease.state, lease.reason);
    if (lease.state == "failed" || lease.state == "released" || lease.state == "expired" ||
        lease.state == "releasing") {
      progress.finish();
      std::cerr << "armhive: lease " << lease.id << " is " << lease.state
                << (lease.reason.empty() ? "" : ": " + lease.reason) << "\n";
      return kExitServer;
    }
    auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) {
      progress.finish();
      std::cerr << "armhive: lease " << lease.id << " still " << lease.state << " after "
                << format_duration(limit.count()) << " (it keeps waiting on the server; "
                << "`armhive lease rm " << lease.id << "` cancels it)\n";
      return kExitTimeout;
    }
    auto r = client.wait_lease(lease.id, std::min(left, std::chrono::seconds(30)));
    if (!r.is_ok()) {
      progress.finish();
      return report(r.status(), o);
    }
    lease = *r;
  }
  progress.finish();
  return kExitOk;
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789@%_-+=:,./") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

constexpr const char* kBashCompletion = R"BASH(# bash completion for armhive; install with:
#   armhive completion bash > /etc/bash_completion.d/armhive   (or source it from ~/.bashrc)
_armhive() {
  local cur prev words cword
  _init_completion 2>/dev/null || { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
  local top="lease ssh exec console pools hosts events bench completion"
  local global="--server --token --config --ca-file --insecure --json --help"
  case "$prev" in
    --ssh-key|-i|--config|--ca-file|-o|--output) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --purpose) COMPREPLY=($(compgen -W "ci dev" -- "$cur")); return ;;
    --suite) COMPREPLY=($(compgen -W "network compression network,compression" -- "$cur")); return ;;
    --state) COMPREPLY=($(compgen -W "pending provisioning ready releasing released expired failed" -- "$cur")); return ;;
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
    ssh) COMPREPLY=($(compgen -W "-i --identity --dry-run $global" -- "$cur")) ;;
    exec) COMPREPLY=($(compgen -W "--timeout --stdin $global" -- "$cur")) ;;
    events) COMPREPLY=($(compgen -W "--since --no-follow $global" -- "$cur")) ;;
    hosts) COMPREPLY=($(compgen -W "--svg $global" -- "$cur")) ;;
    completion) COMPREPLY=($(compgen -W "bash" -- "$cur")) ;;
    *) COMPREPLY=($(compgen -W "$global" -- "$cur")) ;;
  esac
}
complete -F _armhive armhive
)BASH";

int run(int argc, char** argv) {
  CLI::App app{"armhive: lease ephemeral aarch64 VMs from armhived"};
  app.fallthrough();
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 ok, 1 usage, 2 API refused (4xx), 3 server failed or unreachable, "
      "4 timeout, N for exec = the remote command's code.\n"
      "Server and token: --server/--token, ARMHIVE_SERVER/ARMHIVE_TOKEN, or "
      "~/.config/armhive/config.toml (server = \"...\", token = \"ah_...\").");
  CliSettings settings;
  bool json_out = false;
  app.add_option("--server", settings.server, "armhived URL, e.g. http://127.0.0.1:8470");
  app.add_option("--token", settings.token, "API token (ah_...)");
  app.add_option("--config", settings.config_path, "config file (TOML)");
  app.add_option("--ca-file", settings.ca_file, "CA bundle to trust for https");
  app.add_flag("--insecure", settings.insecure, "https: do not verify the certificate");
  app.add_flag("--json", json_out, "machine-readable JSON output");
  app.set_version_flag("--version", "armhive " + std::string(kVersion));

  // lease
  auto* lease = app.add_subcommand("lease", "create, list, show, renew and release leases");
  lease->require_subcommand(1);
  std::string pool, ttl = "", purpose = "ci", idem, wait_timeout = "15m";
  std::vector<std::string> ssh_keys, label_args;
  bool wait = false;
  auto* create = lease->add_subcommand("create", "lease a VM from a pool");
  create->add_option("--pool", pool, "pool name")->required();
  create->add_option("--ttl", ttl, "lease duration: 2h, 90m, 3600 (default: the pool's)");
  create->add_option("--ssh-key", ssh_keys, "public key file (or the private key next to its .pub)")
      ->allow_extra_args(false);
  create->add_option("--label", label_args, "label key=value (repeatable)")
      ->allow_extra_args(false);
  create->add_option("--purpose", purpose, "ci or dev")->check(CLI::IsMember({"ci", "dev"}));
  create->add_flag("--wait", wait, "wait until the VM is ready");
  create->add_option("--wait-timeout", wait_timeout, "give up waiting after this (default 15m)");
  create->add_option("--idempotency-key", idem,
                     "retry-safe key: the same key returns the same lease");

  std::string state, owner;
  bool all = false;
  size_t limit = 0;
  auto* ls = lease->add_subcommand("ls", "list leases (active ones unless --all)");
  ls->add_option("--pool", pool, "only this pool");
  ls->add_option("--state", state, "only this state");
  ls->add_option("--label", label_args, "only with label key=value")->allow_extra_args(false);
  ls->add_option("--owner", owner, "only this owner (admin tokens)");
  ls->add_flag("--all", all, "include ended leases");
  ls->add_option("--limit", limit, "at most this many");

  std::string id;
  std::vector<std::string> ids;
  auto* show = lease->add_subcommand("show", "show one lease with its history");
  show->add_option("lease", id, "lease id")->required();
  auto* renew = lease->add_subcommand("renew", "extend a lease: expires = now + ttl");
  renew->add_option("lease", id, "lease id")->required();
  renew->add_option("--ttl", ttl, "new ttl from now: 2h, 90m")->required();
  auto* rm = lease->add_subcommand("rm", "release leases (their VMs are destroyed)");
  rm->add_option("leases", ids, "lease ids")->required();

  // ssh, exec, console
  std::string identity;
  bool dry_run = false;
  std::vector<std::string> command;
  auto* ssh = app.add_subcommand("ssh", "ssh into a leased VM (runs the system ssh)");
  ssh->add_option("lease", id, "lease id")->required();
  ssh->add_option("-i,--identity", identity, "private key file for ssh -i");
  ssh->add_flag("--dry-run", dry_run, "print the ssh command instead of running it");
  ssh->add_option("command", command, "remote command (after --)");

  int exec_timeout = 60;
  bool with_stdin = false;
  auto* exec = app.add_subcommand("exec", "run a command in a VM through its guest agent");
  exec->add_option("lease", id, "lease id")->required();
  exec->add_option("command", command, "command and arguments (after --)")->required();
  exec->add_option("--timeout", exec_timeout, "seconds before the command is killed")
      ->check(CLI::Range(1, 3600));
  exec->add_flag("--stdin", with_stdin, "send our standard input to the command");

  size_t console_bytes = 0;
  auto* console = app.add_subcommand("console", "print the tail of a VM's serial console");
  console->add_option("lease", id, "lease id")->required();
  console->add_option("--bytes", console_bytes, "at most this many bytes");

  auto* pools = app.add_subcommand("pools", "list pools and their warm VMs");
  std::string svg_out;
  auto* hosts = app.add_subcommand("hosts", "list hosts and which cores are pinned");
  hosts->add_option("--svg", svg_out, "write the core map SVG of the first host to this file");
  uint64_t since = 0;
  bool no_follow = false;
  auto* events = app.add_subcommand("events", "stream lease and VM events");
  events->add_option("--since", since, "only events after this sequence number");
  events->add_flag("--no-follow", no_follow, "print what there is and exit");

  // bench
  std::string suites, output, lease_filter;
  bool csv = false;
  auto* bench = app.add_subcommand("bench", "benchmark a leased VM: bench LEASE --suite ...");
  bench->add_option("lease", id, "lease id to benchmark");
  bench->add_option("--suite", suites,
                    "network,compression,memory,crypto,storage (default network,compression)");
  bench->add_flag("--wait", wait, "wait for the run to finish");
  bench->add_option("--wait-timeout", wait_timeout, "give up waiting after this (default 15m)");
  auto* bshow = bench->add_subcommand("show", "show a benchmark run");
  bshow->add_option("run", id, "run id")->required();
  auto* bls = bench->add_subcommand("ls", "list benchmark runs");
  bls->add_option("--lease", lease_filter, "only runs of this lease");
  auto* breport = bench->add_subcommand("report", "download a run's report");
  breport->add_option("run", id, "run id")->required();
  breport->add_option("-o,--output", output, "write to this file (default: stdout)");
  breport->add_flag("--csv", csv, "CSV instead of HTML");
  auto* bcompare = bench->add_subcommand("compare", "compare runs: ratios against the first");
  bcompare->add_option("runs", ids, "run ids (at least two)")->required()->expected(2, 16);
  bcompare->add_option("-o,--output", output, "also write the HTML comparison to this file");
  bool allow_different = false;
  bcompare->add_flag("--allow-different", allow_different,
                     "compare runs whose corpora or tool versions differ");

  std::string shell;
  auto* completion = app.add_subcommand("completion", "print a shell completion script");
  completion->add_option("shell", shell, "bash")->required()->check(CLI::IsMember({"bash"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }

  if (completion->parsed()) {
    std::cout << kBashCompletion;
    return kExitOk;
  }

  auto options = resolve_client_options(settings);
  if (!options.is_ok()) {
    std::cerr << "armhive: " << options.status().message() << "\n";
    return kExitUsage;
  }
  const ClientOptions& o = *options;
  auto made = Client::create(o);
  if (!made.is_ok()) {
    std::cerr << "armhive: --server " << made.status().message() << "\n";
    return kExitUsage;
  }
  Client& client = **made;
  auto usage_error = [](const Status& s) {
    std::cerr << "armhive: " << s.message();
    if (!s.field().empty() && s.message().find(s.field()) == std::string::npos) {
      std::cerr << " (" << s.field() << ")";
    }
    std::cerr << "\n";
    return kExitUsage;
  };

  if (create->parsed()) {
    LeaseCreateRequest req;
    req.pool = pool;
    req.purpose = purpose;
    if (!ttl.empty()) {
      auto secs = parse_duration("--ttl", ttl);
      if (!secs.is_ok()) return usage_error(secs.status());
      req.ttl_seconds = *secs;
    }
    auto keys = read_ssh_keys(ssh_keys);
    if (!keys.is_ok()) return usage_error(keys.status());
    req.ssh_keys = *keys;
    auto labels = parse_labels(label_args);
    if (!labels.is_ok()) return usage_error(labels.status());
    req.labels = *labels;
    auto limit_s = parse_duration("--wait-timeout", wait_timeout);
    if (!limit_s.is_ok()) return usage_error(limit_s.status());
    auto r = client.create_lease(req, idem);
    if (!r.is_ok()) return report(r.status(), o);
    LeaseDto l = *r;
    int code = kExitOk;
    if (wait) code = wait_ready(client, l, std::chrono::seconds(*limit_s), o);
    if (json_out) {
      print_json(to_json(l));
    } else if (l.state == "ready") {
      std::cout << l.id << "\n";
      std::cerr << "Lease " << l.id << " is ready" << (l.ssh ? ": " + l.ssh->command : "")
                << " (expires " << relative_time(l.expires_at) << ")\n";
    } else {
      std::cout << l.id << "\n";
      std::cerr << "Lease " << l.id << " is " << l.state
                << (l.reason.empty() ? "" : " (" + l.reason + ")")
                << (wait ? "" : "; `armhive lease show " + l.id + "` follows it") << "\n";
    }
    return code;
  }

  if (ls->parsed()) {
    LeaseQuery q;
    q.pool = pool;
    q.state = state;
    q.owner = owner;
    q.active = !all && state.empty();
    auto labels = parse_labels(label_args);
    if (!labels.is_ok()) return usage_error(labels.status());
    q.labels = *labels;
    std::vector<LeaseDto> items;
    std::string cursor;
    do {
      q.cursor = cursor;
      q.limit = limit > 0 ? std::min<size_t>(limit - items.size(), 1000) : 1000;
      auto page = client.list_leases(q);
      if (!page.is_ok()) return report(page.status(), o);
      for (auto& l : page->items) items.push_back(std::move(l));
      cursor = page->next_cursor;
    } while (!cursor.empty() && (limit == 0 || items.size() < limit));
    if (json_out) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& l : items) arr.push_back(to_json(l));
      print_json(arr);
      return kExitOk;
    }
    Table t({"ID", "POOL", "STATE", "OWNER", "ADDRESS", "EXPIRES", "LABELS"});
    for (const auto& l : items) {
      t.add({l.id, l.pool, l.state, l.owner, l.vm ? or_dash(l.vm->address) : "-",
             relative_time(l.expires_at), labels_text(l.labels)});
    }
    t.print(std::cout);
    return kExitOk;
  }

  if (show->parsed()) {
    auto r = client.get_lease(id);
    if (!r.is_ok()) return report(r.status(), o);
    if (json_out) {
      print_json(to_json(*r));
    } else {
      print_lease(*r, std::cout);
    }
    return kExitOk;
  }

  if (renew->parsed()) {
    auto secs = parse_duration("--ttl", ttl);
    if (!secs.is_ok()) return usage_error(secs.status());
    auto r = client.renew_lease(id, *secs);
    if (!r.is_ok()) return report(r.status(), o);
    if (json_out) {
      print_json(to_json(*r));
    } else {
      std::cout << r->id << " expires " << r->expires_at << " (" << relative_time(r->expires_at)
                << ")\n";
    }
    return kExitOk;
  }

  if (rm->parsed()) {
    int code = kExitOk;
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& one : ids) {
      auto r = client.release_lease(one);
      if (!r.is_ok()) {
        code = std::max(code, report(r.status(), o));
        continue;
      }
      if (json_out) {
        arr.push_back(to_json(*r));
      } else {
        std::cout << r->id << " " << r->state << "\n";
      }
    }
    if (json_out) print_json(arr);
    return code;
  }

  if (ssh->parsed()) {
    auto r = client.get_lease(id);
    if (!r.is_ok()) return report(r.status(), o);
    if (r->state != "ready" || !r->ssh) {
      std::cerr << "armhive: lease " << id << " is " << r->state << ", not ready for ssh"
                << (r->state == "pending" || r->state == "provisioning"
                        ? " (wait with `armhive lease show " + id + "`)"
                        : "")
                << "\n";
      return kExitApi;
    }
    std::vector<std::string> args{"ssh",
                                  "-o",
                                  "StrictHostKeyChecking=no",
                                  "-o",
                                  "UserKnownHostsFile=/dev/null",
                                  "-o",
                                  "LogLevel=ERROR"};
    if (!identity.empty()) {
      args.push_back("-i");
      args.push_back(expand_home(identity));
    }
    if (r->ssh->port != 22) {
      args.push_back("-p");
      args.push_back(std::to_string(r->ssh->port));
    }
    args.push_back(r->ssh->user + "@" + r->ssh->host);
    if (!command.empty()) {
      args.push_back("--");
      args.insert(args.end(), command.begin(), command.end());
    }
    if (dry_run) {
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

  if (exec->parsed()) {
    ExecRequestDto req;
    req.argv = command;
    req.timeout_s = exec_timeout;
    if (with_stdin) {
      req.stdin_data.assign(std::istreambuf_iterator<char>(std::cin),
                            std::istreambuf_iterator<char>());
    }
    auto r = client.exec(id, req);
    if (!r.is_ok()) return report(r.status(), o);
    if (json_out) {
      print_json(to_json(*r));
    } else {
      std::cout.write(r->out.data(), static_cast<std::streamsize>(r->out.size()));
      std::cerr.write(r->err.data(), static_cast<std::streamsize>(r->err.size()));
      std::cout.flush();
    }
    if (r->timed_out) {
      std::cerr << "armhive: the command timed out after " << exec_timeout
                << " s and was killed (raise --timeout)\n";
      return kExitTimeout;
    }
    if (r->signal > 0) return 128 + r->signal;
    return r->exit_code < 0 ? kExitServer : r->exit_code;
  }

  if (console->parsed()) {
    auto r = client.console(id, console_bytes);
    if (!r.is_ok()) return report(r.status(), o);
    std::cout << *r;
    return kExitOk;
  }

  if (pools->parsed()) {
    auto r = client.pools();
    if (!r.is_ok()) return report(r.status(), o);
    if (json_out) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& p : *r) arr.push_back(to_json(p));
      print_json(arr);
      return kExitOk;
    }
    Table t({"POOL", "IMAGE", "VCPUS", "MEMORY", "CPUS", "WARM", "STARTING", "LEASED", "PENDING",
             "MAX", "TTL", "MAX-TTL"});
    for (const auto& p : *r) {
      t.add({p.name, p.image, std::to_string(p.vcpus), std::to_string(p.memory_mib) + "M",
             p.cpu_policy, std::to_string(p.warm), std::to_string(p.starting),
             std::to_string(p.leased), std::to_string(p.pending_leases), std::to_string(p.max),
             format_duration(p.default_ttl_seconds), format_duration(p.max_ttl_seconds)});
    }
    t.print(std::cout);
    return kExitOk;
  }

  if (hosts->parsed()) {
    if (!svg_out.empty()) {
      auto svg = client.hosts_svg();
      if (!svg.is_ok()) return report(svg.status(), o);
      std::ofstream(svg_out) << *svg;
      std::cerr << "wrote " << svg_out << "\n";
    }
    auto r = client.hosts();
    if (!r.is_ok()) return report(r.status(), o);
    if (json_out) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& h : *r) arr.push_back(to_json(h));
      print_json(arr);
      return kExitOk;
    }
    for (const auto& h : *r) {
      int allocated = 0;
      for (const auto& c : h.cores) allocated += (!c.lease_id.empty() || !c.vm.empty()) ? 1 : 0;
      std::cout << h.hostname << " (" << h.arch << ", " << h.cpu_model << ", " << h.accel
                << (h.connected ? "" : ", DISCONNECTED") << "): " << h.cores.size() << " cores, "
                << allocated << " pinned, fragmentation " << h.fragmentation << "\n";
      Table t({"CPU", "NODE", "CLUSTER", "ROLE", "LEASE", "VM", "POOL"});
      for (const auto& c : h.cores) {
        t.add({std::to_string(c.cpu), std::to_string(c.numa_node), std::to_string(c.cluster),
               c.role, or_dash(c.lease_id), or_dash(c.vm), or_dash(c.pool)});
      }
      t.print(std::cout);
    }
    return kExitOk;
  }

  if (events->parsed()) {
    Status s = client.stream_events(since, !no_follow, [&](const EventDto& e) {
      if (json_out) {
        std::cout << dump_json(to_json(e)) << std::endl;
      } else {
        std::cout << e.seq << "  " << e.at << "  " << e.type << "  " << or_dash(e.lease_id) << "  "
                  << or_dash(e.state) << (e.detail.empty() ? "" : "  " + e.detail) << std::endl;
      }
      return true;
    });
    if (!s.is_ok()) return report(s, o);
    return kExitOk;
  }

  if (bshow->parsed()) {
    auto r = client.get_benchmark(id);
    if (!r.is_ok()) return report(r.status(), o);
    if (json_out) {
      auto parsed = [](const std::string& text) {
        auto j = nlohmann::json::parse(text.empty() ? "{}" : text, nullptr, false);
        return j.is_discarded() ? nlohmann::json::object() : j;
      };
      print_json({{"id", r->id},
                  {"lease_id", r->lease_id},
                  {"owner", r->owner},
                  {"vm_name", r->vm_name},
                  {"pool", r->pool},
                  {"host", r->host},
                  {"state", r->state},
                  {"error", r->error},
                  {"created_at", r->created_at},
                  {"finished_at", r->finished_at ? nlohmann::json(*r->finished_at) : nullptr},
                  {"request", parsed(r->request_json)},
                  {"report", parsed(r->report_json)}});
      return kExitOk;
    }
    std::cout << "Run:      " << r->id << "\nLease:    " << r->lease_id << " (" << r->vm_name
              << ", pool " << r->pool << ", host " << r->host << ")\nState:    " << r->state
              << (r->error.empty() ? "" : " (" + r->error + ")") << "\nCreated:  " << r->created_at
              << "\nFinished: " << r->finished_at.value_or("-") << "\nReport:   " << o.server
              << "/v1/benchmarks/" << r->id << "/report.html\n";
    auto rep = nlohmann::json::parse(r->report_json, nullptr, false);
    if (!rep.is_discarded()) print_bench_summary(rep, std::cout);
    return kExitOk;
  }

  if (bls->parsed()) {
    auto r = client.list_benchmarks(lease_filter);
    if (!r.is_ok()) return report(r.status(), o);
    if (json_out) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& b : *r) {
        arr.push_back({{"id", b.id},
                       {"lease_id", b.lease_id},
                       {"state", b.state},
                       {"pool", b.pool},
                       {"host", b.host},
                       {"created_at", b.created_at}});
      }
      print_json(arr);
      return kExitOk;
    }
    Table t({"RUN", "LEASE", "STATE", "POOL", "HOST", "CREATED"});
    for (const auto& b : *r) t.add({b.id, b.lease_id, b.state, b.pool, b.host, b.created_at});
    t.print(std::cout);
    return kExitOk;
  }

  if (breport->parsed()) {
    auto r = client.benchmark_report(id, csv ? "csv" : "html");
    if (!r.is_ok()) return report(r.status(), o);
    if (output.empty()) {
      std::cout << *r;
    } else {
      std::ofstream out(output);
      out << *r;
      if (!out) {
        std::cerr << "armhive: cannot write " << output << "\n";
        return kExitUsage;
      }
      std::cerr << "wrote " << output << "\n";
    }
    return kExitOk;
  }

  if (bcompare->parsed()) {
    auto r = client.compare_benchmarks(ids, "json");
    if (!r.is_ok()) return report(r.status(), o);
    if (std::string why = incomparable_message(nlohmann::json::parse(*r, nullptr, false));
        !why.empty() && !allow_different) {
      std::cerr << why;
      return kExitUsage;
    }
    if (!output.empty()) {
      auto html = client.compare_benchmarks(ids, "html");
      if (!html.is_ok()) return report(html.status(), o);
      std::ofstream(output) << *html;
      std::cerr << "wrote " << output << "\n";
    }
    auto j = nlohmann::json::parse(*r, nullptr, false);
    if (json_out || j.is_discarded() || !j.contains("runs") || !j["runs"].is_array() ||
        !j.contains("metrics") || !j["metrics"].is_array()) {
      std::cout << (j.is_discarded() ? *r : dump_json(j, 2)) << "\n";
      return kExitOk;
    }
    print_compare_settings(j, std::cout);
    // daemon/bench/README.md "Comparison JSON": one row per metric, a value and a ratio
    // (against the first run) column per run.
    std::vector<std::string> header{"METRIC", "UNIT"};
    for (const auto& run : j["runs"]) {
      header.push_back(run.is_object() ? run.value("id", "?") : "?");
      header.push_back("RATIO");
    }
    Table t(header);
    auto cell = [](const nlohmann::json& arr, size_t i, const char* fmt) -> std::string {
      if (!arr.is_array() || i >= arr.size() || !arr[i].is_number()) return "-";
      char buf[64];
      std::snprintf(buf, sizeof buf, fmt, arr[i].get<double>());
      return buf;
    };
    for (const auto& m : j["metrics"]) {
      if (!m.is_object()) continue;
      std::vector<std::string> row{m.value("label", m.value("key", "?")), m.value("unit", "")};
      for (size_t i = 0; i < j["runs"].size(); ++i) {
        row.push_back(cell(m.value("values", nlohmann::json()), i, "%.4g"));
        row.push_back(cell(m.value("ratios", nlohmann::json()), i, "%.2fx"));
      }
      t.add(row);
    }
    t.print(std::cout);
    return kExitOk;
  }

  if (bench->parsed()) {
    if (id.empty()) {
      std::cerr << "armhive: bench needs a LEASE (or one of show, ls, report, compare)\n";
      return kExitUsage;
    }
    nlohmann::json body = nlohmann::json::object();
    if (!suites.empty()) {
      std::vector<std::string> list;
      std::stringstream ss(suites);
      for (std::string s; std::getline(ss, s, ',');) {
        if (!s.empty()) list.push_back(s);
      }
      body["suites"] = list;
    }
    auto limit_s = parse_duration("--wait-timeout", wait_timeout);
    if (!limit_s.is_ok()) return usage_error(limit_s.status());
    auto r = client.start_benchmark(id, dump_json(body));
    if (!r.is_ok()) return report(r.status(), o);
    BenchmarkRunDto run = *r;
    int code = kExitOk;
    if (wait) {
      Progress progress(run.id);
      auto deadline = SteadyClock::now() + std::chrono::seconds(*limit_s);
      while (run.state == "queued" || run.state == "running") {
        progress.update(run.state, "");
        if (SteadyClock::now() >= deadline) {
          code = kExitTimeout;
          break;
        }
        std::this_thread::sleep_for(std::chrono::seconds(2));
        auto next = client.get_benchmark(run.id);
        if (!next.is_ok()) {
          progress.finish();
          return report(next.status(), o);
        }
        run = *next;
      }
      progress.finish();
      if (run.state == "failed") {
        std::cerr << "armhive: benchmark " << run.id << " failed: " << run.error << "\n";
        code = kExitServer;
      } else if (code == kExitTimeout) {
        std::cerr << "armhive: benchmark " << run.id << " still " << run.state << "\n";
      }
    }
    if (json_out) {
      nlohmann::json j = {
          {"id", run.id}, {"lease_id", run.lease_id}, {"state", run.state}, {"error", run.error}};
      print_json(j);
    } else {
      std::cout << run.id << "\n";
      std::cerr << "Benchmark " << run.id << " " << run.state << ". Report: `armhive bench report "
                << run.id << " -o report.html` or " << o.server << "/v1/benchmarks/" << run.id
                << "/report.html\n";
    }
    return code;
  }

  std::cerr << app.help();
  return kExitUsage;
}

}  // namespace
}  // namespace armhive

int main(int argc, char** argv) { return armhive::run(argc, argv); }
