// `armhive pools`, `armhive hosts` (and `hosts drain|undrain|maintenance|add|rm NAME`),
// `armhive events`: what the cluster has and does; `armhive cluster`: the armhived instances
// themselves, who leads.
#include <fstream>
#include <iostream>

#include "api/json.h"
#include "base/validation.h"
#include "cli/cluster_view.h"
#include "cli/command_group.h"
#include "cli/output.h"
#include "cli/table.h"

namespace armhive {
namespace {

class ClusterCommands final : public CommandGroup {
 public:
  void add_to(CLI::App& app) override {
    pools_ = app.add_subcommand("pools", "list pools and their warm VMs");
    hosts_ = app.add_subcommand("hosts", "list hosts and which cores are pinned");
    hosts_->add_option("--svg", svg_out_, "write the core map SVG of the first host to this file");
    drain_ = hosts_->add_subcommand(
        "drain", "stop new VMs on a host; its leases run to their end (admin token)");
    undrain_ = hosts_->add_subcommand("undrain", "let a drained host take new VMs (admin token)");
    maintenance_ = hosts_->add_subcommand(
        "maintenance", "as drain, shown as maintenance, before working on it (admin token)");
    for (CLI::App* sub : {drain_, undrain_, maintenance_}) {
      sub->add_option("name", host_name_, "the host, as `armhive hosts` names it")
          ->required()
          ->check(CLI::Validator(
              [](const std::string& v) {
                return v.empty() ? std::string("give the host's name, as `armhive hosts` shows it")
                                 : std::string();
              },
              "NAME"));
    }
    add_ = hosts_->add_subcommand(
        "add", "drive one more libvirt host, kept across restarts (admin token)");
    add_->add_option("name", added_.name, "its name in armhive (lower-case letters, digits, -_.)")
        ->required();
    add_->add_option("--uri", added_.libvirt_uri,
                     "its libvirt URI: qemu+tls://hc2.lab/system, qemu+ssh://armhive@tx1/system")
        ->required();
    add_->add_option("--label", add_labels_, "KEY=VALUE that pools select it by (repeatable)");
    add_->add_option("--housekeeping", housekeeping_, "cpuset for the host and emulator threads");
    add_->add_option("--dedicated", dedicated_, "cpuset for dedicated VM cores");
    add_->add_option("--shared", shared_, "cpuset for shared (overcommitted) VM cores");
    add_->add_option("--l2-cluster", added_.l2_clusters,
                     "CPUs sharing an L2, as a cpuset (repeatable; libvirt lists only L3)");
    add_->add_option("--vm-dir", added_.vm_dir, "on the host: where the VMs' overlays live");
    add_->add_option("--image-dir", added_.image_dir, "on the host: where images are shipped");
    add_->add_option("--network-guard", added_.network_guard,
                     "who guards its guest networks: armhived (a local host) or host")
        ->check(CLI::IsMember({"armhived", "host"}));
    remove_ = hosts_->add_subcommand(
        "rm", "stop driving a host added with `hosts add` (drain it first; admin token)");
    remove_->add_option("name", host_name_, "the host, as `armhive hosts` names it")->required();
    cluster_ = app.add_subcommand(
        "cluster",
        "the armhived instances sharing the database: who leads since when, each one's last "
        "contact (any instance answers, a standby too; --json: the raw document)");
    events_ = app.add_subcommand("events", "stream lease and VM events");
    events_->add_option("--since", since_, "only events after this sequence number");
    events_->add_flag("--no-follow", no_follow_, "print what there is and exit");
  }

  bool parsed() const override {
    return pools_->parsed() || hosts_->parsed() || events_->parsed() || cluster_->parsed();
  }

  int run(const CommandContext& ctx) override {
    if (pools_->parsed()) return pools(*ctx.client, ctx.json_out);
    if (drain_->parsed()) return host_admin(*ctx.client, ctx.json_out, "drain");
    if (undrain_->parsed()) return host_admin(*ctx.client, ctx.json_out, "undrain");
    if (maintenance_->parsed()) return host_admin(*ctx.client, ctx.json_out, "maintenance");
    if (add_->parsed()) return add_host(*ctx.client, ctx.json_out);
    if (remove_->parsed()) return remove_host(*ctx.client);
    if (hosts_->parsed()) return hosts(*ctx.client, ctx.json_out);
    if (cluster_->parsed()) return cluster(*ctx.client, ctx.json_out);
    return events(*ctx.client, ctx.json_out);
  }

