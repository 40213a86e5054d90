// GET /v1/leases/{id}/tunnel?port=P: a WebSocket relaying one TCP connection to a port of a
// ready lease's guest (tunnel_session.h), for clients that can reach only the API.
#include <strings.h>

#include <boost/asio/post.hpp>
#include <memory>
#include <mutex>

#include "daemon/http/handlers.h"
#include "daemon/http/params.h"

namespace armhive {
namespace {

constexpr int kDefaultTunnelPort = 22;

bool has_token(std::string_view list, std::string_view token) {
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string_view::npos) end = list.size();
    std::string_view item = list.substr(pos, end - pos);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item.size() == token.size() && strncasecmp(item.data(), token.data(), token.size()) == 0) {
      return true;
    }
    pos = end + 1;
  }
  return false;
}

Status check_upgrade(const HttpRequest& req) {
  if (!has_token(req.header("Upgrade"), "websocket") ||
      !has_token(req.header("Connection"), "upgrade")) {
    return invalid_argument("Upgrade",
                            "a tunnel is a WebSocket: send \"Connection: Upgrade\" and "
                            "\"Upgrade: websocket\" (armhive tunnel LEASE PORT does)");
  }
  return Status::ok();
}

// The tunnel's life as the audit log and the event stream see it. Shared by the plan's
// callbacks (I/O thread); audit writes go to a worker (SQLite must not block an I/O thread).
struct TunnelRecord {
  ServerContext& ctx;
  TokenInfo who;
  std::string lease_id;
  std::string target;  // "GUEST:PORT"
  TunnelRoute route;
  std::optional<uint64_t> attached;
  // The caller's tunnel slot: given back when the tunnel ends (on_closed) or, never opened, when
  // the plan holding this record is dropped.
  std::shared_ptr<LongOperations::Slot> slot;

  void record(std::string type, std::string detail) {
    boost::asio::post(ctx.workers,
                      [rec = self.lock(), type = std::move(type), detail = std::move(detail)] {
                        if (!rec) return;
                        rec->ctx.audit_action(rec->who, type, rec->lease_id, detail);
                        rec->ctx.leases.record_event(rec->lease_id, type, detail);
                      });
  }
  std::weak_ptr<TunnelRecord> self;
};

Status open_tunnel(ServerContext& ctx, Call& c) {
  const std::string& id = c.req.path_params[0];
  int port = kDefaultTunnelPort;
  if (c.req.has_param("port")) {
    ARMHIVE_ASSIGN_OR_RETURN(size_t p, parse_size_param(c.req, "port", kDefaultTunnelPort, 65535));
    port = static_cast<int>(p);
  }
  ARMHIVE_ASSIGN_OR_RETURN(Lease lease, ctx.visible_lease(c.who, id));
  if (!ctx.options.tunnel) {
    return unavailable("this armhived has no access configuration (configure [access])");
  }
  if (lease.state != LeaseState::kReady) {
    return conflict("lease " + id + " is " + std::string(to_string(lease.state)) +
                        ": tunnels open to ready leases only",
                    id);
  }
  ARMHIVE_RETURN_IF_ERROR(check_upgrade(c.req));
  ARMHIVE_ASSIGN_OR_RETURN(TunnelRoute route, ctx.options.tunnel(lease, port));
  auto slot = ctx.long_operations.acquire(c.who.name, LongOperation::kTunnel);
  if (!slot.is_ok()) return refuse_busy(c, slot.status());

  auto rec =
      std::make_shared<TunnelRecord>(TunnelRecord{ctx,
                                                  c.who,
                                                  id,
                                                  route.address + ":" + std::to_string(route.port),
                                                  route,
                                                  {},
                                                  std::move(slot).value(),
                                                  {}});
  rec->self = rec;
  TunnelPlan plan;
  plan.address = route.address;
  plan.port = route.port;
  const std::string peer = c.req.remote_addr;
  plan.on_open = [rec, peer](std::function<void()> cut) {
    if (rec->route.attach) {
      rec->attached = rec->route.attach(std::move(cut));
      if (!rec->attached) return false;
    }
    rec->record("tunnel.opened", "from " + peer + " to " + rec->target);
    return true;
  };
  plan.on_closed = [rec](const TunnelStats& s) {
    if (rec->attached && rec->route.detach) rec->route.detach(*rec->attached);
    rec->slot.reset();
    rec->record("tunnel.closed", "from " + s.peer + " to " + rec->target +
                                     ": bytes_to_guest=" + std::to_string(s.to_guest) +
                                     " bytes_from_guest=" + std::to_string(s.from_guest) + " (" +
                                     s.reason + ")");
  };
  c.keep()->upgrade(std::move(plan));
  return Status::ok();
}

}  // namespace

void add_tunnel_routes(Router& router, ServerContext& ctx) {
  // kWrite: a tunnel is a login path into the VM, not something a read token may open.
  router.add({"GET", "/v1/leases/{id}/tunnel", Access::kWrite,
              [&ctx](Call& c) { return open_tunnel(ctx, c); }});
}

}  // namespace armhive
