#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/core/health_series.h"
#include "daemon/core/host_health.h"
#include "daemon/core/hypervisor.h"
#include "daemon/core/lease.h"
#include "daemon/core/lease_filter.h"
#include "daemon/core/topology.h"
#include "daemon/core/usage_report.h"

namespace armhive {

// The lease engine as the HTTP API sees it. Authorization (who may see which lease) is the
// caller's job; the service trusts `owner` fields it is given.
//
// Threading: every method is thread-safe and may be called from HTTP worker threads. Methods
// that wait (wait_lease, events_since) block the calling thread only.

struct Event {
  uint64_t seq = 0;  // strictly increasing; resume with events_since(seq)
  TimePoint at;
  std::string type;  // "lease.created", "lease.ready", "lease.failed", "vm.crashed", ...
  std::string lease_id;
  std::string vm_name;
  std::string pool;
  std::string owner;
  std::string state;
  std::string detail;
};

struct CoreUse {
  int cpu = 0;
  std::string role;     // "housekeeping", "dedicated", "shared"
  std::string vm_name;  // empty when free
  std::string lease_id;
  std::string pool;
};

// Whether the engine's calls to the host (libvirt) and the database are succeeding.
enum class HostState { kOk, kDegraded, kUnreachable };
inline std::string_view to_string(HostState s) {
  return s == HostState::kOk ? "ok" : s == HostState::kDegraded ? "degraded" : "unreachable";
}

struct HostView {
  HostTopology topology;
  std::string uri;                            // its libvirt URI (empty: not known)
  std::map<std::string, std::string> labels;  // what pools select it by
  std::vector<CoreUse> cores;
  double fragmentation = 0;  // 0 = free cores form whole clusters/nodes; 1 = fully scattered
  // degraded: recent hypervisor or database calls failed (counted in /metrics); last_error
  // says which and why, and stays after the host is ok again.
  // unreachable: its probe missed its deadline or its connection is gone (last_error says
  // which, since when in unreachable_since); its leases show host_unreachable.
  HostState state = HostState::kOk;
  std::string last_error;
  TimePoint last_error_at;
  std::optional<TimePoint> unreachable_since;
  // The newest health benchmark result of each pool with a schedule (daemon/bench
  // health_scheduler.h); any of them "degraded" makes `state` degraded too.
  std::vector<HealthResult> health;
  // What the admin asked (set_host_admin): drain or maintenance take no new VMs.
  HostHealthTracker::Admin admin = HostHealthTracker::Admin::kNone;
};

class LeaseService {
 public:
  virtual ~LeaseService() = default;

  // Validates the request against the pool (kNotFound for an unknown pool, kInvalidArgument
  // naming the field, kUnprocessable when it can never fit) and returns at once: ready when a
  // warm VM was handed out, otherwise pending/provisioning. A repeated idempotency key of the
  // same owner returns the existing lease.
  virtual Result<Lease> create_lease(const LeaseRequest& request) = 0;
  virtual Result<Lease> get_lease(const std::string& id) = 0;
  virtual Result<std::vector<Lease>> list_leases(const LeaseFilter& filter) = 0;
  // Leases matching `filter` (its limit and cursor ignored), by state. For quotas and
  // /metrics, which must be right at any number of leases. This default pages through
  // list_leases; a service with a database counts there instead.
  virtual Result<std::map<LeaseState, size_t>> count_leases(const LeaseFilter& filter) {
    LeaseFilter page = filter;
    page.limit = kMaxListLimit;
    page.after_id.clear();
    std::map<LeaseState, size_t> counts;
    for (;;) {
      auto listed = list_leases(page);
      if (!listed.is_ok()) return listed.status();
      for (const Lease& l : *listed) ++counts[l.state];
      if (listed->size() < page.limit || listed->empty()) return counts;
      page.after_id = listed->back().id;
    }
  }
  // What the leases created in q's window used, per group (GET /v1/usage; daemon/core/
  // usage_report.h). This default pages through list_leases and aggregates in memory; the
  // engine sums in SQL.
  virtual Result<std::vector<UsageRow>> usage(const UsageQuery& q) {
    return usage_by_paging(q, [this](const LeaseFilter& f) { return list_leases(f); });
  }
  // Blocks until the lease is ready or terminal, or until timeout; returns its state then.
  virtual Result<Lease> wait_lease(const std::string& id, std::chrono::milliseconds timeout) = 0;
  // Sets expires_at = now + ttl (bounded by the pool's max_ttl).
  virtual Result<Lease> renew_lease(const std::string& id, Seconds ttl) = 0;
  // Ends a lease in any non-terminal state (cancels it while pending/provisioning).
  virtual Result<Lease> release_lease(const std::string& id) = 0;

