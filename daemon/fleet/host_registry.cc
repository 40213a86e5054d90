#include "daemon/fleet/host_registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>

#include "base/deadline_worker.h"
#include "base/libvirt_uri.h"
#include "daemon/virt/guest_filter.h"
#include "daemon/virt/host_discovery.h"
#include "daemon/virt/image_shipper.h"
#include "daemon/virt/network_guard.h"
#include "daemon/virt/storage.h"

namespace armhive {
namespace {

using Host = HostRegistry::Host;

// "60s", or "500ms" below a second.
std::string seconds_text(std::chrono::milliseconds d) {
  if (d < std::chrono::seconds(1)) return std::to_string(d.count()) + "ms";
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + "s";
}

// How a host's capabilities become its topology, the same whether they come from the host
// now or from an earlier run.
DiscoveryOptions discovery_options(const HostSetup& setup, bool remote) {
  DiscoveryOptions discovery;
  if (remote) {
    discovery.sysfs_root.clear();  // this machine's sysfs says nothing of that host
    discovery.kvm_from_capabilities = true;
  }
  if (!setup.l2_clusters.empty()) discovery.clusters = setup.l2_clusters;
  return discovery;
}

// Setups that no connection can cure: refused at start whatever the host answers.
Status check_setup(const HostRegistryOptions& options, const HostSetup& setup) {
  if (is_remote_uri(setup.uri) && setup.guard_here && !options.networks.empty()) {
    // This machine's nftables do not reach that host's guests.
    return invalid_argument("network_guard", "a remote host's network guard is the host's own");
  }
  return Status::ok();
}

// Everything for one host, on its worker: it owns what it makes (a late return after the
// deadline frees it there).
Result<std::shared_ptr<Host>> bring_up(const HostRegistryOptions& options, const HostSetup& setup) {
  auto host = std::make_shared<Host>();
  host->setup = setup;
  host->remote = is_remote_uri(setup.uri);
  ARMHIVE_RETURN_IF_ERROR(check_setup(options, setup));
  ARMHIVE_ASSIGN_OR_RETURN(Connection conn, options.open_connection(setup.uri));
  host->connection = std::make_unique<Connection>(std::move(conn));

  ARMHIVE_ASSIGN_OR_RETURN(host->topology,
                           discover_host(*host->connection, discovery_options(setup, host->remote),
                                         &host->capabilities));
  host->topology.hostname = setup.name;

  bool filter_defined = false;
  LibvirtHypervisorOptions hv;
  for (const NetworkSpec& n : options.networks) {
    ARMHIVE_RETURN_IF_ERROR(ensure_network(*host->connection, n).annotate("network " + n.name));
    if (n.isolate_guests) {
      if (!filter_defined) {
        ARMHIVE_RETURN_IF_ERROR(ensure_guest_filter(*host->connection)
                                    .annotate("isolating the guests of network " + n.name));
        filter_defined = true;
      }
      hv.isolated_networks.insert(n.name);
    }
    if (setup.guard_here && options.guard_runner != nullptr) {
      // armhive's own nftables table: guests never reach this host's services.
      ARMHIVE_RETURN_IF_ERROR(
          apply_network_guard(*options.guard_runner, n).annotate("network guard of " + n.name));
    }
  }

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
  host->worker = std::make_unique<DeadlineWorker>(setup.name);
  return host;
}

// The volume names a resolved image's files have on the host (their paths' last parts).
void add_volume_names(const BootImage& image, std::set<std::string>& out) {
  for (const std::string* path : {&image.base_disk, &image.kernel, &image.initrd}) {
    if (!path->empty()) out.insert(std::filesystem::path(*path).filename().string());
  }
}

// A failed bring-up as the operator reads it: a missed deadline says how long was waited.
Status bring_up_failure(const Status& st, const HostRegistryOptions& options) {
  if (st.code() != ErrorCode::kTimeout) return st;
  return Status(ErrorCode::kTimeout, "libvirt did not answer within " +
                                         seconds_text(options.connect_timeout) +
                                         " while connecting and discovering the host");
}

// An error about one host as the log and the API put it: "host NAME (URI): ...".
Status about(const HostSetup& s, const Status& st) {
  return st.annotate("host " + s.name + " (" + s.uri + ")");
}

// Brings the hosts up at once, each on its own worker under the deadline: a host that hangs
// costs connect_timeout, once. The results in order; an error is the cause alone (about()
// names the host), so a slot or a waiting host that names it already does not say it twice.
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
    Result<std::shared_ptr<Host>>& r = *results[i];
    if (r.is_ok()) {
      out.push_back(std::move(r));
      continue;
    }
    out.push_back(bring_up_failure(r.status(), options));
  }
  return out;
}

