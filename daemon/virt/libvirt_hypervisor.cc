#include "daemon/virt/libvirt_hypervisor.h"

#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "base/base64.h"
#include "daemon/virt/dhcp_reservation.h"
#include "daemon/virt/domain_stats.h"
#include "daemon/virt/error.h"
#include "daemon/virt/guest_agent_reply.h"
#include "daemon/virt/guest_exec_stream.h"
#include "daemon/virt/guest_file_transfer.h"
#include "daemon/virt/handles.h"
#include "daemon/virt/storage.h"

namespace armhive {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
// Names of the domains the engine creates ("armhive-" + vm_id); only DHCP host entries with
// this prefix are taken for armhive's in orphan cleanup.

Status check_name(std::string_view name) { return validate_domain_name(name); }

int64_t read_pid(const std::string& dir, const std::string& name) {
  if (dir.empty()) return 0;
  std::ifstream in(fs::path(dir) / (name + ".pid"));
  int64_t pid = 0;
  if (in >> pid) return pid;
  return 0;
}

std::string first_ipv4(virDomainInterfacePtr* ifaces, int n) {
  std::string found;
  for (int i = 0; i < n; ++i) {
    virDomainInterfacePtr iface = ifaces[i];
    if (found.empty() && iface->name != nullptr && std::string_view(iface->name) != "lo") {
      for (unsigned int j = 0; j < iface->naddrs; ++j) {
        const virDomainIPAddress& a = iface->addrs[j];
        if (a.type == VIR_IP_ADDR_TYPE_IPV4 && a.addr != nullptr &&
            std::string_view(a.addr).rfind("127.", 0) != 0) {
          found = a.addr;
          break;
        }
      }
    }
  }
  for (int i = 0; i < n; ++i) virDomainInterfaceFree(ifaces[i]);
  free(ifaces);  // NOLINT: libvirt allocated the array
  return found;
}

bool wants_console_stream(const LibvirtHypervisorOptions& o) {
  if (o.console == ConsoleMode::kAuto) return is_remote_uri(o.uri);
  return o.console == ConsoleMode::kStream;
}

}  // namespace

LibvirtHypervisor::LibvirtHypervisor(LibvirtHypervisorOptions options, Connection connection)
    : options_(std::move(options)),
      connection_(std::move(connection)),
      remote_(is_remote_uri(options_.uri)),
      consoles_(wants_console_stream(options_)
                    ? std::make_unique<ConsoleCapture>(options_.console_capture_bytes)
                    : nullptr) {}

LibvirtHypervisor::~LibvirtHypervisor() {
  std::shared_ptr<DomainEvents> events;
  {
    MutexLock lock(mu_);
    events = std::move(events_);
  }
}

Result<std::unique_ptr<LibvirtHypervisor>> LibvirtHypervisor::open(
    LibvirtHypervisorOptions options) {
  if (options.state_dir.empty() || options.state_dir.front() != '/') {
    return invalid_argument("state_dir", "must be an absolute path");
  }
  ARMHIVE_ASSIGN_OR_RETURN(Connection conn, Connection::open(options.uri));
  std::unique_ptr<LibvirtHypervisor> h(new LibvirtHypervisor(std::move(options), std::move(conn)));
  ARMHIVE_ASSIGN_OR_RETURN(auto events, DomainEvents::attach(h->connection_));
  {
    MutexLock lock(h->mu_);  // nobody else has `h` yet: uncontended, but the contract holds
    h->events_ = std::move(events);
  }
  // A storage pool of this name on another directory (another armhived's, or an old
  // configuration's) would fail every create for ever: refuse at once, naming both paths. Other
  // failures are left to create_vm, which retries them.
  if (!h->options_.storage_pool.empty()) {
    auto pool = ensure_dir_pool(h->connection_, h->options_.storage_pool,
                                (fs::path(h->options_.state_dir) / "overlays").string());
    if (!pool.is_ok() && pool.status().code() == ErrorCode::kConflict) return pool.status();
  }
  return h;
}