 private:
  static int cluster(Client& client, bool json_out) {
    auto r = client.cluster();
    if (!r.is_ok()) return report(r.status());
    if (json_out) {
      print_json(to_json(*r));
      return kExitOk;
    }
    print_cluster(*r, std::cout);
    return kExitOk;
  }

  static int pools(Client& client, bool json_out) {
    auto r = client.pools();
    if (!r.is_ok()) return report(r.status());
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
    // Pools on min_warm = "auto": the target and its reason, one line each.
    for (const auto& p : *r) {
      if (!p.warm_target) continue;
      std::cout << p.name << ": min_warm auto (" << p.warm_target->auto_min << ".."
                << p.warm_target->auto_max << "): target " << p.warm_target->target
                << " warm: " << p.warm_target->reason << "\n";
    }
    return kExitOk;
  }

  int hosts(Client& client, bool json_out) {
    if (!svg_out_.empty()) {
      auto svg = client.hosts_svg();
      if (!svg.is_ok()) return report(svg.status());
      std::ofstream(svg_out_) << *svg;
      std::cerr << "wrote " << svg_out_ << "\n";
    }
    auto r = client.hosts();
    if (!r.is_ok()) return report(r.status());
    if (json_out) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& h : *r) arr.push_back(to_json(h));
      print_json(arr);
      return kExitOk;
    }
    for (const auto& h : *r) {
      int allocated = 0;
      for (const auto& c : h.cores) allocated += (!c.lease_id.empty() || !c.vm.empty()) ? 1 : 0;
      // A host never reached since armhived started: no CPUs known, so no core table.
      const bool never_reached = h.accel == "unknown";
      if (never_reached) {
        std::cout << h.hostname << " (" << h.state << "): never reached, CPUs not known yet\n";
      } else {
        std::cout << h.hostname << " (" << h.arch << ", " << h.cpu_model << ", " << h.accel
                  << (h.state == "ok" ? "" : ", " + h.state) << "): " << h.cores.size()
                  << " cores, " << allocated << " pinned, fragmentation " << h.fragmentation
                  << "\n";
      }
      if (!h.uri.empty() || !h.labels.empty()) {
        std::string labels;
        for (const auto& [k, v] : h.labels) labels += (labels.empty() ? "" : ",") + k + "=" + v;
        std::cout << "  " << (h.uri.empty() ? "" : "libvirt " + h.uri)
                  << (labels.empty()
                          ? ""
                          : (h.uri.empty() ? "" : ", ") + std::string("labels ") + labels)
                  << "\n";
      }
      // The last failure stays shown after the host is ok again: it says what went wrong.
      if (never_reached) {
        std::cout << "  unreachable since " << h.unreachable_since
                  << ": armhived keeps trying it and places VMs on it once it answers\n";
      } else if (!h.unreachable_since.empty()) {
        std::cout << "  unreachable since " << h.unreachable_since
                  << ": its leases show host_unreachable, then lost after the grace period\n";
      }
      if (!h.last_error.empty()) std::cout << "  last error: " << h.last_error << "\n";
      if (never_reached) continue;
      Table t({"CPU", "NODE", "CLUSTER", "ROLE", "LEASE", "VM", "POOL"});
      for (const auto& c : h.cores) {
        t.add({std::to_string(c.cpu), std::to_string(c.numa_node), std::to_string(c.cluster),
               c.role, or_dash(c.lease_id), or_dash(c.vm), or_dash(c.pool)});
      }
      t.print(std::cout);
    }
    return kExitOk;
  }