// A host that could not be reached, driven with the topology of its remembered capabilities.
Result<std::shared_ptr<Host>> not_connected_host(const HostSetup& setup,
                                                 const std::string& capabilities, std::string why) {
  auto host = std::make_shared<Host>();
  host->setup = setup;
  host->remote = is_remote_uri(setup.uri);
  ARMHIVE_ASSIGN_OR_RETURN(
      host->topology, parse_capabilities(capabilities, discovery_options(setup, host->remote)));
  host->topology.hostname = setup.name;
  ARMHIVE_ASSIGN_OR_RETURN(host->sets, make_cpu_sets(host->topology, setup.cpus));
  host->capabilities = capabilities;
  host->not_connected = std::move(why);
  return host;
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
  for (const HostSetup& s : setups) {
    ARMHIVE_RETURN_IF_ERROR(about(s, check_setup(options, s)));
  }
  std::unique_ptr<HostRegistry> registry(new HostRegistry(std::move(options)));
  const HostRegistryOptions& o = registry->options_;
  std::vector<Result<std::shared_ptr<Host>>> up = bring_up_all(o, setups);
  std::string errors;
  for (size_t i = 0; i < setups.size(); ++i) {
    const HostSetup& s = setups[i];
    if (up[i].is_ok()) {
      ARMHIVE_RETURN_IF_ERROR(registry->come_up(*up[i]));
      continue;
    }
    // What no connection cures (CPU sets the host cannot give, a document libvirt refuses) is
    // the configuration's to fix now, not a host to wait for.
    if (up[i].status().code() == ErrorCode::kInvalidArgument) return about(s, up[i].status());
    const std::string cause = up[i].status().message();
    const std::string why = about(s, up[i].status()).message();
    errors += (errors.empty() ? "" : "; ") + why;
    auto remembered = o.remembered_capabilities.find(s.name);
    if (remembered == o.remembered_capabilities.end()) {
      spdlog::error(
          "{}; never seen before, so armhived drives it only once it answers (tried "
          "again every {})",
          why, seconds_text(o.reconnect_period));
      MutexLock lock(registry->mu_);
      registry->waiting_.push_back({s, cause, std::chrono::system_clock::now()});
      continue;
    }
    auto held = not_connected_host(s, remembered->second, cause);
    if (!held.is_ok()) {
      return held.status().annotate("host " + s.name + ": its capabilities from the last run");
    }
    spdlog::error(
        "{}; driven as unreachable with its last known topology until it answers "
        "(tried again every {})",
        why, seconds_text(o.reconnect_period));
    MutexLock lock(registry->mu_);
    registry->slots_[s.name] = std::make_unique<HypervisorSlot>(s.name, cause);
    registry->hosts_.push_back(std::move(held).value());
  }
  if (registry->hosts().empty()) {
    return Status(ErrorCode::kUnavailable, "no libvirt host can be driven: " + errors);
  }
  return registry;
}