Status LibvirtHypervisor::ensure_connected() {
  std::shared_ptr<DomainEvents> events_now;
  {
    MutexLock lock(mu_);
    events_now = events_;
  }
  if (events_now && events_now->alive()) return Status::ok();
  // The events' connection is gone (libvirtd restarted or lost): subscribe again, on one
  // thread at a time; calls racing with that get kUnavailable rather than wait behind an open
  // that a stopped libvirtd may never answer. The calls' own connections (Connection::get)
  // are replaced by the threads that find them closed.
  bool expected = false;
  if (!reconnecting_.compare_exchange_strong(expected, true)) {
    return unavailable("reconnecting to libvirt", connection_.uri());
  }
  auto events = DomainEvents::attach(connection_);
  Status s = events.status();
  if (events.is_ok()) {
    std::shared_ptr<DomainEvents> fresh = std::move(events).value();
    std::shared_ptr<DomainEvents> old;
    {
      MutexLock lock(mu_);
      if (handler_) subscription_ = fresh->subscribe(handler_);
      old = std::exchange(events_, std::move(fresh));
    }
  }
  reconnecting_.store(false);
  return s;
}

Result<DomainHandle> LibvirtHypervisor::lookup(std::string_view name) {
  ARMHIVE_RETURN_IF_ERROR(check_name(name));
  ARMHIVE_RETURN_IF_ERROR(ensure_connected());
  return connection_.lookup_domain(name);
}

DomainPaths LibvirtHypervisor::paths_for(std::string_view name) const {
  DomainPaths p;
  fs::path vm_dir = fs::path(options_.state_dir) / "domains" / std::string(name);
  p.overlay = (fs::path(options_.state_dir) / "overlays" / (std::string(name) + ".qcow2")).string();
  if (!streams_console()) p.console_log = (vm_dir / "console.log").string();
  p.nvram = (vm_dir / "VARS.fd").string();
  p.uefi_code = options_.uefi_code;
  p.uefi_vars_template = options_.uefi_vars_template;
  p.emulator = options_.emulator;
  return p;
}

Status LibvirtHypervisor::remove_files(const std::string& name) {
  DomainPaths p = paths_for(name);
  std::error_code ec;
  auto pool = ensure_dir_pool(connection_, options_.storage_pool,
                              (fs::path(options_.state_dir) / "overlays").string());
  if (pool.is_ok()) {
    ARMHIVE_RETURN_IF_ERROR(delete_volume(pool->get(), name + ".qcow2"));
  } else if (remote_) {
    return pool.status().annotate("remove the overlay of " + name);
  }
  if (remote_) return Status::ok();  // nothing of a remote host's VM is on this disk
  fs::remove(p.overlay, ec);         // made outside libvirt, or the pool is unusable
  if (ec) return unavailable("cannot remove overlay: " + ec.message(), p.overlay);
  // Console log and UEFI vars (and, from a daemon in kStream mode, perhaps nothing).
  fs::remove_all(fs::path(options_.state_dir) / "domains" / name, ec);
  if (ec) return unavailable("cannot remove VM files: " + ec.message(), name);
  return Status::ok();
}

Status LibvirtHypervisor::start_captured(const std::string& xml, const std::string& name) {
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection_.get());
  DomainHandle dom(virDomainCreateXML(conn.get(), xml.c_str(), VIR_DOMAIN_START_PAUSED));
  if (!dom) return libvirt_error("start domain", name);
  Status s = consoles_->attach(connection_, name);
  if (s.is_ok() && virDomainResume(dom.get()) < 0) s = libvirt_error("resume domain", name);
  if (s.is_ok()) return s;
  // A VM whose console nobody can read is not handed out: diagnosing it would be impossible.
  if (virDomainDestroy(dom.get()) < 0) virResetLastError();
  consoles_->detach(name);
  return s;
}

