// Leases: create (quotas, Idempotency-Key fingerprints), list (paging), get (+ long-poll),
// renew, release, exec, console.
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <stop_token>

#include "api/json.h"
#include "base/validation.h"
#include "daemon/core/dev_limits.h"
#include "daemon/core/list_limit.h"
#include "daemon/http/convert.h"
#include "daemon/http/event_hub.h"
#include "daemon/http/exec_stream_handler.h"
#include "daemon/http/handlers.h"
#include "daemon/http/middleware.h"
#include "daemon/http/params.h"

namespace armhive {
namespace {

using nlohmann::json;

constexpr size_t kMaxConsoleBytes = 1 << 20;
constexpr size_t kDefaultConsoleBytes = 64 * 1024;
constexpr size_t kMaxIdempotencyKey = 128;

Status exhausted(std::string message) {
  return {ErrorCode::kResourceExhausted, std::move(message)};
}

Status check_idempotency_key(const std::string& key) {
  if (key.size() > kMaxIdempotencyKey) {
    return invalid_argument("Idempotency-Key", "must be at most 128 characters");
  }
  for (char c : key) {
    if (c < 0x21 || c > 0x7e) {
      return invalid_argument("Idempotency-Key", "must be printable ASCII without spaces");
    }
  }
  return Status::ok();
}

DevLimits dev_limits_of(const TokenInfo& t) {
  return {t.dev_max_leases, t.dev_max_ttl, t.dev_max_lifetime};
}

bool settled(const Lease& l) { return l.state == LeaseState::kReady || is_terminal(l.state); }

// A lease as the API shows it, through HttpOptions::lease_view when set (daemon/access: the
// ssh host and port of the lease's forward).
Result<LeaseDto> lease_dto(const ServerContext& ctx, const Lease& l) {
  LeaseDto d = to_dto(l);
  if (ctx.options.lease_view) ARMHIVE_RETURN_IF_ERROR(ctx.options.lease_view(l, d));
  if (ctx.options.startup_view) ctx.options.startup_view(l, d);
  return d;
}

// Answers 200 with the lease as the API shows it.
Status write_lease(const ServerContext& ctx, Call& c, const Lease& l) {
  ARMHIVE_ASSIGN_OR_RETURN(LeaseDto dto, lease_dto(ctx, l));
  write_json(c.res, 200, to_json(dto));
  return Status::ok();
}

// One waiting `GET /v1/leases/{id}?wait=ready`: a hub waiter (woken by events naming the
// lease), a deadline timer on the connection, and a stop callback. Whichever fires first
// answers, once, with the lease as it is then; nothing holds a thread while it waits. Service
// calls (get_lease) run on the worker pool.
class LongPoll : public std::enable_shared_from_this<LongPoll> {
 public:
  LongPoll(ServerContext& ctx, std::shared_ptr<Exchange> exchange, std::string id)
      : ctx_(ctx),
        hub_(ctx.hub),
        exchange_(std::move(exchange)),
        id_(std::move(id)),
        timer_(exchange_->executor()) {}

  ~LongPoll() { hub_.remove_lease_waiter(waiter_); }

  void start(std::chrono::milliseconds timeout) {
    std::weak_ptr<LongPoll> weak = weak_from_this();
    auto on_worker = [weak](bool final) {
      return [weak, final] {
        if (auto self = weak.lock()) {
          boost::asio::post(self->ctx_.workers, [self, final] { self->check(final); });
        }
      };
    };
    waiter_ = ctx_.hub.add_lease_waiter(id_, on_worker(false));
    exchange_->on_abort([weak] {
      if (auto self = weak.lock()) self->done_ = true;  // nobody to answer any more
    });
    timer_.expires_after(timeout);
    timer_.async_wait(
        [self = shared_from_this(), final = on_worker(true)](const boost::system::error_code& ec) {
          if (!ec) final();
        });
    on_stop_.emplace(ctx_.stop, on_worker(true));
    // The lease may have settled between the caller's read and the waiter's registration.
    boost::asio::post(ctx_.workers, [self = shared_from_this()] { self->check(false); });
  }

 private:
  // Answers when the lease has settled, or in any case when `final` (deadline or stop).
  void check(bool final) {
    if (done_) return;
    auto lease = ctx_.leases.get_lease(id_);
    if (!final && lease.is_ok() && !settled(*lease)) return;
    if (done_.exchange(true)) return;
    boost::asio::post(timer_.get_executor(),
                      [self = shared_from_this()] { self->timer_.cancel(); });
    auto dto = lease.is_ok() ? lease_dto(ctx_, *lease) : Result<LeaseDto>(lease.status());
    if (!dto.is_ok()) {
      exchange_->respond(problem_response(dto.status()));
      return;
    }
    HttpResponse res;
    write_json(res, 200, to_json(*dto));
    exchange_->respond(std::move(res));
  }