Status HostRegistry::publish(const std::shared_ptr<Host>& up) {
  const std::string& name = up->setup.name;
  MutexLock lock(mu_);
  auto current = hosts_.end();
  for (auto it = hosts_.begin(); it != hosts_.end(); ++it) {
    if ((*it)->setup.name != name) continue;
    if ((*it)->connected()) {
      return Status(ErrorCode::kConflict, "host '" + name + "' exists", name, "name");
    }
    current = it;
  }
  std::unique_ptr<HypervisorSlot>& slot = slots_[name];
  if (slot && slot->attached()) {
    // A host removed and added again: a fresh slot; the engine may still hold the old one.
    retired_slots_.push_back(std::move(slot));
  }
  if (!slot) slot = std::make_unique<HypervisorSlot>(name, "");
  if (current != hosts_.end()) {
    retired_.push_back(*current);  // the not-connected entry it replaces
    *current = up;
  } else {
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
      if (it->setup.name == name) {
        waiting_.erase(it);
        break;
      }
    }
    hosts_.push_back(up);
  }
  return slot->attach(up->hypervisor.get());
}

Status HostRegistry::come_up(const std::shared_ptr<Host>& up) {
  ARMHIVE_RETURN_IF_ERROR(publish(up));
  log_host(*up);
  if (options_.remember) options_.remember(up->setup.name, up->capabilities);
  return Status::ok();
}

HypervisorSlot* HostRegistry::slot(const std::string& name) const {
  MutexLock lock(mu_);
  auto it = slots_.find(name);
  return it == slots_.end() ? nullptr : it->second.get();
}

HostRegistry::~HostRegistry() noexcept { stop(); }

void HostRegistry::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (collector_.joinable()) collector_.join();
  if (reconnector_.joinable()) reconnector_.join();
  if (guard_watcher_.joinable()) guard_watcher_.join();
  MutexLock lock(mu_);
  drive_ = nullptr;
}

bool HostRegistry::sleep_for(std::chrono::milliseconds period) {
  MutexLock lock(mu_);
  wake_.wait_for(lock, period, [this]() REQUIRES(mu_) { return stopping_; });
  return !stopping_;
}

std::map<std::string, std::vector<std::string>> HostRegistry::collect_images(
    const std::vector<std::string>& images) const {
  std::map<std::string, std::vector<std::string>> out;
  for (const std::shared_ptr<Host>& h : hosts()) {
    // A local host uses the catalogue's own files; one not connected is left alone.
    if (!h->shipping || !h->connected()) continue;
    std::set<std::string> keep;
    bool complete = true;
    for (const std::string& name : images) {
      auto image = h->shipping->resolve(name);
      if (!image.is_ok()) {
        complete = false;
        break;
      }
      add_volume_names(*image, keep);
    }
    if (!complete) continue;
    const std::string pool = options_.storage_pool;
    const std::string image_pool = options_.image_pool;
    const std::string vm_dir = h->setup.vm_dir;
    std::shared_ptr<Host> host = h;  // the late call of a hung host keeps it alive
    auto removed = h->worker->call<std::vector<std::string>>(
        options_.connect_timeout,
        [host, pool, image_pool, keep, vm_dir]() mutable -> Result<std::vector<std::string>> {
          ARMHIVE_ASSIGN_OR_RETURN(StoragePoolHandle overlays,
                                   ensure_dir_pool(*host->connection, pool, vm_dir + "/overlays"));
          ARMHIVE_ASSIGN_OR_RETURN(std::set<std::string> backing, backing_paths(overlays.get()));
          for (const std::string& path : backing) {
            keep.insert(std::filesystem::path(path).filename().string());
          }
          std::vector<std::string> gone;
          ARMHIVE_RETURN_IF_ERROR(remove_unused(*host->connection, image_pool, keep, &gone));
          return gone;
        });
    if (!removed.is_ok()) {
      spdlog::warn("host {}: shipped images not collected: {}", h->setup.name,
                   removed.status().to_string());
      continue;
    }
    for (const std::string& v : *removed) {
      spdlog::info("host {}: removed shipped image volume {} (no pool or VM uses it)",
                   h->setup.name, v);
    }
    if (!removed->empty()) out[h->setup.name] = std::move(*removed);
  }
  return out;
}

