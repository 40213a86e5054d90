#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/metrics.h"
#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/access/tcp_forward.h"
#include "daemon/core/event_throttle.h"

namespace armhive {

struct AccessOptions {
  std::string listen_address = "127.0.0.1";  // where forwards listen ([access] listen)
  std::string advertise_host;                // what clients dial (ssh.host); empty: listen_address
  int port_min = 22000;
  int port_max = 22999;
  int threads = 2;  // io_context threads relaying the forwarded connections
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // Session caps: per forward, and for every forward of the host together. A connection over
  // either is accepted and closed at once, counted in armhive_forward_sessions_refused_total
  // {cap="forward"|"host"} and logged at most once per kRefusalLogPeriod (never audited: a
  // stranger's flood must not write rows).
  int max_sessions_per_forward = 64;
  int max_sessions = 1024;
  // A session that carries nothing either way for this long is closed. Zero: never.
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(15)};
};

// One open forward of a lease: advertise_host:port on the host -> guest_port in the VM.
struct ForwardInfo {
  std::string lease_id;
  int guest_port = 0;
  std::string host;           // the advertised host
  int port = 0;               // the host port
  std::string guest_address;  // where it relays to (the VM's address when it opened)
};

// What the forwards did, for the audit log and the daemon's log.
struct AccessEvent {
  std::string type;  // "forward.opened", "forward.closed", "forward.connection",
                     // "forward.connection_failed"
  std::string lease_id;
  std::string detail;  // "10.78.0.1:22001 -> 10.77.0.12:22", "from 10.78.0.2:40112", ...
};
using AccessEventSink = std::function<void(const AccessEvent&)>;

// The per-lease TCP forwards of this host, on Boost.Asio.
//
// Ports: each forward takes the next free port of [port_min, port_max] (round robin, so a
// port just released is not handed to the next lease at once); a port some other process holds
// is skipped; an exhausted range is kUnavailable naming the range.
//
// Ownership: owns its io_context, worker threads, every TcpForward and an event thread that
// delivers AccessEvents to the sink (so a sink writing SQLite never blocks a relay thread).
// Threading: public methods are thread-safe. mu_ guards the lease → forwards map and the
// reserved ports; it is never held while binding a socket or calling the sink. open_mu_ makes
// open() calls one at a time (held across the binds): two callers opening the same lease's
// forward at once (the lease-event watcher and an API read) otherwise each took a port, and
// with one port left in the range the second failed as "no free port".
class ForwardTable {
 public:
  // `metrics` (borrowed, may be null) counts the connections refused over the session caps.
  static Result<std::unique_ptr<ForwardTable>> start(AccessOptions options, AccessEventSink sink,
                                                     Metrics* metrics = nullptr);
  ~ForwardTable() noexcept;  // stop()
  ForwardTable(const ForwardTable&) = delete;
  ForwardTable& operator=(const ForwardTable&) = delete;