Status LibvirtHypervisor::create_vm(const VmSpec& spec) {
  ARMHIVE_RETURN_IF_ERROR(validate_vm_spec(spec));
  ARMHIVE_RETURN_IF_ERROR(ensure_connected());
  {
    auto existing = connection_.lookup_domain(spec.name);
    if (existing.is_ok()) return conflict("domain already exists", spec.name);
    if (existing.status().code() != ErrorCode::kNotFound) return existing.status();
  }
  if (remote_ && spec.kernel.empty()) {
    return invalid_argument("kernel",
                            "UEFI boot (no kernel) is not supported on a remote host yet: its "
                            "vars file would be copied on this one; boot a kernel and initrd");
  }
  // A remote host's base image is one of its shipped volumes; a local one is read directly.
  ARMHIVE_ASSIGN_OR_RETURN(uint64_t base_size, remote_
                                                   ? volume_capacity(connection_, spec.base_disk)
                                                   : qcow2_virtual_size(spec.base_disk));
  uint64_t capacity = spec.disk_gib == 0 ? base_size : spec.disk_gib * kGiB;
  if (capacity < base_size) {
    return invalid_argument(
        "disk_gib", "smaller than the base image (" + std::to_string(base_size >> 20) + " MiB)");
  }
  DomainPaths paths = paths_for(spec.name);
  std::error_code ec;
  const std::string overlays_dir = (fs::path(options_.state_dir) / "overlays").string();
  ARMHIVE_ASSIGN_OR_RETURN(StoragePoolHandle pool,
                           ensure_dir_pool(connection_, options_.storage_pool, overlays_dir));
  // Checked before anything is made: the failure path below removes the VM's files, which
  // must never be a previous VM's.
  bool overlay_left = false;
  if (remote_) {
    ARMHIVE_ASSIGN_OR_RETURN(std::vector<std::string> volumes, list_volume_names(pool.get()));
    overlay_left = std::find(volumes.begin(), volumes.end(), spec.name + ".qcow2") != volumes.end();
  } else {
    overlay_left = fs::exists(paths.overlay, ec);
  }
  if (overlay_left) {
    return conflict("overlay of a previous VM of this name still exists: destroy it first",
                    spec.name);
  }

  auto fail = [&](const Status& s) {
    Status released = release_dhcp_host(connection_, spec.name);
    Status cleanup = remove_files(spec.name);
    (void)released;  // the original failure is what the caller needs
    (void)cleanup;
    return s.annotate("create " + spec.name);
  };

  // Files first: a reservation (on a network other armhiveds may share) then never exists
  // without files of ours that name it, which is how list_vm_files() finds what a crash left
  // behind without claiming another daemon's reservations. On a remote host the overlay is the
  // first; on a local one the VM's directory.
  if (!remote_) {
    fs::create_directories(fs::path(options_.state_dir) / "domains" / spec.name, ec);
    if (ec) return fail(unavailable("cannot create VM directory: " + ec.message(), spec.name));
  }
  auto overlay = create_overlay(pool.get(), spec.name + ".qcow2", spec.base_disk, capacity);
  if (!overlay.is_ok()) return fail(overlay.status());
  paths.overlay = *overlay;
  // The address is reserved before the domain exists, so it is known (and final) at start and
  // readiness does not wait for the guest's DHCP exchange.
  VmSpec vm = spec;
  Result<std::optional<DhcpHost>> reserved = std::optional<DhcpHost>();
  if (options_.reserve_addresses) {
    reserved = reserve_dhcp_host(connection_, spec.network, spec.name, spec.mac);
    // No such network: nothing to reserve on; starting the domain reports the missing network.
    if (!reserved.is_ok() && reserved.status().code() == ErrorCode::kNotFound) {
      reserved = std::optional<DhcpHost>();
    }
  }
  if (!reserved.is_ok()) return fail(reserved.status().annotate("reserve an address"));
  if (reserved->has_value()) {
    if (!spec.mac.empty() && (*reserved)->mac != spec.mac) {
      return conflict("a DHCP host entry of a previous VM of this name still exists: destroy it",
                      spec.name);
    }
    vm.mac = (*reserved)->mac;
  }

  if (spec.kernel.empty()) {
    fs::copy_file(paths.uefi_vars_template, paths.nvram, fs::copy_options::overwrite_existing, ec);
    if (ec)
      return fail(unavailable("cannot copy UEFI vars: " + ec.message(), paths.uefi_vars_template));
  }
  InterfaceIsolation isolation;
  isolation.enabled = options_.isolated_networks.count(spec.network) > 0;
  if (isolation.enabled && reserved->has_value()) isolation.ipv4 = (*reserved)->ip;
  auto xml = build_domain_xml(vm, paths, options_.accel, options_.storage_pool, isolation);
  if (!xml.is_ok()) return fail(xml.status());
  if (streams_console()) {
    Status started = start_captured(*xml, spec.name);
    return started.is_ok() ? started : fail(started);
  }
  ConnectPtr conn;
  if (auto c = connection_.get(); c.is_ok()) {
    conn = std::move(c).value();
  } else {
    return fail(c.status());
  }
  DomainHandle dom(virDomainCreateXML(conn.get(), xml->c_str(), 0));
  if (!dom) return fail(libvirt_error("start domain", spec.name));
  return Status::ok();
}

