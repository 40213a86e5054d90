#include "daemon/access/lease_access.h"

#include <spdlog/spdlog.h>

namespace armhive {

LeaseAccess::LeaseAccess(LeaseService& leases, ForwardTable& forwards, int guest_ssh_port)
    : leases_(leases), forwards_(forwards), guest_ssh_port_(guest_ssh_port) {}

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
  auto open = forwards_.open(lease.id, lease.address, {guest_ssh_port_});
  if (!open.is_ok()) return open.status();
  for (const ForwardInfo& f : *open) {
    if (f.guest_port == guest_ssh_port_)
      return std::optional<SshEndpoint>(SshEndpoint{f.host, f.port});
  }
  return std::optional<SshEndpoint>();
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
    return;
  }
  auto s = lease_state_from_string(state);
  if (s && (*s == LeaseState::kReleasing || is_terminal(*s))) {
    forwards_.close(event.lease_id, state);
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
    for (const Lease& l : *list) (void)ssh_endpoint(l);
  }
  // Forwards of leases that are no longer ready (ended while the watcher was not looking).
  for (const std::string& id : forwards_.leases()) {
    auto l = leases_.get_lease(id);
    if (!l.is_ok() || l->state != LeaseState::kReady) forwards_.close(id, "not ready");
  }
  while (!stop_) {
    for (const Event& e : leases_.events_since(seq, std::chrono::milliseconds(500))) {
      seq = std::max(seq, e.seq);
      on_event(e);
    }
  }
}

}  // namespace armhive
