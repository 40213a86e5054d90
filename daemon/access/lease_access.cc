#include "daemon/access/lease_access.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/access/ssh_ca.h"

namespace armhive {

namespace {

// Writes the lease's SSH trust ($1: the CA public key, $2: the principal) where the tiny image's
// sshd_config looks; each file is replaced whole (rename), so sshd never reads half of one. A
// constant script: the values travel as arguments, never inside it.
constexpr const char* kTrustScript =
    "set -e; umask 022; d=/run/armhive/ssh; mkdir -p \"$d\"; "
    "printf '%s\\n' \"$1\" > \"$d/user_ca.pub.new\"; printf '%s\\n' \"$2\" > "
    "\"$d/principals.new\"; "
    "mv -f \"$d/user_ca.pub.new\" \"$d/user_ca.pub\"; mv -f \"$d/principals.new\" "
    "\"$d/principals\"";

// Writes $1 to every pseudo-terminal of the guest (the SSH sessions), as wall does without
// needing utmp. A constant script: the text travels as an argument.
constexpr const char* kWallScript =
    "for t in /dev/pts/[0-9]*; do [ -c \"$t\" ] && printf '\\r\\n%s\\r\\n' \"$1\" "
    "2>/dev/null > \"$t\"; done; true";

const Clock& system_clock_instance() {
  static const SystemClock kClock;
  return kClock;
}

}  // namespace

LeaseAccess::LeaseAccess(LeaseService& leases, ForwardTable& forwards, int max_extra_ports,
                         int guest_ssh_port, const Clock* clock)
    : leases_(leases),
      forwards_(forwards),
      max_extra_ports_(max_extra_ports),
      guest_ssh_port_(guest_ssh_port),
      clock_(clock != nullptr ? *clock : system_clock_instance()) {}

Status LeaseAccess::check_ports(const std::string& pool, const std::vector<int>& ports) {
  std::vector<int> allowed;
  bool known = false;
  const int daemon_cap = max_extra_ports_.load();
  int cap = daemon_cap;
  for (const PoolStatus& p : leases_.pools()) {
    if (p.config.name == pool) {
      known = true;
      allowed = p.config.access_ports;
      // The loader keeps a pool's cap within the daemon's; min() holds for hand-built configs.
      if (p.config.max_extra_ports) cap = std::min(cap, *p.config.max_extra_ports);
    }
  }
  if (static_cast<int>(ports.size()) > cap) {
    const std::string whose = known && cap < daemon_cap ? " in pool " + pool : "";
    return invalid_argument("ports", "at most " + std::to_string(cap) + " extra ports per lease" +
                                         whose + " (asked for " + std::to_string(ports.size()) +
                                         ")");
  }
  if (!known) return Status::ok();
  std::string allowed_text;
  for (int a : allowed) allowed_text += (allowed_text.empty() ? "" : ", ") + std::to_string(a);
  for (size_t i = 0; i < ports.size(); ++i) {
    const std::string field = "ports[" + std::to_string(i) + "]";
    if (std::find(allowed.begin(), allowed.end(), ports[i]) == allowed.end()) {
      return invalid_argument(
          field, "port " + std::to_string(ports[i]) + " is not forwarded for pool " + pool +
                     " (its access_ports: " + (allowed_text.empty() ? "none" : allowed_text) + ")");
    }
    if (std::find(ports.begin(), ports.begin() + static_cast<long>(i), ports[i]) !=
        ports.begin() + static_cast<long>(i)) {
      return invalid_argument(field, "port " + std::to_string(ports[i]) + " is listed twice");
    }
  }
  return Status::ok();
}

void LeaseAccess::set_ports(const std::string& lease_id, const std::vector<int>& ports) {
  {
    MutexLock lock(mu_);
    ports_[lease_id] = ports;
  }
  // A warm hand-out is ready already: open them now rather than at the next look.
  if (auto l = leases_.get_lease(lease_id); l.is_ok()) (void)ssh_endpoint(*l);
}

LeaseAccess::~LeaseAccess() noexcept { stop(); }

void LeaseAccess::start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { watch(); });
}

void LeaseAccess::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