Status LibvirtHypervisor::destroy_vm(std::string_view name) {
  ARMHIVE_RETURN_IF_ERROR(check_name(name));
  ARMHIVE_RETURN_IF_ERROR(ensure_connected());
  std::string n(name);
  auto dom = connection_.lookup_domain(n);
  if (dom.is_ok()) {
    // Another armhived's VM of the same name is never ours to end (nor are its files, which
    // live under its own state directory).
    LibvirtString meta(
        virDomainGetMetadata(dom->get(), VIR_DOMAIN_METADATA_ELEMENT, kMetadataUri, 0));
    virResetLastError();
    if (meta) {
      auto parsed = parse_metadata_xml(meta.get());
      if (parsed.is_ok() && !ours(*parsed)) {
        return conflict(
            "domain belongs to another armhived (storage pool '" + parsed->instance + "')", n);
      }
    }
    if (virDomainIsActive(dom->get()) == 1 && virDomainDestroy(dom->get()) < 0) {
      Status s = libvirt_error("destroy domain", n);
      // Gone or stopped in between: that is what we wanted.
      if (s.code() != ErrorCode::kNotFound && s.code() != ErrorCode::kConflict) return s;
    }
    virResetLastError();
    if (virDomainIsPersistent(dom->get()) == 1 &&
        virDomainUndefineFlags(dom->get(), VIR_DOMAIN_UNDEFINE_NVRAM) < 0) {
      Status s = libvirt_error("undefine domain", n);
      if (s.code() != ErrorCode::kNotFound) return s;
    }
    virResetLastError();
  } else if (dom.status().code() != ErrorCode::kNotFound) {
    return dom.status();
  }
  if (consoles_) consoles_->detach(n);
  ARMHIVE_RETURN_IF_ERROR(release_dhcp_host(connection_, n));
  return remove_files(n);
}

Result<std::vector<VmInfo>> LibvirtHypervisor::list_vms() {
  ARMHIVE_RETURN_IF_ERROR(ensure_connected());
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection_.get());
  virDomainPtr* doms = nullptr;
  int n = virConnectListAllDomains(conn.get(), &doms, 0);
  if (n < 0) return libvirt_error("list domains", connection_.uri());
  std::vector<DomainHandle> handles;
  handles.reserve(n);
  for (int i = 0; i < n; ++i) handles.emplace_back(doms[i]);
  free(doms);  // NOLINT: libvirt allocated the array

  std::vector<VmInfo> out;
  for (const DomainHandle& d : handles) {
    const char* raw_name = virDomainGetName(d.get());
    std::string name = raw_name != nullptr ? raw_name : "";
    LibvirtString meta(virDomainGetMetadata(d.get(), VIR_DOMAIN_METADATA_ELEMENT, kMetadataUri, 0));
    if (!meta) {
      Status s = libvirt_error("get metadata", name);
      if (s.code() == ErrorCode::kNotFound) continue;  // not ours (or gone since listing)
      return s;
    }
    auto parsed = parse_metadata_xml(meta.get());
    if (!parsed.is_ok()) continue;  // not an armhive element we understand
    if (!ours(*parsed)) continue;   // another armhived's on this libvirtd
    VmInfo info;
    info.name = name;
    info.vm_id = parsed->vm_id;
    info.pool = parsed->pool;
    info.lease_id = parsed->lease_id;
    info.running = virDomainIsActive(d.get()) == 1;
    LibvirtString xml(virDomainGetXMLDesc(d.get(), 0));
    if (xml) {
      auto desc = parse_domain_xml(xml.get());
      if (desc.is_ok()) {
        info.vcpu_pins = desc->vcpu_pins;
        info.emulator_cpus = desc->emulator_cpus;
      }
    } else {
      virResetLastError();
    }
    if (info.running && !remote_) info.qemu_pid = read_pid(options_.qemu_runtime_dir, name);
    // A VM this daemon did not start (adopted after a restart), or whose stream broke with the
    // connection: captured again from now on. Best effort: the listing is what was asked for.
    if (info.running && consoles_ && !consoles_->is_open(name)) {
      if (!consoles_->attach(connection_, name).is_ok()) virResetLastError();
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(),
            [](const VmInfo& a, const VmInfo& b) { return a.name < b.name; });
  return out;
}

