// `armhive lease create|ls|show|renew|rm`.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>

#include "api/json.h"
#include "base/validation.h"
#include "cli/command_group.h"
#include "cli/config.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "cli/table.h"

namespace armhive {
namespace {

using SteadyClock = std::chrono::steady_clock;

// "position 3: at_max_starting (max_starting VMs are booting)".
std::string queue_text(const LeaseQueueDto& q) {
  static const std::map<std::string, std::string> kMeaning = {
      {"warm_vm_free", "a warm VM is free for it"},
      {"warm_vm_booting", "a warm VM is booting for it"},
      {"host_unavailable", "the host is not available"},
      {"host_draining", "the host is draining: no new VMs until it is undrained"},
      {"image_unavailable", "the pool's image is not available"},
      {"backing_off", "the pool backs off after failed boots"},
      {"at_pool_max", "the pool is at max, waiting for a release"},
      {"at_max_starting", "the pool has max_starting VMs booting"},
      {"no_free_cores", "no free cores on the host"},
      {"scheduling", "its VM boots next"}};
  auto it = kMeaning.find(q.reason);
  return "position " + std::to_string(q.position) + ": " + q.reason +
         (it == kMeaning.end() ? "" : " (" + it->second + ")");
}

// What its VM used: two lines, "(final)" once the lease ended, else as of the last sample.
void print_usage(const LeaseUsageDto& u, std::ostream& out) {
  out << "Usage:    CPU " << seconds_text(u.cpu_seconds) << " over " << seconds_text(u.wall_seconds)
      << " (" << cpus_text(u.cpu_seconds, u.wall_seconds) << " CPUs), peak memory "
      << bytes_text(u.peak_memory_bytes)
      << (u.final ? " (final)" : " (as of " + relative_time(u.sampled_at) + ")") << "\n"
      << "          disk written " << bytes_text(u.disk_write_bytes) << ", network in "
      << bytes_text(u.net_rx_bytes) << ", out " << bytes_text(u.net_tx_bytes) << "\n";
}

void print_lease(const LeaseDto& l, std::ostream& out) {
  out << "Lease:    " << l.id << "\n"
      << "Pool:     " << l.pool << "\n"
      << "Owner:    " << l.owner << "\n"
      << "State:    " << l.state << (l.reason.empty() ? "" : " (" + l.reason + ")") << "\n"
      << (l.queue ? "Queue:    " + queue_text(*l.queue) + "\n" : "") << "Purpose:  " << l.purpose
      << "\n"
      << "Labels:   " << labels_text(l.labels) << "\n"
      << "Created:  " << l.created_at << "\n"
      << "Expires:  " << l.expires_at << " (" << relative_time(l.expires_at) << ", ttl "
      << format_duration(l.ttl_seconds) << ")\n";
  if (l.vm) {
    std::vector<std::string> cpus;
    for (int c : l.vm->cpus) cpus.push_back(std::to_string(c));
    out << "VM:       " << l.vm->name << " at " << or_dash(l.vm->address);
    if (!l.vm->host.empty()) out << " on host " << l.vm->host;
    out << ", host CPUs " << (cpus.empty() ? "-" : join(cpus, ",")) << "\n";
  }
  if (l.ssh) {
    out << "SSH:      " << l.ssh->command << "\n";
  } else if (l.state == "ready") {
    // armhived offers none for a VM it cannot reach (a remote host's own network).
    out << "SSH:      none through armhived (use armhive exec or armhive cp)\n";
  }
  if (l.usage) print_usage(*l.usage, out);
  if (!l.history.empty()) {
    out << "History:\n";
    for (const auto& t : l.history) {
      out << "  " << t.at << "  " << t.from << " -> " << t.to
          << (t.reason.empty() ? "" : "  " + t.reason) << "\n";
    }
  }
}

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
int wait_ready(Client& client, LeaseDto& lease, std::chrono::seconds limit) {
  Progress progress(lease.id);
  auto deadline = SteadyClock::now() + limit;
  while (lease.state != "ready") {
    // One short line (a spinner redraws it): the code only; `lease show` explains it.
    progress.update(
        lease.state,
        lease.reason + (lease.queue ? "; queue position " + std::to_string(lease.queue->position) +
                                          ": " + lease.queue->reason
                                    : std::string()));
    if (lease.state == "failed" || lease.state == "released" || lease.state == "expired" ||
        lease.state == "lost" || lease.state == "releasing") {
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
    // While queued, poll more often than the long-poll's own wake-up (readiness) so that the
    // position shown moves as the leases ahead are served.
    auto poll = lease.queue ? std::chrono::seconds(5) : std::chrono::seconds(30);
    auto r = client.wait_lease(lease.id, std::min(left, poll));
    if (!r.is_ok()) {
      progress.finish();
      return report(r.status());
    }
    lease = *r;
  }
  progress.finish();
  return kExitOk;
}

class LeaseCommands final : public CommandGroup {
 public:
  void add_to(CLI::App& app) override {
    lease_ = app.add_subcommand("lease", "create, list, show, renew and release leases");
    lease_->require_subcommand(1);
    create_ = lease_->add_subcommand("create", "lease a VM from a pool");
    create_->add_option("--pool", pool_, "pool name")->required();
    create_->add_option("--ttl", ttl_, "lease duration: 2h, 90m, 3600 (default: the pool's)");
    create_
        ->add_option("--ssh-key", ssh_keys_,
                     "public key file (or the private key next to its .pub)")
        ->allow_extra_args(false);
    create_->add_option("--label", label_args_, "label key=value (repeatable)")
        ->allow_extra_args(false);
    create_->add_option("--purpose", purpose_, "ci or dev")->check(CLI::IsMember({"ci", "dev"}));
    create_->add_flag("--wait", wait_, "wait until the VM is ready");
    create_->add_option("--wait-timeout", wait_timeout_,
                        "give up waiting after this (default 15m)");
    create_->add_option("--idempotency-key", idem_,
                        "retry-safe key: the same key returns the same lease");

    ls_ = lease_->add_subcommand("ls", "list leases (active ones unless --all)");
    ls_->add_option("--pool", pool_, "only this pool");
    ls_->add_option("--state", state_, "only this state");
    ls_->add_option("--label", label_args_, "only with label key=value")->allow_extra_args(false);
    ls_->add_option("--owner", owner_, "only this owner (admin tokens)");
    ls_->add_flag("--all", all_, "include ended leases");
    ls_->add_option("--limit", limit_, "at most this many");

    show_ = lease_->add_subcommand("show", "show one lease with its history");
    show_->add_option("lease", id_, "lease id")->required();
    renew_ = lease_->add_subcommand("renew", "extend a lease: expires = now + ttl");
    renew_->add_option("lease", id_, "lease id")->required();
    renew_->add_option("--ttl", ttl_, "new ttl from now: 2h, 90m")->required();
    rm_ = lease_->add_subcommand("rm", "release leases (their VMs are destroyed)");
    rm_->add_option("leases", ids_, "lease ids")->required();
  }

  bool parsed() const override { return lease_->parsed(); }

  int run(const CommandContext& ctx) override {
    if (create_->parsed()) return create(*ctx.client, ctx.json_out);
    if (ls_->parsed()) return list(*ctx.client, ctx.json_out);
    if (show_->parsed()) return show(*ctx.client, ctx.json_out);
    if (renew_->parsed()) return renew(*ctx.client, ctx.json_out);
    return release(*ctx.client, ctx.json_out);
  }

 private:
  int create(Client& client, bool json_out) {
    LeaseCreateRequest req;
    req.pool = pool_;
    req.purpose = purpose_;
    if (!ttl_.empty()) {
      auto secs = parse_duration("--ttl", ttl_);
      if (!secs.is_ok()) return usage_error(secs.status());
      req.ttl_seconds = *secs;
    }
    auto keys = read_ssh_keys(ssh_keys_);
    if (!keys.is_ok()) return usage_error(keys.status());
    req.ssh_keys = *keys;
    auto labels = parse_labels(label_args_);
    if (!labels.is_ok()) return usage_error(labels.status());
    req.labels = *labels;
    auto limit_s = parse_duration("--wait-timeout", wait_timeout_);
    if (!limit_s.is_ok()) return usage_error(limit_s.status());
    auto r = client.create_lease(req, idem_);
    if (!r.is_ok()) return report(r.status());
    LeaseDto l = *r;
    int code = kExitOk;
    if (wait_) code = wait_ready(client, l, std::chrono::seconds(*limit_s));
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
                << (wait_ ? "" : "; `armhive lease show " + l.id + "` follows it") << "\n";
    }
    return code;
  }

  int list(Client& client, bool json_out) {
    LeaseQuery q;
    q.pool = pool_;
    q.state = state_;
    q.owner = owner_;
    q.active = !all_ && state_.empty();
    auto labels = parse_labels(label_args_);
    if (!labels.is_ok()) return usage_error(labels.status());
    q.labels = *labels;
    std::vector<LeaseDto> items;
    std::string cursor;
    do {
      q.cursor = cursor;
      q.limit = limit_ > 0 ? std::min<size_t>(limit_ - items.size(), 1000) : 1000;
      auto page = client.list_leases(q);
      if (!page.is_ok()) return report(page.status());
      for (auto& l : page->items) items.push_back(std::move(l));
      cursor = page->next_cursor;
    } while (!cursor.empty() && (limit_ == 0 || items.size() < limit_));
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

  int show(Client& client, bool json_out) {
    auto r = client.get_lease(id_);
    if (!r.is_ok()) return report(r.status());
    if (json_out) {
      print_json(to_json(*r));
    } else {
      print_lease(*r, std::cout);
    }
    return kExitOk;
  }

  int renew(Client& client, bool json_out) {
    auto secs = parse_duration("--ttl", ttl_);
    if (!secs.is_ok()) return usage_error(secs.status());
    auto r = client.renew_lease(id_, *secs);
    if (!r.is_ok()) return report(r.status());
    if (json_out) {
      print_json(to_json(*r));
    } else {
      std::cout << r->id << " expires " << r->expires_at << " (" << relative_time(r->expires_at)
                << ")\n";
    }
    return kExitOk;
  }

  int release(Client& client, bool json_out) {
    int code = kExitOk;
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& one : ids_) {
      auto r = client.release_lease(one);
      if (!r.is_ok()) {
        code = std::max(code, report(r.status()));
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

  CLI::App* lease_ = nullptr;
  CLI::App* create_ = nullptr;
  CLI::App* ls_ = nullptr;
  CLI::App* show_ = nullptr;
  CLI::App* renew_ = nullptr;
  CLI::App* rm_ = nullptr;
  std::string pool_, ttl_, purpose_ = "ci", idem_, wait_timeout_ = "15m", state_, owner_, id_;
  std::vector<std::string> ssh_keys_, label_args_, ids_;
  bool wait_ = false;
  bool all_ = false;
  size_t limit_ = 0;
};

}  // namespace

std::unique_ptr<CommandGroup> make_lease_commands() { return std::make_unique<LeaseCommands>(); }

}  // namespace armhive