  // Marks when a caller read the lease it is about to open forwards for. Take it *before*
  // reading the lease: open() with it then refuses when close() of that lease came after it,
  // so a reader whose lease was released meanwhile (or whose VM address changed) never
  // reopens the forward that close() just closed. Move-only; lives until the open is done and
  // never outlives the table. Memory: an entry per lease with tickets out, none after.
  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&&) = delete;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() noexcept;
    const std::string& lease_id() const { return lease_id_; }

   private:
    friend class ForwardTable;
    Ticket(ForwardTable* table, std::string lease_id, uint64_t closes_seen);
    ForwardTable* table_;
    std::string lease_id_;
    uint64_t closes_seen_;
  };
  Ticket ticket(const std::string& lease_id);

  // Opens one forward per guest port (the first is SSH, by convention) to guest_address, or
  // returns the lease's forwards when they are open already. On failure nothing stays open.
  // kConflict (nothing opened) when close() of the lease came after `ticket` was taken.
  Result<std::vector<ForwardInfo>> open(const Ticket& ticket, const std::string& guest_address,
                                        const std::vector<int>& guest_ports);
  // The same with a ticket taken now: for callers whose guest_address is current (tests).
  Result<std::vector<ForwardInfo>> open(const std::string& lease_id,
                                        const std::string& guest_address,
                                        const std::vector<int>& guest_ports);
  // Closes the lease's forwards and cuts their connections; unknown leases are ignored.
  void close(const std::string& lease_id, const std::string& reason);
  // Ties something else that must end with the lease's access (an API tunnel) to it: `cut` is
  // called, outside the lock, when close() or stop() ends the lease's forwards; it must return
  // at once. nullopt (and `cut` never called) when the lease has no open forward: it is not
  // ready or has ended already. Never blocks (no bind, no I/O).
  std::optional<uint64_t> attach(const std::string& lease_id, std::function<void()> cut);
  // Forgets an attachment whose tunnel ended by itself; unknown ones are ignored.
  void detach(const std::string& lease_id, uint64_t id);
  // The lease's open forwards (empty when none).
  std::vector<ForwardInfo> find(const std::string& lease_id) const;
  std::vector<std::string> leases() const;
  // Closes everything and joins the threads. Idempotent.
  void stop();
  // A reload ([access] max_sessions_per_forward, max_sessions, forward_idle_timeout): the host
  // cap at once (sessions over a lowered one run on; new ones wait for room), the per-forward
  // cap and idle timeout for forwards opened from now on (an open forward keeps its own: it is
  // a running listener, and its sessions' timers were set with them). A table started without a
  // host cap (max_sessions 0) keeps none. Thread-safe; no I/O.
  void set_limits(int max_sessions_per_forward, int max_sessions,
                  std::chrono::milliseconds idle_timeout) EXCLUDES(mu_);

 private:
  struct Open {
    ForwardInfo info;
    std::shared_ptr<TcpForward> forward;
  };
  explicit ForwardTable(AccessOptions options, AccessEventSink sink, Metrics* metrics);
  // Queues an event for the sink; past kMaxQueuedEvents the oldest is dropped and counted
  // (one "forward.events_dropped" event says how many).
  void emit(AccessEvent event);
  // A connection refused over a cap (on a forward's strand): counted, logged now and then.
  void refused(const std::string& lease_id, const std::string& where, const ForwardConnection& c);
  // A connection to a forward port: anyone who reaches the port causes one, so they are rate
  // limited per (lease, type, peer address) by connections_ (issue 33 finding 3): a flood is
  // a few events a minute and one summary event counting the rest.
  void note_connection(const std::string& lease_id, const std::string& target,
                       const ForwardConnection& c);
  void deliver_loop();
  Result<Open> open_one(const std::string& lease_id, const std::string& guest_address,
                        int guest_port);

  AccessOptions options_;
  AccessEventSink sink_;
  Metrics* metrics_;
  std::shared_ptr<SessionBudget> budget_;  // the host-wide cap, shared by every forward

  // The rate-limited log line of refusals.
  static constexpr std::chrono::seconds kRefusalLogPeriod{10};
  Mutex refusal_mu_;
  // never: the first one is logged
  std::chrono::steady_clock::time_point refusal_logged_ GUARDED_BY(refusal_mu_){};
  uint64_t refusals_unlogged_ GUARDED_BY(refusal_mu_) = 0;
  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;

  Mutex open_mu_ ACQUIRED_BEFORE(mu_);  // never taken inside mu_
  mutable Mutex mu_;
  std::map<std::string, std::vector<Open>> leases_ GUARDED_BY(mu_);
  std::set<int> reserved_ GUARDED_BY(mu_);  // ports held by open (or opening) forwards
  // Leases with tickets out: how many, and how many close() calls came since the first was
  // taken (an entry lives while tickets do, so the map holds only leases being opened).
  struct Tickets {
    int out = 0;
    uint64_t closes = 0;
  };
  std::map<std::string, Tickets> tickets_ GUARDED_BY(mu_);
  // lease id -> attachment id -> cut (tunnels through the API)
  std::map<std::string, std::map<uint64_t, std::function<void()>>> attached_ GUARDED_BY(mu_);
  uint64_t next_attachment_ GUARDED_BY(mu_) = 1;
  int next_port_ GUARDED_BY(mu_) = 0;
  bool stopped_ GUARDED_BY(mu_) = false;
  // options_'s per-forward cap and idle timeout as a reload left them (set_limits).
  int max_sessions_per_forward_ GUARDED_BY(mu_);
  std::chrono::milliseconds idle_timeout_ GUARDED_BY(mu_);

  static constexpr size_t kMaxQueuedEvents = 4096;
  EventThrottle connections_;  // thread-safe; taken inside events_mu_, never the reverse
  Mutex events_mu_;
  std::condition_variable_any events_cv_;
  std::deque<AccessEvent> events_ GUARDED_BY(events_mu_);  // at most kMaxQueuedEvents
  uint64_t events_dropped_ GUARDED_BY(events_mu_) = 0;
  bool events_stop_ GUARDED_BY(events_mu_) = false;
  std::thread events_thread_;
};

}  // namespace armhive