  int host_admin(Client& client, bool json_out, const std::string& action) {
    auto r = client.set_host_admin(host_name_, action);
    if (!r.is_ok()) {
      // report()'s hints are about leases; these are about hosts.
      const Status& s = r.status();
      if (s.code() != ErrorCode::kNotFound && s.code() != ErrorCode::kPermissionDenied) {
        return report(s);
      }
      std::cerr << "armhive: " << s.message() << "\n";
      std::cerr << (s.code() == ErrorCode::kNotFound
                        ? "hint: `armhive hosts` lists the hosts by name\n"
                        : "hint: only an admin token may " + action +
                              " a host (--token or ARMHIVE_TOKEN)\n");
      return exit_code_for(s);
    }
    if (json_out) {
      print_json(to_json(*r));
      return kExitOk;
    }
    int leased = 0;
    for (const auto& c : r->cores) leased += c.lease_id.empty() ? 0 : 1;
    if (action == "undrain") {
      std::cout << r->hostname << ": takes new VMs again; the pools refill\n";
    } else {
      std::cout
          << r->hostname << ": " << r->state
          << ": takes no new VMs; its free warm VMs are destroyed and its leases run to their "
             "end ("
          << leased << " cores leased now); `armhive hosts undrain " << r->hostname
          << "` undoes it\n";
    }
    return kExitOk;
  }

  int add_host(Client& client, bool json_out) {
    for (const std::string& kv : add_labels_) {
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::cerr << "armhive: --label takes KEY=VALUE, got '" << kv << "'\n";
        return kExitUsage;
      }
      added_.labels[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (!housekeeping_.empty()) added_.housekeeping_cpus = housekeeping_;
    if (!dedicated_.empty()) added_.dedicated_cpus = dedicated_;
    if (!shared_.empty()) added_.shared_cpus = shared_;
    // Connecting and discovering can take the daemon's libvirt_timeout: say what happens.
    std::cerr << "connecting armhived to " << added_.name << " (" << added_.libvirt_uri
              << ") through libvirt...\n";
    auto r = client.add_host(added_);
    if (!r.is_ok()) {
      const Status& st = r.status();
      std::cerr << "armhive: host " << added_.name << " not added: " << st.message()
                << (st.field().empty() ? "" : " (field " + st.field() + ")") << "\n";
      if (st.code() == ErrorCode::kUnavailable) {
        std::cerr << "hint: armhived must reach the host's libvirtd itself (TLS certificates in "
                     "pkipath, or the SSH key for qemu+ssh://)\n";
      }
      return exit_code_for(st);
    }
    if (json_out) {
      print_json(to_json(*r));
      return kExitOk;
    }
    std::cout << r->hostname << ": driven (" << r->arch << ", " << r->cpu_model << ", " << r->accel
              << ", " << r->cores.size()
              << " CPUs); the pools its labels match use it once it holds their images\n";
    return kExitOk;
  }

  int remove_host(Client& client) {
    Status s = client.remove_host(host_name_);
    if (!s.is_ok()) {
      std::cerr << "armhive: " << s.message() << "\n";
      if (s.code() == ErrorCode::kConflict && s.message().find("drain") != std::string::npos) {
        std::cerr << "hint: armhive hosts drain " << host_name_
                  << ", then wait for its leases to end (armhive hosts shows its cores)\n";
      }
      return exit_code_for(s);
    }
    std::cout << host_name_ << ": removed; armhived no longer drives it\n";
    return kExitOk;
  }

  int events(Client& client, bool json_out) {
    Status s = client.stream_events(since_, !no_follow_, [&](const EventDto& e) {
      if (json_out) {
        std::cout << dump_json(to_json(e)) << std::endl;
      } else {
        std::cout << e.seq << "  " << e.at << "  " << e.type << "  " << or_dash(e.lease_id) << "  "
                  << or_dash(e.state) << (e.detail.empty() ? "" : "  " + e.detail) << std::endl;
      }
      return true;
    });
    if (!s.is_ok()) return report(s);
    return kExitOk;
  }

  CLI::App* pools_ = nullptr;
  CLI::App* hosts_ = nullptr;
  CLI::App* drain_ = nullptr;
  CLI::App* undrain_ = nullptr;
  CLI::App* maintenance_ = nullptr;
  CLI::App* add_ = nullptr;
  CLI::App* remove_ = nullptr;
  HostCreateDto added_;
  std::vector<std::string> add_labels_;
  std::string housekeeping_, dedicated_, shared_;
  std::string host_name_;
  CLI::App* events_ = nullptr;
  CLI::App* cluster_ = nullptr;
  std::string svg_out_;
  uint64_t since_ = 0;
  bool no_follow_ = false;
};

}  // namespace

std::unique_ptr<CommandGroup> make_cluster_commands() {
  return std::make_unique<ClusterCommands>();
}

}  // namespace armhive