void HostRegistry::start_image_collection(std::vector<std::string> images,
                                          std::chrono::milliseconds period) {
  if (period.count() <= 0 || collector_.joinable()) return;
  collector_ = std::thread([this, images = std::move(images), period] {
    while (sleep_for(period)) collect_images(images);
  });
}

std::vector<std::string> HostRegistry::restore_guards() const {
  std::vector<std::string> restored;
  if (options_.guard_runner == nullptr) return restored;
  const auto all = hosts();
  const bool here = std::any_of(all.begin(), all.end(), [](const std::shared_ptr<Host>& h) {
    return h->setup.guard_here && h->connected();
  });
  if (!here) return restored;
  for (const NetworkSpec& n : options_.networks) {
    Result<bool> r = restore_network_guard(*options_.guard_runner, n);
    if (!r.is_ok()) {
      spdlog::warn("network guard of {}: cannot check it: {}", n.name, r.status().to_string());
    } else if (*r) {
      spdlog::warn("network guard of {}: its rules were gone (a firewall reload?); applied again",
                   n.name);
      restored.push_back(n.name);
    }
  }
  return restored;
}

void HostRegistry::start_guard_watch(std::chrono::milliseconds period) {
  if (period.count() <= 0 || guard_watcher_.joinable()) return;
  guard_watcher_ = std::thread([this, period] {
    while (sleep_for(period)) (void)restore_guards();
  });
}

Result<std::shared_ptr<HostRegistry::Host>> HostRegistry::add(HostSetup setup) {
  if (host(setup.name) != nullptr || waiting().count(setup.name)) {
    return Status(ErrorCode::kConflict, "host '" + setup.name + "' exists", setup.name, "name");
  }
  Result<std::shared_ptr<Host>> up = std::move(bring_up_all(options_, {setup}).front());
  if (!up.is_ok()) return about(setup, up.status());
  ARMHIVE_RETURN_IF_ERROR(come_up(*up));  // kConflict: added by another caller meanwhile
  return up;
}

std::map<std::string, std::string> HostRegistry::waiting() const {
  MutexLock lock(mu_);
  std::map<std::string, std::string> out;
  for (const Waiting& w : waiting_) out[w.setup.name] = w.why;
  return out;
}

std::vector<HostRegistry::Waiting> HostRegistry::waiting_hosts() const {
  MutexLock lock(mu_);
  return waiting_;
}

HostView HostRegistry::view_of(const Waiting& w) {
  HostView v;
  v.topology.hostname = w.setup.name;
  v.uri = w.setup.uri;
  v.labels = w.setup.labels;
  v.state = HostState::kUnreachable;
  v.last_error = w.why;
  v.last_error_at = w.since;
  v.unreachable_since = w.since;
  return v;
}