Result<std::optional<SshEndpoint>> LeaseAccess::ssh_endpoint(const Lease& lease) {
  if (lease.state != LeaseState::kReady || lease.address.empty()) {
    return std::optional<SshEndpoint>();
  }
  if (reach_ && !reach_(lease).is_ok()) return std::optional<SshEndpoint>();
  std::vector<int> wanted{guest_ssh_port_};
  {
    MutexLock lock(mu_);
    if (auto it = ports_.find(lease.id); it != ports_.end()) {
      wanted.insert(wanted.end(), it->second.begin(), it->second.end());
    }
  }
  std::vector<ForwardInfo> open = forwards_.find(lease.id);
  const bool all_open = std::all_of(wanted.begin(), wanted.end(), [&](int port) {
    return std::any_of(open.begin(), open.end(),
                       [&](const ForwardInfo& f) { return f.guest_port == port; });
  });
  if (!all_open) {
    // `lease` may be a reader's old copy (an API handler's, read before a release): open only
    // from a reading made after the ticket, so a close between the two refuses the open.
    ForwardTable::Ticket ticket = forwards_.ticket(lease.id);
    auto now = leases_.get_lease(lease.id);
    if (!now.is_ok() || now->state != LeaseState::kReady || now->address.empty() ||
        (reach_ && !reach_(*now).is_ok())) {
      return std::optional<SshEndpoint>();
    }
    auto opened = forwards_.open(ticket, now->address, wanted);
    if (!opened.is_ok()) {
      if (opened.status().code() == ErrorCode::kConflict) return std::optional<SshEndpoint>();
      return opened.status();
    }
    open = std::move(opened).value();
  }
  SshEndpoint ep;
  for (const ForwardInfo& f : open) {
    if (f.guest_port == guest_ssh_port_) {
      ep.host = f.host;
      ep.port = f.port;
    } else {
      ep.extra.push_back(f);
    }
  }
  if (ep.port == 0) return std::optional<SshEndpoint>();
  ep.host_keys = lease.host_keys;  // read by the engine before the lease was ready
  return std::optional<SshEndpoint>(std::move(ep));
}

Result<LeaseAccess::TunnelTarget> LeaseAccess::tunnel_target(const Lease& lease, int port) {
  std::string allowed = std::to_string(guest_ssh_port_);
  bool ok = port == guest_ssh_port_;
  {
    MutexLock lock(mu_);
    if (auto it = ports_.find(lease.id); it != ports_.end()) {
      for (int p : it->second) {
        allowed += ", " + std::to_string(p);
        ok = ok || p == port;
      }
    }
  }
  if (!ok) {
    return invalid_argument("port", "lease " + lease.id + " has no port " + std::to_string(port) +
                                        " to tunnel to (its ports: " + allowed +
                                        "; ask for more with \"ports\" when creating it)");
  }
  if (reach_) {
    if (Status reach = reach_(lease); !reach.is_ok()) {
      return Status(ErrorCode::kConflict, reach.message(), lease.id);
    }
  }
  ARMHIVE_ASSIGN_OR_RETURN(std::optional<SshEndpoint> ep, ssh_endpoint(lease));
  if (!ep) return conflict("lease " + lease.id + " is not ready: it has no address yet", lease.id);
  return TunnelTarget{lease.address, port};
}

void LeaseAccess::set_user_ca(std::string public_key) { user_ca_ = std::move(public_key); }

Status LeaseAccess::install_trust(const Lease& lease) {
  if (user_ca_.empty()) return Status::ok();
  {
    MutexLock lock(mu_);
    if (trusted_.count(lease.id)) return Status::ok();
  }
  GuestExecRequest req;
  req.argv = {"sh", "-c", kTrustScript, "sh", user_ca_, lease_principal(lease.id)};
  req.timeout = std::chrono::seconds(20);
  auto r = leases_.exec(lease.id, req);
  if (!r.is_ok()) return r.status().annotate("writing the lease's SSH trust into the guest");
  if (r->exit_code != 0) {
    return unavailable("the guest did not take the SSH trust (exit " +
                           std::to_string(r->exit_code) + "): " + r->err.substr(0, 200),
                       lease.id);
  }
  MutexLock lock(mu_);
  trusted_.insert(lease.id);
  return Status::ok();
}

void LeaseAccess::warn_expiring() {
  std::set<std::string> live;
  for (const std::string& id : forwards_.leases()) {
    auto l = leases_.get_lease(id);
    if (!l.is_ok() || l->state != LeaseState::kReady || l->purpose != Purpose::kDev) continue;
    live.insert(id);
    const TimePoint now = clock_.now();
    if (due_expiry_warning(warned_[id], l->expires_at, now) == 0) continue;
    GuestExecRequest req;
    req.argv = {"sh", "-c", kWallScript, "sh", expiry_warning_text(id, l->expires_at, now)};
    req.timeout = std::chrono::seconds(10);
    auto r = leases_.exec(id, req);
    if (!r.is_ok()) {
      spdlog::warn("lease {}: expiry warning not shown: {}", id, r.status().to_string());
    }
  }
  std::erase_if(warned_, [&](const auto& kv) { return !live.count(kv.first); });
}