  ServerContext& ctx_;
  EventHub& hub_;  // outlives ctx_ at teardown: the destructor may run last
  std::shared_ptr<Exchange> exchange_;
  std::string id_;
  boost::asio::steady_timer timer_;  // used on the connection's executor only
  uint64_t waiter_ = 0;
  std::atomic<bool> done_{false};
  std::optional<std::stop_callback<std::function<void()>>> on_stop_;
};

// The keyed fingerprint (TokenStore::request_fingerprint_of) of the request as parsed and
// re-serialised (members sorted, no whitespace), so a retry that formats the same request
// differently is still the same request.
std::string fingerprint(ServerContext& ctx, const json& body) {
  return ctx.tokens.request_fingerprint_of(dump_json(body));
}

Status key_reused(const std::string& key) {
  return Status(ErrorCode::kUnprocessable,
                "Idempotency-Key \"" + key +
                    "\" was used for a different request within 24h (a retry must repeat the "
                    "first request exactly; use a new key for a new lease)",
                {}, "Idempotency-Key");
}

Status create_lease(ServerContext& ctx, Call& c) {
  ARMHIVE_ASSIGN_OR_RETURN(json body, parse_json(c.req.body));
  ARMHIVE_ASSIGN_OR_RETURN(LeaseCreateRequest in, lease_create_from_json(body));
  std::string key = c.req.header("Idempotency-Key");
  ARMHIVE_RETURN_IF_ERROR(check_idempotency_key(key));
  const TokenInfo& who = c.who;
  LeaseRequest r = from_dto(in, who.name, key);

  if (who.max_ttl.count() > 0) {
    if (r.ttl && *r.ttl > who.max_ttl) {
      return exhausted("token \"" + who.name + "\" may lease for at most " +
                       format_duration(who.max_ttl.count()) + "; asked for " +
                       format_duration(r.ttl->count()) + " (ask for a shorter ttl)");
    }
    if (!r.ttl) {
      // The pool's default may exceed the token's limit: cap it rather than refuse.
      for (const auto& p : ctx.leases.pools()) {
        if (p.config.name == r.pool && p.config.default_ttl > who.max_ttl) r.ttl = who.max_ttl;
      }
    }
  }
  // The same key with another request is the client's mistake, not a retry (IETF
  // Idempotency-Key draft: 422). The first request's fingerprint is kept per token and key
  // for kIdempotencyWindow.
  // Checked before creating and remembered only after a lease was made, so a refused first
  // attempt does not pin its key to a request that never succeeded.
  std::string print = key.empty() ? std::string() : fingerprint(ctx, body);
  if (!key.empty()) {
    ARMHIVE_ASSIGN_OR_RETURN(auto first, ctx.tokens.request_fingerprint(who.name, key));
    if (first && *first != print) return key_reused(key);
  }
  // Count-then-create must not interleave for one token, or concurrent creates could all
  // pass the count. Creating returns at once (the engine provisions asynchronously), so one
  // lock for quota-limited tokens costs little.
  const bool dev = r.purpose == Purpose::kDev;
  const DevLimits dev_limits = dev_limits_of(who);
  if (dev && dev_limits.max_ttl.count() > 0) {
    if (!r.ttl) {
      for (const auto& p : ctx.leases.pools()) {
        if (p.config.name == r.pool && p.config.default_ttl > dev_limits.max_ttl) {
          r.ttl = dev_limits.max_ttl;
        }
      }
    }
    if (r.ttl)
      ARMHIVE_RETURN_IF_ERROR(check_dev_create({0, dev_limits.max_ttl, {}}, who.name, 0, *r.ttl));
  }
  std::unique_lock<std::mutex> quota_lock;
  if (dev && dev_limits.max_leases > 0) {
    quota_lock = std::unique_lock(ctx.quota_mu);
    LeaseFilter mine;
    mine.owner = who.name;
    mine.include_ended = false;
    mine.limit = kMaxListLimit;
    ARMHIVE_ASSIGN_OR_RETURN(auto active, ctx.leases.list_leases(mine));
    size_t held = 0;
    bool replay = false;
    for (const auto& l : active) {
      if (l.purpose == Purpose::kDev && !is_terminal(l.state)) ++held;
      replay = replay || (!key.empty() && l.idempotency_key == key);
    }
    if (!replay) {
      ARMHIVE_RETURN_IF_ERROR(
          check_dev_create({dev_limits.max_leases, {}, {}}, who.name, held, Seconds(0)));
    }
  }
  if (who.max_leases > 0) {
    if (!quota_lock.owns_lock()) quota_lock = std::unique_lock(ctx.quota_mu);
    bool replay = false;
    if (!key.empty()) {
      LeaseFilter mine;
      mine.owner = who.name;
      mine.include_ended = false;
      mine.limit = kMaxListLimit;
      // A retried create (same key) is not a new lease. Its lease is among the token's
      // active ones, of which there are at most max_leases.
      ARMHIVE_ASSIGN_OR_RETURN(auto active, ctx.leases.list_leases(mine));
      for (const auto& l : active) replay = replay || l.idempotency_key == key;
    }
    LeaseFilter f;
    f.owner = who.name;
    f.include_ended = false;
    ARMHIVE_ASSIGN_OR_RETURN(auto counts, ctx.leases.count_leases(f));
    size_t held = 0;
    for (const auto& [state, n] : counts) held += is_terminal(state) ? 0 : n;
    if (!replay && held >= static_cast<size_t>(who.max_leases)) {
      return exhausted("token \"" + who.name + "\" already holds " + std::to_string(held) +
                       " of its " + std::to_string(who.max_leases) +
                       " concurrent leases (release one with `armhive lease rm ID`)");
    }
  }
  if (!in.ports.empty()) {
    if (!ctx.options.check_ports) {
      return invalid_argument("ports", "this server forwards no ports (no [access] configured)");
    }
    ARMHIVE_RETURN_IF_ERROR(ctx.options.check_ports(r.pool, in.ports));
  }
  if (in.startup && !ctx.options.lease_startup) {
    return invalid_argument("startup", "this server runs no startup commands");
  }
  ARMHIVE_ASSIGN_OR_RETURN(Lease lease, ctx.leases.create_lease(r));
  if (!in.ports.empty()) ctx.options.lease_ports(lease.id, in.ports);
  if (in.startup) {
    if (Status s = ctx.options.lease_startup(lease.id, *in.startup); !s.is_ok()) {
      (void)ctx.leases.release_lease(lease.id);  // a lease without its command must not linger
      return s;
    }
  }
  if (!key.empty()) {
    // A concurrent first use of the key with another request may have won the race.
    ARMHIVE_ASSIGN_OR_RETURN(std::string first, ctx.tokens.remember_request(who.name, key, print));
    if (first != print) return key_reused(key);
  }
  ctx.audit_action(who, "lease.create", lease.id,
                   "pool=" + lease.pool + " ttl=" + std::to_string(lease.ttl.count()) +
                       (key.empty() ? "" : " idempotency_key=" + key) +
                       (in.startup ? " startup=" + in.startup->argv[0] : ""));
  auto dto = lease_dto(ctx, lease);
  if (!dto.is_ok()) {
    // No way in (e.g. the access port range is exhausted): the lease must not linger.
    (void)ctx.leases.release_lease(lease.id);
    return dto.status();
  }
  c.res.headers.emplace_back("Location", "/v1/leases/" + lease.id);
  write_json(c.res, 201, to_json(*dto));
  return Status::ok();
}

Status list_leases(ServerContext& ctx, Call& c) {
  const HttpRequest& req = c.req;
  LeaseFilter f;
  if (req.has_param("pool")) {
    f.pool = req.param("pool");
    ARMHIVE_RETURN_IF_ERROR(check_name("pool", *f.pool));
  }
  if (req.has_param("state")) {
    auto st = lease_state_from_string(req.param("state"));
    if (!st) {
      return invalid_argument("state",
                              "must be one of pending, provisioning, ready, releasing, "
                              "released, expired, failed, host_unreachable, lost");
    }
    f.state = st;
  }
  for (const std::string& kv : req.params("label")) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) return invalid_argument("label", "must be key=value");
    f.labels[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  ARMHIVE_RETURN_IF_ERROR(check_labels("label", f.labels));
  if (req.has_param("owner")) {
    std::string owner = req.param("owner");
    if (!is_admin(c.who) && owner != c.who.name) {
      return Status(ErrorCode::kPermissionDenied,
                    "only admin tokens may list other owners' leases");
    }
    f.owner = owner;
  }
  if (!is_admin(c.who)) f.owner = c.who.name;
  ARMHIVE_ASSIGN_OR_RETURN(bool active, parse_bool_param(req, "active", false));
  f.include_ended = !active;
  ARMHIVE_ASSIGN_OR_RETURN(size_t limit,
                           parse_size_param(req, "limit", kDefaultListLimit, kMaxListLimit));
  f.limit = limit;
  if (req.has_param("cursor")) {
    // A cursor is the id of the last lease of the previous page. One that names no lease the
    // caller can see (corrupted, truncated, another owner's) used to give a 200 with an empty
    // page, so a client paging with it silently saw nothing (issue 33 finding 11). Another
    // owner's lease is refused like an unknown id: a cursor cannot probe ids.
    f.after_id = req.param("cursor");
    auto at = ctx.visible_lease(c.who, f.after_id);
    if (!at.is_ok()) {
      if (at.status().code() != ErrorCode::kNotFound) return at.status();
      return invalid_argument("cursor",
                              "names no lease of this listing; pass the next_cursor of the "
                              "previous page, or no cursor for the first page");
    }
  }
  ARMHIVE_ASSIGN_OR_RETURN(auto list, ctx.leases.list_leases(f));
  LeasePage page;
  for (const Lease& l : list) {
    auto dto = lease_dto(ctx, l);
    if (!dto.is_ok()) {
      dto = to_dto(l);
      dto->ssh.reset();  // not reachable now; GET on the lease says why
    }
    page.items.push_back(*dto);
  }
  if (list.size() >= limit && !list.empty()) {
    // A full page: is there anything after it? (Asking for limit + 1 would exceed the
    // service's 1,000-row listing cap for the largest page.)
    LeaseFilter next = f;
    next.after_id = list.back().id;
    next.limit = 1;
    ARMHIVE_ASSIGN_OR_RETURN(auto more, ctx.leases.list_leases(next));
    if (!more.empty()) page.next_cursor = page.items.back().id;
  }
  write_json(c.res, 200, to_json(page));
  return Status::ok();
}

Status get_lease(ServerContext& ctx, Call& c) {
  const HttpRequest& req = c.req;
  const std::string& id = req.path_params[0];
  ARMHIVE_ASSIGN_OR_RETURN(Lease lease, ctx.visible_lease(c.who, id));
  if (req.has_param("wait")) {
    if (req.param("wait") != "ready") {
      return invalid_argument("wait", "only wait=ready is supported");
    }
    std::chrono::milliseconds timeout = std::chrono::seconds(30);
    if (req.has_param("timeout")) {
      ARMHIVE_ASSIGN_OR_RETURN(timeout, parse_timeout_param(req.param("timeout")));
    }
    timeout = std::min<std::chrono::milliseconds>(timeout, ctx.options.max_wait);
    if (!settled(lease) && timeout.count() > 0 && !ctx.stop.stop_requested()) {
      std::make_shared<LongPoll>(ctx, c.keep(), id)->start(timeout);
      return Status::ok();
    }
  }
  return write_lease(ctx, c, lease);
}

Status renew_lease(ServerContext& ctx, Call& c) {
  const std::string& id = c.req.path_params[0];
  ARMHIVE_ASSIGN_OR_RETURN(json body, parse_json(c.req.body));
  ARMHIVE_ASSIGN_OR_RETURN(LeaseRenewRequest in, lease_renew_from_json(body));
  ARMHIVE_ASSIGN_OR_RETURN(Lease lease, ctx.visible_lease(c.who, id));
  if (lease.purpose == Purpose::kDev) {
    ARMHIVE_RETURN_IF_ERROR(check_dev_renew(dev_limits_of(c.who), c.who.name, lease, ctx.now(),
                                            Seconds(in.ttl_seconds)));
  }
  if (c.who.max_ttl.count() > 0 && in.ttl_seconds > c.who.max_ttl.count()) {
    return exhausted("token \"" + c.who.name + "\" may lease for at most " +
                     format_duration(c.who.max_ttl.count()) + "; asked for " +
                     format_duration(in.ttl_seconds) + " (ask for a shorter ttl)");
  }
  ARMHIVE_ASSIGN_OR_RETURN(Lease renewed, ctx.leases.renew_lease(id, Seconds(in.ttl_seconds)));
  ctx.audit_action(c.who, "lease.renew", id, "ttl=" + std::to_string(in.ttl_seconds));
  return write_lease(ctx, c, renewed);
}

// Order: the body (400 naming the field), then the lease (404 when not the caller's), then
// whether certificates are offered (503) and the lease is ready (409).
Status ssh_certificate(ServerContext& ctx, Call& c) {
  const std::string& id = c.req.path_params[0];
  ARMHIVE_ASSIGN_OR_RETURN(json body, parse_json(c.req.body));
  ARMHIVE_ASSIGN_OR_RETURN(SshCertificateRequest in, ssh_certificate_request_from_json(body));
  ARMHIVE_ASSIGN_OR_RETURN(Lease lease, ctx.visible_lease(c.who, id));
  if (!ctx.options.ssh_certificate) {
    return unavailable("this armhived has no SSH certificate authority (configure [access])");
  }
  if (lease.state != LeaseState::kReady) {
    return conflict("lease " + id + " is " + std::string(to_string(lease.state)) +
                        ": certificates are issued for ready leases only",
                    id);
  }
  // Issuing waits on a guest exec (the trust written into the guest): it counts as one.
  auto slot = ctx.long_operations.acquire(c.who.name, LongOperation::kExec);
  if (!slot.is_ok()) return refuse_busy(c, slot.status());
  ARMHIVE_ASSIGN_OR_RETURN(SshCertificateDto cert,
                           ctx.options.ssh_certificate(lease, c.who.name, in.public_key));
  ctx.audit_action(c.who, "ssh.certificate", id,
                   "serial=" + std::to_string(cert.serial) + " principal=" + cert.principal +
                       " valid_before=" + cert.valid_before);
  write_json(c.res, 200, to_json(cert));
  return Status::ok();
}

Status release_lease(ServerContext& ctx, Call& c) {
  const std::string& id = c.req.path_params[0];
  ARMHIVE_ASSIGN_OR_RETURN(Lease lease, ctx.visible_lease(c.who, id));
  (void)lease;
  ARMHIVE_ASSIGN_OR_RETURN(Lease released, ctx.leases.release_lease(id));
  ctx.audit_action(c.who, "lease.release", id, "");
  return write_lease(ctx, c, released);
}

Status exec(ServerContext& ctx, Call& c) {
  const std::string& id = c.req.path_params[0];
  ARMHIVE_ASSIGN_OR_RETURN(json body, parse_json(c.req.body));
  ARMHIVE_ASSIGN_OR_RETURN(ExecRequestDto in, exec_request_from_json(body));
  ARMHIVE_ASSIGN_OR_RETURN(Lease lease, ctx.visible_lease(c.who, id));
  (void)lease;
  // Held until the command ends: it occupies this worker that long.
  auto slot = ctx.long_operations.acquire(c.who.name, LongOperation::kExec);
  if (!slot.is_ok()) return refuse_busy(c, slot.status());
  ctx.audit_action(c.who, "lease.exec", id, in.argv[0]);
  if (wants_exec_stream(c.req)) return stream_exec(ctx, c, id, in);
  ARMHIVE_ASSIGN_OR_RETURN(GuestExecResult r, ctx.leases.exec(id, from_dto(in)));
  write_json(c.res, 200, to_json(to_dto(std::move(r))));
  return Status::ok();
}

Status console(ServerContext& ctx, Call& c) {
  const std::string& id = c.req.path_params[0];
  ARMHIVE_ASSIGN_OR_RETURN(
      size_t max_bytes,
      parse_size_param(c.req, "max_bytes", kDefaultConsoleBytes, kMaxConsoleBytes));
  ARMHIVE_ASSIGN_OR_RETURN(Lease lease, ctx.visible_lease(c.who, id));
  (void)lease;
  ARMHIVE_ASSIGN_OR_RETURN(std::string log_text, ctx.leases.console(id, max_bytes));
  write_text(c.res, 200, std::move(log_text), "text/plain; charset=utf-8");
  return Status::ok();
}

}  // namespace

void add_lease_routes(Router& router, ServerContext& ctx) {
  auto h = [&ctx](Status (*fn)(ServerContext&, Call&)) {
    return [&ctx, fn](Call& c) { return fn(ctx, c); };
  };
  router.add({"POST", "/v1/leases", Access::kWrite, h(create_lease), /*json_body=*/true});
  router.add({"GET", "/v1/leases", Access::kRead, h(list_leases)});
  router.add({"GET", "/v1/leases/{id}", Access::kRead, h(get_lease)});
  router.add({"DELETE", "/v1/leases/{id}", Access::kWrite, h(release_lease)});
  router.add({"POST", "/v1/leases/{id}/renew", Access::kWrite, h(renew_lease), true});
  router.add({"POST", "/v1/leases/{id}/exec", Access::kWrite, h(exec), true});
  router.add({"POST", "/v1/leases/{id}/ssh-certificate", Access::kWrite, h(ssh_certificate), true});
  router.add({"GET", "/v1/leases/{id}/console", Access::kRead, h(console)});
}

}  // namespace armhive
