// GET /v1/events: NDJSON, replayed from `since`, then followed through the event hub with a
// keep-alive newline on idle streams. A followed stream holds no thread: it is a hub
// subscription, a keep-alive timer on its connection and a stop callback.
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <stop_token>

#include "api/json.h"
#include "daemon/http/convert.h"
#include "daemon/http/event_hub.h"
#include "daemon/http/handlers.h"
#include "daemon/http/params.h"

namespace armhive {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Lines for the events `owner` may see (empty owner: every event).
std::string ndjson(const std::vector<Event>& events, const std::string& owner) {
  std::string out;
  for (const auto& e : events) {
    if (!owner.empty() && e.owner != owner) continue;
    out += dump_json(to_json(to_dto(e)));
    out += '\n';
  }
  return out;
}

// Lives from begin_stream until the client goes away or the server stops. Its state is
// touched only on the connection's executor (timer, last_write); the hub callback posts there.
class EventStream : public std::enable_shared_from_this<EventStream> {
 public:
  EventStream(ServerContext& ctx, std::shared_ptr<Exchange> exchange, std::string owner,
              std::shared_ptr<LongOperations::Slot> slot)
      : ctx_(ctx),
        hub_(ctx.hub),
        exchange_(std::move(exchange)),
        owner_(std::move(owner)),
        slot_(std::move(slot)),
        timer_(exchange_->executor()) {}
  ~EventStream() {
    if (subscription_ != 0) hub_.unsubscribe(subscription_);
  }

  // On a worker: the replay is already written; `cursor` is the newest seq it covered.
  void follow(uint64_t cursor) {
    std::weak_ptr<EventStream> weak = weak_from_this();
    auto executor = exchange_->executor();
    exchange_->on_abort([weak] {
      if (auto self = weak.lock()) self->finish(false);
    });
    subscription_ = ctx_.hub.subscribe(cursor, [weak, executor](const std::vector<Event>& batch) {
      boost::asio::post(executor, [weak, batch] {
        if (auto self = weak.lock()) self->deliver(batch);
      });
    });
    on_stop_.emplace(ctx_.stop, [weak, executor] {
      boost::asio::post(executor, [weak] {
        if (auto self = weak.lock()) self->finish(true);
      });
    });
    boost::asio::post(executor, [self = shared_from_this()] { self->arm(); });
  }

 private:
  void deliver(const std::vector<Event>& batch) {
    if (done_) return;
    std::string out = ndjson(batch, owner_);
    if (out.empty()) return;
    exchange_->write_chunk(std::move(out));
    last_write_ = SteadyClock::now();
  }

  void arm() {
    if (done_) return;
    timer_.expires_after(ctx_.options.event_keepalive);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->done_) return;
      if (SteadyClock::now() - self->last_write_ >= self->ctx_.options.event_keepalive) {
        self->exchange_->write_chunk("\n");
        self->last_write_ = SteadyClock::now();
      }
      self->arm();
    });
  }

  // `clean`: end the chunked body properly (server stop); otherwise the connection is gone.
  void finish(bool clean) {
    if (done_) return;
    done_ = true;
    timer_.cancel();
    if (subscription_ != 0) ctx_.hub.unsubscribe(subscription_);
    subscription_ = 0;
    if (clean) exchange_->end_stream();
    slot_.reset();
    self_.reset();
  }

 public:
  std::shared_ptr<EventStream> self_;  // keeps the stream alive until finish()

 private:
  ServerContext& ctx_;
  EventHub& hub_;  // outlives ctx_ at teardown: the destructor may run last
  std::shared_ptr<Exchange> exchange_;
  std::string owner_;
  std::shared_ptr<LongOperations::Slot> slot_;  // the caller's stream slot, until finish()
  boost::asio::steady_timer timer_;
  SteadyClock::time_point last_write_ = SteadyClock::now();
  bool done_ = false;  // on the connection's executor
  std::atomic<uint64_t> subscription_{0};
  std::optional<std::stop_callback<std::function<void()>>> on_stop_;
};

Status events(ServerContext& ctx, Call& c) {
  uint64_t cursor = 0;
  if (c.req.has_param("since")) {
    std::string v = c.req.param("since");
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) {
      return invalid_argument("since", "must be an event sequence number (0 for all)");
    }
    cursor = std::stoull(v);  // at most 19 digits: fits, cannot throw
  }
  ARMHIVE_ASSIGN_OR_RETURN(bool follow, parse_bool_param(c.req, "follow", true));
  std::string owner = is_admin(c.who) ? std::string() : c.who.name;
  // The replay comes from the service itself (not the hub's ring), so it is complete up to
  // this moment whatever the hub has seen yet.
  std::vector<Event> replay = ctx.leases.events_since(cursor, std::chrono::milliseconds(0));
  for (const auto& e : replay) cursor = std::max(cursor, e.seq);
  if (!follow) {
    c.res.headers.emplace_back("Cache-Control", "no-store");
    write_text(c.res, 200, ndjson(replay, owner), "application/x-ndjson");
    return Status::ok();
  }
  auto slot = ctx.long_operations.acquire(c.who.name, LongOperation::kEventStream);
  if (!slot.is_ok()) return refuse_busy(c, slot.status());
  auto exchange = c.keep();
  HttpResponse head;
  head.status = 200;
  head.content_type = "application/x-ndjson";
  head.headers.emplace_back("Cache-Control", "no-store");
  exchange->begin_stream(std::move(head));
  std::string first = ndjson(replay, owner);
  if (!first.empty()) exchange->write_chunk(std::move(first));
  auto stream = std::make_shared<EventStream>(ctx, exchange, owner, std::move(slot).value());
  stream->self_ = stream;
  stream->follow(cursor);
  return Status::ok();
}

}  // namespace

void add_event_routes(Router& router, ServerContext& ctx) {
  router.add({"GET", "/v1/events", Access::kRead, [&ctx](Call& c) { return events(ctx, c); }});
}

}  // namespace armhive
