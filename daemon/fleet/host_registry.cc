#include "daemon/fleet/host_registry.h"

#include <spdlog/spdlog.h>

#include <thread>

#include "base/deadline_worker.h"
#include "base/libvirt_uri.h"
#include "daemon/virt/host_discovery.h"
#include "daemon/virt/network_guard.h"

namespace armhive {
namespace {

using Host = HostRegistry::Host;

// "60s", or "500ms" below a second.
std::string seconds_text(std::chrono::milliseconds d) {
  if (d < std::chrono::seconds(1)) return std::to_string(d.count()) + "ms";
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + "s";
}

// Everything for one host, on its worker: it owns what it makes (a late return after the
// deadline frees it there).
Result<std::shared_ptr<Host>> bring_up(const HostRegistryOptions& options, const HostSetup& setup) {
  auto host = std::make_shared<Host>();
  host->setup = setup;
  host->remote = is_remote_uri(setup.uri);
  if (host->remote && setup.guard_here && !options.networks.empty()) {
    // This machine's nftables do not reach that host's guests.
    return invalid_argument("network_guard", "a remote host's network guard is the host's own");
  }
  ARMHIVE_ASSIGN_OR_RETURN(Connection conn, Connection::open(setup.uri));
  host->connection = std::make_unique<Connection>(std::move(conn));

  DiscoveryOptions discovery;
  if (host->remote) {
    discovery.sysfs_root.clear();  // this machine's sysfs says nothing of that host
    discovery.kvm_from_capabilities = true;
  }
  if (!setup.l2_clusters.empty()) discovery.clusters = setup.l2_clusters;
  ARMHIVE_ASSIGN_OR_RETURN(host->topology, discover_host(*host->connection, discovery));
  host->topology.hostname = setup.name;

  for (const NetworkSpec& n : options.networks) {
    ARMHIVE_RETURN_IF_ERROR(ensure_network(*host->connection, n).annotate("network " + n.name));
    if (setup.guard_here && options.guard_runner != nullptr) {
      // armhive's own nftables table: guests never reach this host's services.
      ARMHIVE_RETURN_IF_ERROR(
          apply_network_guard(*options.guard_runner, n).annotate("network guard of " + n.name));
    }
  }

  LibvirtHypervisorOptions hv;
  hv.uri = setup.uri;
  hv.state_dir = setup.vm_dir;
  hv.storage_pool = options.storage_pool;
  hv.accel = host->topology.accel;
  ARMHIVE_ASSIGN_OR_RETURN(host->hypervisor, LibvirtHypervisor::open(hv));
  if (host->remote) {
    host->shipping = std::make_unique<ShippingImageSource>(*host->connection, setup.name,
                                                           options.image_pool, setup.image_dir,
                                                           options.catalogue, options.ship_retry);
  }
  ARMHIVE_ASSIGN_OR_RETURN(host->sets, make_cpu_sets(host->topology, setup.cpus));
  return host;
}

// Brings the hosts up at once, each on its own worker under the deadline: a host that hangs
// costs connect_timeout, once. The results in order; an error names its host.
std::vector<Result<std::shared_ptr<Host>>> bring_up_all(const HostRegistryOptions& options,
                                                        const std::vector<HostSetup>& setups) {
  std::vector<std::unique_ptr<DeadlineWorker>> workers;
  std::vector<std::optional<Result<std::shared_ptr<Host>>>> results(setups.size());
  std::vector<std::thread> callers;
  for (const HostSetup& s : setups) workers.push_back(std::make_unique<DeadlineWorker>(s.name));
  for (size_t i = 0; i < setups.size(); ++i) {
    callers.emplace_back([&, i] {
      results[i] = workers[i]->call<std::shared_ptr<Host>>(
          options.connect_timeout,
          [options, setup = setups[i]]() { return bring_up(options, setup); });
    });
  }
  for (std::thread& t : callers) t.join();
  std::vector<Result<std::shared_ptr<Host>>> out;
  for (size_t i = 0; i < setups.size(); ++i) {
    const HostSetup& s = setups[i];
    Result<std::shared_ptr<Host>>& r = *results[i];
    if (r.is_ok()) {
      out.push_back(std::move(r));
      continue;
    }
    Status st = r.status().code() == ErrorCode::kTimeout
                    ? Status(ErrorCode::kTimeout, "libvirt did not answer within " +
                                                      seconds_text(options.connect_timeout) +
                                                      " while connecting and discovering the host")
                    : r.status();
    out.push_back(st.annotate("host " + s.name + " (" + s.uri + ")"));
  }
  return out;
}

void log_host(const Host& h) {
  const HostSetup& s = h.setup;
  spdlog::info(
      "host {} ({}): {} {} CPUs, {} NUMA node(s), {} MiB, {}; CPUs: housekeeping {}, "
      "dedicated {}, shared {}",
      s.name, s.uri, h.topology.arch, h.topology.cpus.size(), h.topology.cells.size(),
      h.topology.memory_kib / 1024,
      h.topology.accel == Accel::kKvm ? "KVM" : "TCG (emulated guests)",
      format_cpu_list(h.sets.housekeeping), format_cpu_list(h.sets.dedicated),
      format_cpu_list(h.sets.shared));
}

}  // namespace

Result<std::unique_ptr<HostRegistry>> HostRegistry::open(HostRegistryOptions options,
                                                         std::vector<HostSetup> setups) {
  if (setups.empty()) return invalid_argument("hosts", "no libvirt host to drive");
  std::vector<std::shared_ptr<Host>> hosts;
  for (Result<std::shared_ptr<Host>>& r : bring_up_all(options, setups)) {
    if (!r.is_ok()) return r.status();
    log_host(**r);
    hosts.push_back(std::move(r).value());
  }
  return std::unique_ptr<HostRegistry>(new HostRegistry(std::move(options), std::move(hosts)));
}

HostRegistry::~HostRegistry() noexcept = default;

Result<std::shared_ptr<HostRegistry::Host>> HostRegistry::add(HostSetup setup) {
  if (host(setup.name) != nullptr) {
    return Status(ErrorCode::kConflict, "host '" + setup.name + "' exists", setup.name, "name");
  }
  Result<std::shared_ptr<Host>> up = std::move(bring_up_all(options_, {setup}).front());
  if (!up.is_ok()) return up.status();
  MutexLock lock(mu_);
  for (const auto& h : hosts_) {
    if (h->setup.name == setup.name) {  // added by another caller meanwhile
      return Status(ErrorCode::kConflict, "host '" + setup.name + "' exists", setup.name, "name");
    }
  }
  log_host(**up);
  hosts_.push_back(*up);
  return up;
}

Status HostRegistry::remove(const std::string& name) {
  MutexLock lock(mu_);
  for (auto it = hosts_.begin(); it != hosts_.end(); ++it) {
    if ((*it)->setup.name != name) continue;
    retired_.push_back(*it);
    hosts_.erase(it);
    return Status::ok();
  }
  return not_found("no host named '" + name + "'", name);
}

Result<EngineHost> HostRegistry::engine_host(const Host& h) const {
  auto cores = CoreAllocator::create(h.topology, h.sets);
  if (!cores.is_ok()) return cores.status().annotate("host " + h.setup.name);
  ImageResolver images = options_.catalogue;
  if (h.shipping) {
    ShippingImageSource* source = h.shipping.get();
    images = [source](const std::string& name) { return source->resolve(name); };
  }
  return EngineHost{h.setup.name,      h.hypervisor.get(), std::move(cores).value(),
                    std::move(images), h.setup.labels,     h.setup.uri};
}

Result<std::vector<EngineHost>> HostRegistry::engine_hosts() const {
  std::vector<EngineHost> out;
  for (const std::shared_ptr<Host>& h : hosts()) {
    ARMHIVE_ASSIGN_OR_RETURN(EngineHost e, engine_host(*h));
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::shared_ptr<HostRegistry::Host>> HostRegistry::hosts() const {
  MutexLock lock(mu_);
  return hosts_;
}

std::shared_ptr<HostRegistry::Host> HostRegistry::host(const std::string& name) const {
  MutexLock lock(mu_);
  for (const std::shared_ptr<Host>& h : hosts_) {
    if (h->setup.name == name) return h;
  }
  return nullptr;
}

}  // namespace armhive
