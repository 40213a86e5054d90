#include "daemon/virt/domain_events.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <vector>

#include "daemon/virt/error.h"
#include "daemon/virt/event_loop.h"

namespace armhive {

namespace {

using SubscribersPtr = std::shared_ptr<DomainEvents::Subscribers>;

void free_opaque(void* opaque) { delete static_cast<SubscribersPtr*>(opaque); }

const char* stopped_detail(int detail) {
  switch (detail) {
    case VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN:
      return "shutdown";
    case VIR_DOMAIN_EVENT_STOPPED_DESTROYED:
      return "destroyed";
    case VIR_DOMAIN_EVENT_STOPPED_CRASHED:
      return "crashed";
    case VIR_DOMAIN_EVENT_STOPPED_MIGRATED:
      return "migrated";
    case VIR_DOMAIN_EVENT_STOPPED_SAVED:
      return "saved";
    case VIR_DOMAIN_EVENT_STOPPED_FAILED:
      return "failed";
    case VIR_DOMAIN_EVENT_STOPPED_FROM_SNAPSHOT:
      return "from-snapshot";
    default:
      return "unknown";
  }
}

const char* started_detail(int detail) {
  switch (detail) {
    case VIR_DOMAIN_EVENT_STARTED_BOOTED:
      return "booted";
    case VIR_DOMAIN_EVENT_STARTED_MIGRATED:
      return "migrated";
    case VIR_DOMAIN_EVENT_STARTED_RESTORED:
      return "restored";
    case VIR_DOMAIN_EVENT_STARTED_FROM_SNAPSHOT:
      return "from-snapshot";
    case VIR_DOMAIN_EVENT_STARTED_WAKEUP:
      return "wakeup";
    default:
      return "unknown";
  }
}

int on_lifecycle(virConnectPtr /*conn*/, virDomainPtr dom, int event, int detail, void* opaque) {
  VmEvent ev;
  if (!lifecycle_to_vm_event(event, detail, ev)) return 0;
  const char* name = virDomainGetName(dom);
  ev.name = name != nullptr ? name : "";
  (*static_cast<SubscribersPtr*>(opaque))->dispatch(ev);
  return 0;
}

void on_agent(virConnectPtr /*conn*/, virDomainPtr dom, int state, int reason, void* opaque) {
  VmEvent ev;
  if (state == VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_CONNECTED) {
    ev.kind = VmEventKind::kAgentConnected;
  } else if (state == VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_DISCONNECTED) {
    ev.kind = VmEventKind::kAgentDisconnected;
  } else {
    return;
  }
  switch (reason) {
    case VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_REASON_DOMAIN_STARTED:
      ev.detail = "domain-started";
      break;
    case VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_REASON_CHANNEL:
      ev.detail = "channel";
      break;
    default:
      ev.detail = "unknown";
      break;
  }
  const char* name = virDomainGetName(dom);
  ev.name = name != nullptr ? name : "";
  (*static_cast<SubscribersPtr*>(opaque))->dispatch(ev);
}

}  // namespace

bool lifecycle_to_vm_event(int event, int detail, VmEvent& out) {
  switch (event) {
    case VIR_DOMAIN_EVENT_STARTED:
      out.kind = VmEventKind::kStarted;
      out.detail = started_detail(detail);
      return true;
    case VIR_DOMAIN_EVENT_STOPPED:
      out.kind =
          (detail == VIR_DOMAIN_EVENT_STOPPED_CRASHED || detail == VIR_DOMAIN_EVENT_STOPPED_FAILED)
              ? VmEventKind::kCrashed
              : VmEventKind::kStopped;
      out.detail = stopped_detail(detail);
      return true;
    case VIR_DOMAIN_EVENT_CRASHED:
      out.kind = VmEventKind::kCrashed;
      out.detail = detail == VIR_DOMAIN_EVENT_CRASHED_PANICKED ? "panicked" : "crashed";
      return true;
    default:
      return false;
  }
}

void DomainEvents::Subscribers::dispatch(const VmEvent& event) {
  std::vector<int> ids;
  {
    std::lock_guard lock(mu);
    for (auto& [id, h] : handlers) ids.push_back(id);
    ++dispatching;
    dispatch_thread = std::this_thread::get_id();
  }
  // Handlers run without the lock (one may unsubscribe itself) but are looked up again each
  // time, so one unsubscribed by an earlier handler of this event is not called.
  for (int id : ids) {
    Handler h;
    {
      std::lock_guard lock(mu);
      auto it = handlers.find(id);
      if (it == handlers.end()) continue;
      h = it->second;
    }
    h(event);
  }
  {
    std::lock_guard lock(mu);
    --dispatching;
  }
  idle.notify_all();
}

Result<std::unique_ptr<DomainEvents>> DomainEvents::attach(const Connection& connection) {
  std::unique_ptr<DomainEvents> self(new DomainEvents());
  // Its own connection: registered here, deregistered by the destructor on whichever thread
  // ends it, and used by nobody else meanwhile (connection.h says why that matters).
  ARMHIVE_ASSIGN_OR_RETURN(self->conn_, connection.open_dedicated());
  self->subscribers_ = std::make_shared<Subscribers>();
  auto* op1 = new SubscribersPtr(self->subscribers_);
  self->lifecycle_id_ =
      virConnectDomainEventRegisterAny(self->conn_.get(), nullptr, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                       VIR_DOMAIN_EVENT_CALLBACK(on_lifecycle), op1, free_opaque);
  if (self->lifecycle_id_ < 0) {
    delete op1;
    return libvirt_error("register domain lifecycle events", connection.uri());
  }
  auto* op2 = new SubscribersPtr(self->subscribers_);
  self->agent_id_ = virConnectDomainEventRegisterAny(
      self->conn_.get(), nullptr, VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE,
      VIR_DOMAIN_EVENT_CALLBACK(on_agent), op2, free_opaque);
  if (self->agent_id_ < 0) {
    // Drivers without agent events (test:///) still deliver lifecycle events.
    delete op2;
    virResetLastError();
  }
  wake_event_loop();
  return self;
}

DomainEvents::~DomainEvents() noexcept {
  if (!conn_) return;
  if (lifecycle_id_ >= 0 && virConnectDomainEventDeregisterAny(conn_.get(), lifecycle_id_) < 0) {
    virResetLastError();
  }
  if (agent_id_ >= 0 && virConnectDomainEventDeregisterAny(conn_.get(), agent_id_) < 0) {
    virResetLastError();
  }
  // A callback already running on the loop thread still holds the subscribers.
  subscribers_->clear();
}

bool DomainEvents::alive() const {
  int a = virConnectIsAlive(conn_.get());
  if (a < 0) virResetLastError();
  return a == 1;
}

int DomainEvents::subscribe(Handler handler) { return subscribers_->add(std::move(handler)); }

void DomainEvents::unsubscribe(int id) { subscribers_->remove(id); }

int DomainEvents::Subscribers::add(Handler handler) {
  std::lock_guard lock(mu);
  int id = next_id++;
  handlers.emplace(id, std::move(handler));
  return id;
}

void DomainEvents::Subscribers::clear() {
  std::unique_lock lock(mu);
  handlers.clear();
  if (dispatching > 0 && dispatch_thread == std::this_thread::get_id()) return;  // in a handler
  idle.wait(lock, [&] { return dispatching == 0; });
}

void DomainEvents::Subscribers::remove(int id) {
  std::unique_lock lock(mu);
  handlers.erase(id);
  if (dispatching > 0 && dispatch_thread == std::this_thread::get_id()) return;  // in a handler
  idle.wait(lock, [&] { return dispatching == 0; });
}

}  // namespace armhive
