#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "base/result.h"
#include "daemon/core/hypervisor.h"
#include "daemon/virt/connection.h"

namespace armhive {

// Domain lifecycle (VIR_DOMAIN_EVENT_ID_LIFECYCLE) and guest-agent lifecycle
// (VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE) events of one connection, delivered to subscribers as
// VmEvents. Only started / stopped / crashed and agent connected / disconnected are delivered;
// define, undefine, suspend and resume are not.
//
// Threading: subscribers run on the EventLoop thread (an EventLoop must be running for any
// event to arrive): copy what you need and return at once, never call libvirt from there.
// subscribe()/unsubscribe() may be called from any thread. Once unsubscribe() returns, the
// handler is not running and never runs again (it waits for a dispatch in progress), so its
// owner may be destroyed; called from inside a handler (on the EventLoop thread) it cannot wait
// for itself and returns at once.
class DomainEvents {
 public:
  using Handler = std::function<void(const VmEvent&)>;

  // Registers both callbacks on a connection of its own (Connection::open_dedicated). Once
  // that connection is closed (libvirtd restarted, keepalive lost: alive() is false) no event
  // arrives any more: attach a new DomainEvents.
  static Result<std::unique_ptr<DomainEvents>> attach(const Connection& connection);
  // Deregisters the callbacks and drops every handler, waiting for a dispatch in progress
  // (unless called from one): no handler runs after it returns, so what a handler captured may
  // go right after (ASan saw an event reach a test's destroyed recorder).
  ~DomainEvents() noexcept;
  DomainEvents(const DomainEvents&) = delete;
  DomainEvents& operator=(const DomainEvents&) = delete;

  // Whether events still arrive: its connection is open.
  bool alive() const;
  int subscribe(Handler handler);  // returns an id for unsubscribe()
  void unsubscribe(int id);

  // Shared with libvirt's callback registrations (which keep it alive until freed).
  struct Subscribers {
    std::mutex mu;
    std::condition_variable idle;  // signalled when a dispatch ends
    std::map<int, Handler> handlers;
    int next_id = 1;
    int dispatching = 0;  // dispatches running (on the EventLoop thread)
    std::thread::id dispatch_thread;
    void dispatch(const VmEvent& event);
    int add(Handler handler);
    void remove(int id);  // waits for a dispatch in progress (unless called from one)
    void clear();         // every handler; waits as remove()
  };

 private:
  DomainEvents() = default;
  ConnectPtr conn_;
  std::shared_ptr<Subscribers> subscribers_;
  int lifecycle_id_ = -1;
  int agent_id_ = -1;
};

// Exposed for tests: the VmEvent for a libvirt lifecycle event, if it is one we deliver.
bool lifecycle_to_vm_event(int event, int detail, VmEvent& out);

}  // namespace armhive