void LeaseAccess::on_event(const Event& event) {
  if (event.lease_id.empty() || event.type.rfind("lease.", 0) != 0) return;
  const std::string state = event.type.substr(6);
  if (state == "ready") {
    auto lease = leases_.get_lease(event.lease_id);
    // It may have ended since: the event for that follows and closes whatever opens here.
    if (!lease.is_ok()) return;
    if (lease->state != LeaseState::kReady) {
      forwards_.close(lease->id, std::string(to_string(lease->state)));
      return;
    }
    auto ep = ssh_endpoint(*lease);
    if (!ep.is_ok()) {
      spdlog::warn("lease {}: no SSH forward: {}", lease->id, ep.status().to_string());
    }
    if (Status s = install_trust(*lease); !s.is_ok()) {
      spdlog::warn("lease {}: SSH trust not written yet: {}", lease->id, s.to_string());
    }
    return;
  }
  auto s = lease_state_from_string(state);
  if (s && (*s == LeaseState::kReleasing || is_terminal(*s))) {
    forwards_.close(event.lease_id, state);
    forget(event.lease_id);
  }
}

void LeaseAccess::forget(const std::string& lease_id) {
  MutexLock lock(mu_);
  ports_.erase(lease_id);
  trusted_.erase(lease_id);
}

void LeaseAccess::sweep() {
  for (const std::string& id : forwards_.leases()) {
    auto l = leases_.get_lease(id);
    if (!l.is_ok()) {
      // A lease the engine no longer knows has ended; a store that fails to answer is no
      // reason to cut anyone: the next sweep looks again.
      if (l.status().code() != ErrorCode::kNotFound) continue;
      forwards_.close(id, "lease gone (sweep)");
      forget(id);
      continue;
    }
    if (l->state != LeaseState::kReady && l->state != LeaseState::kHostUnreachable) {
      forwards_.close(id, std::string(to_string(l->state)) + " (sweep)");
      forget(id);
      continue;
    }
    if (reach_ && !reach_(*l).is_ok()) {
      forwards_.close(id, "unreachable (sweep)");
      continue;
    }
    const std::vector<ForwardInfo> open = forwards_.find(id);
    const bool moved = std::any_of(open.begin(), open.end(), [&](const ForwardInfo& f) {
      return f.guest_address != l->address;
    });
    if (!moved) continue;
    // Another VM answers at the old address now, or none: the forwards follow the lease.
    forwards_.close(id, "VM address changed (sweep)");
    {
      MutexLock lock(mu_);
      trusted_.erase(id);
    }
    if (l->state != LeaseState::kReady) continue;
    if (auto ep = ssh_endpoint(*l); !ep.is_ok()) {
      spdlog::warn("lease {}: no SSH forward: {}", id, ep.status().to_string());
    }
    if (Status st = install_trust(*l); !st.is_ok()) {
      spdlog::warn("lease {}: SSH trust not written yet: {}", id, st.to_string());
    }
  }
}

void LeaseAccess::watch() {
  // Resume after the newest event: leases that are ready now are handled from the list below,
  // and any change after it arrives as an event.
  uint64_t seq = 0;
  auto recent = leases_.events_since(0, std::chrono::milliseconds(0));
  if (!recent.empty()) seq = recent.back().seq;
  LeaseFilter ready;
  ready.state = LeaseState::kReady;
  ready.include_ended = false;
  ready.limit = 100000;
  if (auto list = leases_.list_leases(ready); list.is_ok()) {
    for (const Lease& l : *list) {
      (void)ssh_endpoint(l);
      if (Status st = install_trust(l); !st.is_ok()) {
        spdlog::warn("lease {}: SSH trust not written: {}", l.id, st.to_string());
      }
    }
  }
  // Forwards of leases that are no longer ready (ended while the watcher was not looking).
  sweep();
  auto next_warning_check = std::chrono::steady_clock::now();
  auto next_sweep = next_warning_check + sweep_period_;
  while (!stop_) {
    const std::vector<Event> events = leases_.events_since(seq, std::chrono::milliseconds(500));
    // The engine keeps a bounded buffer: a gap in the sequence means events were lost.
    const bool lost = !events.empty() && seq != 0 && events.front().seq > seq + 1;
    for (const Event& e : events) {
      seq = std::max(seq, e.seq);
      on_event(e);
    }
    const auto now = std::chrono::steady_clock::now();
    if (lost || now >= next_sweep) {
      sweep();
      next_sweep = now + sweep_period_;
    }
    if (now >= next_warning_check) {
      warn_expiring();
      next_warning_check = now + std::chrono::seconds(5);
    }
  }
}

}  // namespace armhive