Result<std::vector<std::string>> LibvirtHypervisor::list_vm_files() {
  std::set<std::string> names;
  // Overlays through the pool, so that a remote host's are listed as well as a local one's; a
  // pool that cannot be listed makes the listing fail (incomplete: no stray is then deleted).
  ARMHIVE_RETURN_IF_ERROR(ensure_connected());
  ARMHIVE_ASSIGN_OR_RETURN(StoragePoolHandle pool,
                           ensure_dir_pool(connection_, options_.storage_pool,
                                           (fs::path(options_.state_dir) / "overlays").string()));
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<std::string> volumes, list_volume_names(pool.get()));
  constexpr std::string_view kOverlaySuffix = ".qcow2";
  for (const std::string& v : volumes) {
    if (v.size() <= kOverlaySuffix.size() ||
        v.compare(v.size() - kOverlaySuffix.size(), kOverlaySuffix.size(), kOverlaySuffix) != 0) {
      continue;
    }
    std::string stem = v.substr(0, v.size() - kOverlaySuffix.size());
    if (validate_domain_name(stem).is_ok()) names.insert(stem);
  }
  // A local host's console logs and UEFI vars live in the state directory (a remote host's VMs
  // have none).
  std::error_code ec;
  if (remote_) return std::vector<std::string>(names.begin(), names.end());
  for (const auto& e : fs::directory_iterator(fs::path(options_.state_dir) / "domains", ec)) {
    std::string n = e.path().filename().string();
    if (e.is_directory() && validate_domain_name(n).is_ok()) names.insert(n);
  }
  // An address reservation outlives a crashed daemon too, but never without the VM's directory
  // (create_vm makes it first, destroy_vm releases the reservation before removing it): the
  // names above cover it, and reservations of other armhiveds on a shared network are left be.
  return std::vector<std::string>(names.begin(), names.end());
}

Status LibvirtHypervisor::set_lease(std::string_view name, std::string_view lease_id) {
  ARMHIVE_ASSIGN_OR_RETURN(DomainHandle dom, lookup(name));
  std::string n(name);
  LibvirtString meta(virDomainGetMetadata(dom.get(), VIR_DOMAIN_METADATA_ELEMENT, kMetadataUri, 0));
  if (!meta) {
    Status s = libvirt_error("get metadata", n);
    if (s.code() == ErrorCode::kNotFound)
      return not_found("not an armhive domain (no metadata)", n);
    return s;
  }
  ARMHIVE_ASSIGN_OR_RETURN(VmMetadata m, parse_metadata_xml(meta.get()));
  m.lease_id = std::string(lease_id);
  ARMHIVE_ASSIGN_OR_RETURN(std::string xml, build_metadata_xml(m, false));
  unsigned int flags =
      virDomainIsActive(dom.get()) == 1 ? VIR_DOMAIN_AFFECT_LIVE : VIR_DOMAIN_AFFECT_CURRENT;
  if (virDomainSetMetadata(dom.get(), VIR_DOMAIN_METADATA_ELEMENT, xml.c_str(), kMetadataKey,
                           kMetadataUri, flags) < 0) {
    return libvirt_error("set lease metadata", n);
  }
  return Status::ok();
}