  virtual Result<GuestExecResult> exec(const std::string& lease_id,
                                       const GuestExecRequest& request) = 0;
  // Like exec(), with the output handed to `sink` while the command runs; it also ends (the
  // process killed, `cancelled` set) when the lease stops being ready. The default runs exec()
  // and delivers the output at the end (services that cannot stream); a zero timeout becomes
  // one hour there.
  virtual Result<GuestExecResult> exec_stream(const std::string& lease_id,
                                              const GuestExecRequest& request, ExecSink& sink) {
    GuestExecRequest buffered = request;
    if (buffered.timeout <= std::chrono::milliseconds::zero()) {
      buffered.timeout = std::chrono::hours(1);
    }
    ARMHIVE_ASSIGN_OR_RETURN(GuestExecResult r, exec(lease_id, buffered));
    sink.started();
    if (!r.out.empty()) sink.output(ExecOutputStream::kStdout, r.out);
    if (!r.err.empty()) sink.output(ExecOutputStream::kStderr, r.err);
    r.out.clear();
    r.err.clear();
    return r;
  }
  virtual Result<std::string> console(const std::string& lease_id, size_t max_bytes) = 0;

  // `armhive cp` into and out of a ready lease's VM (GuestAgent::put_file/get_file has the
  // transfer's contract) under its pool's [pools.files] policy: the path must pass
  // check_guest_path (400/403 naming `path`) and the size check_transfer_size (413 naming
  // files.max_bytes), both checked before anything is read from `source` or sent to the
  // guest; a download's size is checked when the guest announces it, before sink.write().
  // 409 when the lease is not ready. The defaults: kUnavailable (a service without guests).
  virtual Result<GuestFileTransfer> put_file(const std::string& lease_id, const GuestFilePut& put,
                                             ByteSource& source) {
    (void)put;
    (void)source;
    return unavailable("this service cannot transfer guest files", lease_id);
  }
  virtual Result<GuestFileTransfer> get_file(const std::string& lease_id, const std::string& path,
                                             ByteSink& sink) {
    (void)path;
    (void)sink;
    return unavailable("this service cannot transfer guest files", lease_id);
  }

  virtual std::vector<PoolStatus> pools() = 0;
  virtual std::vector<HostView> hosts() = 0;

  // Events with seq > after, waiting up to timeout for the first one.
  virtual std::vector<Event> events_since(uint64_t after, std::chrono::milliseconds timeout) = 0;

  // Adds an event about a lease from outside the engine (daemon/access: "forward.opened",
  // "forward.connection", "ssh.certificate"...) to the same stream, with the lease's owner,
  // pool and state, so /v1/events shows it to whoever may see the lease. An unknown or
  // forgotten lease: nothing is recorded. Thread-safe; the default records nothing.
  virtual void record_event(const std::string& lease_id, std::string type, std::string detail) {
    (void)lease_id;
    (void)type;
    (void)detail;
  }
  // An event about a pool rather than a lease (health benchmarks: "health.postponed",
  // "host.degraded"...), with no owner: only admins see it. The default records nothing.
  virtual void record_pool_event(const std::string& pool, std::string type, std::string detail) {
    (void)pool;
    (void)type;
    (void)detail;
  }
  // The health results hosts() shows (HostView::health). The default keeps nothing.
  virtual void set_host_health(std::vector<HealthResult> latest) { (void)latest; }

  // The admin's drain, maintenance or undrain (kNone) of host `host` (a hosts() hostname).
  // While drained or in maintenance the host takes no new VMs: no warm refills, no boots for
  // leases; waiting leases show queue reason `host_draining`; its free warm VMs are destroyed;
  // leased VMs run until their leases end. kNone restores normal scheduling. Saved before it
  // takes effect (a restart keeps it); setting the state a host already has changes nothing
  // and records no event. kNotFound naming field `name` for an unknown host. The default:
  // kUnavailable (a service without hosts to drain).
  virtual Status set_host_admin(const std::string& host, HostHealthTracker::Admin admin) {
    (void)admin;
    return unavailable("this service cannot drain hosts", host);
  }
};

}  // namespace armhive