std::vector<std::string> HostRegistry::reconnect_once() {
  // What to try, and on which worker (made once per host, kept: a hung attempt holds it).
  struct Attempt {
    HostSetup setup;
    DeadlineWorker* worker;
    bool waiting;  // not in the engine yet
  };
  std::vector<Attempt> attempts;
  {
    MutexLock lock(mu_);
    auto worker_for = [&](const std::string& name) REQUIRES(mu_) {
      std::unique_ptr<DeadlineWorker>& w = reconnect_workers_[name];
      if (!w) w = std::make_unique<DeadlineWorker>(name);
      return w.get();
    };
    for (const std::shared_ptr<Host>& h : hosts_) {
      if (!h->connected()) attempts.push_back({h->setup, worker_for(h->setup.name), false});
    }
    for (const Waiting& w : waiting_) {
      attempts.push_back({w.setup, worker_for(w.setup.name), true});
    }
  }
  std::vector<std::string> came_up;
  for (const Attempt& a : attempts) {
    {
      MutexLock lock(mu_);
      if (stopping_) break;  // armhived is stopping: no new attempt
    }
    HostRegistryOptions o = options_;
    auto up = a.worker->call<std::shared_ptr<Host>>(
        options_.connect_timeout, [o, setup = a.setup]() { return bring_up(o, setup); });
    const std::string& name = a.setup.name;
    if (!up.is_ok()) {
      const std::string why = bring_up_failure(up.status(), options_).message();
      if (up.status().code() == ErrorCode::kUnavailable && a.worker->hung()) {
        continue;  // the last attempt still hangs there: the reason stays what it was
      }
      bool changed = false;
      {
        MutexLock lock(mu_);
        for (Waiting& w : waiting_) {
          if (w.setup.name != name) continue;
          changed = w.why != why;
          w.why = why;
        }
      }
      if (HypervisorSlot* s = slot(name); s != nullptr && !s->attached()) {
        changed = changed || s->reason() != why;
        s->set_reason(why);
      }
      if (changed) spdlog::warn("host {} ({}): still not connected: {}", name, a.setup.uri, why);
      continue;
    }
    if (a.waiting && !waiting().count(name)) continue;  // removed meanwhile
    if (!a.waiting && host(name) == nullptr) continue;  // removed meanwhile
    std::shared_ptr<Host> previous = host(name);
    if (previous != nullptr && previous->topology.cpus.size() != (*up)->topology.cpus.size()) {
      spdlog::warn(
          "host {}: {} CPUs now, {} when it was last seen; its VMs are placed on the "
          "CPUs it had until armhived restarts",
          name, (*up)->topology.cpus.size(), previous->topology.cpus.size());
    }
    Status published = come_up(*up);
    if (!published.is_ok()) {
      spdlog::warn("host {}: came up but is not driven: {}", name, published.to_string());
      continue;
    }
    spdlog::info("host {} ({}) answers: connected", name, a.setup.uri);
    came_up.push_back(name);
    if (!a.waiting) continue;
    std::function<Status(EngineHost)> drive;
    {
      MutexLock lock(mu_);
      if (!stopping_) drive = drive_;
    }
    if (!drive) continue;
    auto engine = engine_host(**up);
    Status driven = engine.is_ok() ? drive(std::move(engine).value()) : engine.status();
    if (!driven.is_ok()) {
      spdlog::error("host {}: connected, but the engine does not drive it: {}", name,
                    driven.to_string());
    }
  }
  return came_up;
}

void HostRegistry::start_reconnecting(std::function<Status(EngineHost)> drive) {
  {
    MutexLock lock(mu_);
    drive_ = std::move(drive);
  }
  if (options_.reconnect_period.count() <= 0 || reconnector_.joinable()) return;
  reconnector_ = std::thread([this] {
    while (sleep_for(options_.reconnect_period)) reconnect_once();
  });
}

Status HostRegistry::remove(const std::string& name) {
  MutexLock lock(mu_);
  for (auto it = hosts_.begin(); it != hosts_.end(); ++it) {
    if ((*it)->setup.name != name) continue;
    retired_.push_back(*it);
    hosts_.erase(it);
    return Status::ok();
  }
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (it->setup.name != name) continue;
    waiting_.erase(it);
    return Status::ok();
  }
  return not_found("no host named '" + name + "'", name);
}

Result<EngineHost> HostRegistry::engine_host(const Host& h) const {
  auto cores = CoreAllocator::create(h.topology, h.sets);
  if (!cores.is_ok()) return cores.status().annotate("host " + h.setup.name);
  HypervisorSlot* hypervisor = slot(h.setup.name);
  if (hypervisor == nullptr) return not_found("no host named '" + h.setup.name + "'");
  // Whichever Host of that name is current: a host that connects later gets its image source
  // then (a remote one's shipping starts with its connection).
  ImageResolver images = [this,
                          name = h.setup.name](const std::string& image) -> Result<BootImage> {
    std::shared_ptr<Host> now = host(name);
    if (now == nullptr) return not_found("no host named '" + name + "'");
    if (!now->connected()) {
      return Status(ErrorCode::kUnavailable, "host " + name + " is not connected", name);
    }
    if (now->shipping) return now->shipping->resolve(image);
    return options_.catalogue(image);
  };
  return EngineHost{h.setup.name,      hypervisor,     std::move(cores).value(),
                    std::move(images), h.setup.labels, h.setup.uri};
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