Result<std::string> LibvirtHypervisor::agent_command(std::string_view name, const std::string& cmd,
                                                     std::chrono::milliseconds timeout) {
  ARMHIVE_ASSIGN_OR_RETURN(DomainHandle dom, lookup(name));
  int seconds = static_cast<int>(std::max<int64_t>(1, (timeout.count() + 999) / 1000));
  LibvirtString reply(virDomainQemuAgentCommand(dom.get(), cmd.c_str(), seconds, 0));
  if (!reply) return libvirt_error("guest agent command", name);
  return reply.str();
}

Status LibvirtHypervisor::ping_agent(std::string_view name, std::chrono::milliseconds timeout) {
  auto r = agent_command(name, R"({"execute":"guest-ping"})", timeout);
  return r.status();
}

Result<std::string> LibvirtHypervisor::guest_address(std::string_view name) {
  ARMHIVE_ASSIGN_OR_RETURN(DomainHandle dom, lookup(name));
  // A reserved address is the guest's from its first DHCP exchange on: no need to wait for it.
  LibvirtString desc_xml(virDomainGetXMLDesc(dom.get(), 0));
  if (desc_xml) {
    auto desc = parse_domain_xml(desc_xml.get());
    if (desc.is_ok() && !desc->network.empty() && !desc->mac.empty()) {
      auto host = find_dhcp_host(connection_, desc->network, std::string(name));
      if (host.is_ok() && host->has_value() && (*host)->mac == desc->mac) return (*host)->ip;
    }
  } else {
    virResetLastError();
  }
  Status last = Status::ok();
  for (unsigned int source :
       {VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE, VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT}) {
    virDomainInterfacePtr* ifaces = nullptr;
    int n = virDomainInterfaceAddresses(dom.get(), &ifaces, source, 0);
    if (n < 0) {
      last = libvirt_error(source == VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE
                               ? "read DHCP leases"
                               : "ask the agent for addresses",
                           name);
      continue;
    }
    std::string addr = first_ipv4(ifaces, n);
    if (!addr.empty()) return addr;
  }
  // Not there yet (no lease, agent not up) is the normal state of a booting guest: callers poll.
  if (last.code() == ErrorCode::kNotFound) return last;  // the domain itself is gone
  std::string msg = "the guest has no IPv4 address yet";
  if (!last.is_ok()) msg += " (" + last.message() + ")";
  return Status(ErrorCode::kUnavailable, std::move(msg), std::string(name));
}

Status LibvirtHypervisor::set_authorized_keys(std::string_view name, std::string_view user,
                                              const std::vector<std::string>& keys) {
  if (user.empty() || user.find('/') != std::string_view::npos) {
    return invalid_argument("user", "not a valid user name");
  }
  ARMHIVE_ASSIGN_OR_RETURN(DomainHandle dom, lookup(name));
  std::vector<const char*> ptrs;
  for (const auto& k : keys) {
    if (k.find('\n') != std::string::npos)
      return invalid_argument("keys", "a key must be one line");
    ptrs.push_back(k.c_str());
  }
  std::string u(user);
  // flags 0: replace the whole file with `keys`.
  if (virDomainAuthorizedSSHKeysSet(dom.get(), u.c_str(), ptrs.data(),
                                    static_cast<unsigned int>(ptrs.size()), 0) < 0) {
    return libvirt_error("set authorized SSH keys of " + u, name);
  }
  return Status::ok();
}

namespace {

constexpr std::chrono::milliseconds kAgentCallTimeout{10000};

// The guest-exec command for `request` (argv and env as JSON strings, never spliced).
Result<std::string> guest_exec_command(const GuestExecRequest& request, bool capture) {
  if (request.argv.empty()) return invalid_argument("argv", "must not be empty");
  for (const std::string& e : request.env) {
    if (e.find('=') == std::string::npos || e.front() == '=') {
      return invalid_argument("env", "entries must be NAME=value");
    }
  }
  try {
    json args = {{"path", request.argv[0]}, {"capture-output", capture}};
    args["arg"] = std::vector<std::string>(request.argv.begin() + 1, request.argv.end());
    if (!request.env.empty()) args["env"] = request.env;
    if (!request.stdin_data.empty()) args["input-data"] = base64_encode(request.stdin_data);
    return json{{"execute", "guest-exec"}, {"arguments", args}}.dump();
  } catch (const json::exception& e) {
    // Only the field is named: the text may hold a secret value.
    return invalid_argument("argv", std::string("arguments and environment must be UTF-8 (") +
                                        std::to_string(e.id) + ")");
  }
}

}  // namespace

Result<int64_t> LibvirtHypervisor::exec_start(std::string_view name,
                                              const GuestExecRequest& request) {
  ARMHIVE_ASSIGN_OR_RETURN(std::string cmd, guest_exec_command(request, false));
  ARMHIVE_ASSIGN_OR_RETURN(std::string started, agent_command(name, cmd, kAgentCallTimeout));
  auto pid_or = parse_guest_exec_started(started);
  if (!pid_or.is_ok())
    return Status(pid_or.status().code(), pid_or.status().message(), std::string(name));
  return *pid_or;
}

Result<std::optional<GuestExecResult>> LibvirtHypervisor::exec_status(std::string_view name,
                                                                      int64_t pid) {
  if (pid <= 0) return invalid_argument("pid", "must be positive");
  const std::string cmd =
      json{{"execute", "guest-exec-status"}, {"arguments", {{"pid", pid}}}}.dump();
  ARMHIVE_ASSIGN_OR_RETURN(std::string reply, agent_command(name, cmd, kAgentCallTimeout));
  auto status = parse_guest_exec_status(reply);
  if (!status.is_ok()) {
    return Status(status.status().code(), status.status().message(), std::string(name));
  }
  return std::move(status).value();
}

Result<GuestExecResult> LibvirtHypervisor::exec(std::string_view name,
                                                const GuestExecRequest& request) {
  if (request.timeout <= std::chrono::milliseconds::zero()) {
    return invalid_argument("timeout", "must be positive");
  }
  ARMHIVE_ASSIGN_OR_RETURN(std::string dump, guest_exec_command(request, true));
  const auto deadline = std::chrono::steady_clock::now() + request.timeout;
  constexpr std::chrono::milliseconds kCallTimeout = kAgentCallTimeout;
  ARMHIVE_ASSIGN_OR_RETURN(std::string started,
                           agent_command(name, dump, std::min(kCallTimeout, request.timeout)));
  auto pid_or = parse_guest_exec_started(started);
  if (!pid_or.is_ok())
    return Status(pid_or.status().code(), pid_or.status().message(), std::string(name));
  const int64_t pid = *pid_or;

  const std::string status_cmd =
      json{{"execute", "guest-exec-status"}, {"arguments", {{"pid", pid}}}}.dump();
  while (true) {
    ARMHIVE_ASSIGN_OR_RETURN(std::string reply, agent_command(name, status_cmd, kCallTimeout));
    auto status = parse_guest_exec_status(reply);
    if (!status.is_ok()) {
      return Status(status.status().code(), status.status().message(), std::string(name));
    }
    if (status->has_value()) return std::move(**status);
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(options_.exec_poll_interval);
  }
  // Timed out: try to kill the guest process (best effort; the guest may lack kill(1)).
  GuestExecResult result;
  result.timed_out = true;
  auto killed = agent_command(name, guest_kill_command(pid), std::chrono::seconds(5));
  (void)killed;
  return result;
}

Result<GuestExecResult> LibvirtHypervisor::exec_stream(std::string_view name,
                                                       const GuestExecRequest& request,
                                                       ExecSink& sink) {
  ARMHIVE_RETURN_IF_ERROR(check_name(name));
  const std::string n(name);
  AgentCall agent = [this, &n](const std::string& cmd, std::chrono::milliseconds timeout) {
    return agent_command(n, cmd, timeout);
  };
  ExecStreamOptions options;
  options.poll_interval = options_.exec_poll_interval;
  auto r = run_streaming_exec(agent, request, sink, options);
  if (!r.is_ok() && r.status().context().empty()) {
    return Status(r.status().code(), r.status().message(), n, r.status().field());
  }
  return r;
}

namespace {

template <class T>
Result<T> with_domain(Result<T> r, const std::string& name) {
  if (!r.is_ok() && r.status().context().empty()) {
    return Status(r.status().code(), r.status().message(), name, r.status().field());
  }
  return r;
}

}  // namespace

Result<GuestFileTransfer> LibvirtHypervisor::put_file(std::string_view name,
                                                      const GuestFilePut& put, ByteSource& source) {
  ARMHIVE_RETURN_IF_ERROR(check_name(name));
  const std::string n(name);
  AgentCall agent = [this, &n](const std::string& cmd, std::chrono::milliseconds timeout) {
    return agent_command(n, cmd, timeout);
  };
  return with_domain(put_guest_file(agent, put, source), n);
}

Result<GuestFileTransfer> LibvirtHypervisor::get_file(std::string_view name,
                                                      const std::string& path, ByteSink& sink) {
  ARMHIVE_RETURN_IF_ERROR(check_name(name));
  const std::string n(name);
  AgentCall agent = [this, &n](const std::string& cmd, std::chrono::milliseconds timeout) {
    return agent_command(n, cmd, timeout);
  };
  return with_domain(get_guest_file(agent, path, sink), n);
}

Result<std::string> LibvirtHypervisor::console_log(std::string_view name, size_t max_bytes) {
  ARMHIVE_RETURN_IF_ERROR(check_name(name));
  if (consoles_) return consoles_->tail(std::string(name), max_bytes);
  std::string path = paths_for(name).console_log;
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("no console log", std::string(name));
  in.seekg(0, std::ios::end);
  auto size = static_cast<size_t>(std::max<std::streamoff>(0, in.tellg()));
  size_t start = size > max_bytes ? size - max_bytes : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string out(size - start, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  return out;
}

Result<std::vector<VmCounters>> LibvirtHypervisor::vm_counters(
    const std::vector<std::string>& names) {
  std::vector<VmCounters> out;
  if (names.empty()) return out;
  for (const std::string& n : names) ARMHIVE_RETURN_IF_ERROR(check_name(n));
  ARMHIVE_RETURN_IF_ERROR(ensure_connected());
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection_.get());
  // Never waiting for a domain busy with a job (NOWAIT: libvirt then leaves out what it cannot
  // read at once; the sample's missing counters add nothing).
  virDomainStatsRecordPtr* raw = nullptr;
  int n = 0;
  if (names.size() == 1) {
    // One VM (a lease's baseline, on the hand-out path): that domain alone, not a monitor
    // query of every VM on the host.
    auto dom = connection_.lookup_domain(names[0]);
    if (!dom.is_ok()) {
      if (dom.status().code() == ErrorCode::kNotFound) return out;  // not running: no counters
      return dom.status();
    }
    virDomainPtr doms[] = {dom->get(), nullptr};
    n = virDomainListGetStats(doms, kUsageStatsGroups, &raw,
                              VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT);
  } else {
    // The periodic sample: every running domain of the host in one round trip; those not
    // asked for are dropped below.
    n = virConnectGetAllDomainStats(
        conn.get(), kUsageStatsGroups, &raw,
        VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE | VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT);
  }
  if (n < 0) return libvirt_error("get domain statistics", connection_.uri());
  DomainStatsList records(raw);
  const std::set<std::string> wanted(names.begin(), names.end());
  for (int i = 0; i < n; ++i) {
    const virDomainStatsRecordPtr r = records.get()[i];
    const char* raw_name = virDomainGetName(r->dom);
    if (raw_name == nullptr || wanted.count(raw_name) == 0) continue;
    unsigned int id = virDomainGetID(r->dom);
    int64_t run_id = id == static_cast<unsigned int>(-1) ? 0 : static_cast<int64_t>(id);
    out.push_back(
        {raw_name, usage_counters_from_stats(run_id, domain_stat_fields(r->params, r->nparams))});
  }
  virResetLastError();  // a failed virDomainGetName/GetID is not this call's error
  return out;
}

void LibvirtHypervisor::set_event_handler(std::function<void(const VmEvent&)> handler) {
  MutexLock lock(mu_);
  if (!events_) return;
  if (subscription_ != 0) events_->unsubscribe(subscription_);
  handler_ = std::move(handler);
  subscription_ = handler_ ? events_->subscribe(handler_) : 0;
}

}  // namespace armhive
