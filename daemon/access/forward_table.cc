#include "daemon/access/forward_table.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace armhive {

namespace {

constexpr const char* kRefusedMetric = "armhive_forward_sessions_refused_total";

}  // namespace

ForwardTable::ForwardTable(AccessOptions options, AccessEventSink sink, Metrics* metrics)
    : options_(std::move(options)),
      sink_(std::move(sink)),
      metrics_(metrics),
      budget_(options_.max_sessions > 0 ? std::make_shared<SessionBudget>(options_.max_sessions)
                                        : nullptr),
      next_port_(options_.port_min),
      max_sessions_per_forward_(options_.max_sessions_per_forward),
      idle_timeout_(options_.idle_timeout) {}

void ForwardTable::set_limits(int max_sessions_per_forward, int max_sessions,
                              std::chrono::milliseconds idle_timeout) {
  if (budget_) budget_->set_max(max_sessions);
  MutexLock lock(mu_);
  max_sessions_per_forward_ = max_sessions_per_forward;
  idle_timeout_ = idle_timeout;
}

Result<std::unique_ptr<ForwardTable>> ForwardTable::start(AccessOptions options,
                                                          AccessEventSink sink, Metrics* metrics) {
  if (options.port_min < 1 || options.port_max > 65535 || options.port_min > options.port_max) {
    return invalid_argument("access.port_min", "port range must lie in 1-65535, min <= max");
  }
  if (options.advertise_host.empty()) options.advertise_host = options.listen_address;
  if (metrics != nullptr) {
    metrics->describe_counter(kRefusedMetric,
                              "Connections to access forwards closed at once because the forward "
                              "(cap=\"forward\") or the host (cap=\"host\") had its most "
                              "sessions open");
    for (const char* cap : {"forward", "host"}) metrics->inc(kRefusedMetric, {{"cap", cap}}, 0);
  }
  std::unique_ptr<ForwardTable> t(new ForwardTable(std::move(options), std::move(sink), metrics));
  t->work_ =
      std::make_unique<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>(
          t->io_.get_executor());
  for (int i = 0; i < std::max(1, t->options_.threads); ++i) {
    t->threads_.emplace_back([p = t.get()] { p->io_.run(); });
  }
  t->events_thread_ = std::thread([p = t.get()] { p->deliver_loop(); });
  return t;
}

ForwardTable::~ForwardTable() noexcept { stop(); }

void ForwardTable::stop() {
  std::map<std::string, std::vector<Open>> all;
  std::map<std::string, std::map<uint64_t, std::function<void()>>> attached;
  {
    MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    all.swap(leases_);
    attached.swap(attached_);
    reserved_.clear();
  }
  for (auto& [id, cuts] : attached) {
    for (auto& [n, cut] : cuts) cut();
  }
  for (auto& [id, forwards] : all) {
    for (Open& o : forwards) o.forward->close();
  }
  // The closes above end every accept, connect and relay; the threads then run out of work.
  work_.reset();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  {
    MutexLock lock(events_mu_);
    events_stop_ = true;
  }
  events_cv_.notify_all();
  if (events_thread_.joinable()) events_thread_.join();
}

void ForwardTable::emit(AccessEvent event) {
  {
    MutexLock lock(events_mu_);
    if (events_.size() >= kMaxQueuedEvents) {  // the sink fell behind: drop the oldest, count
      events_.pop_front();
      ++events_dropped_;
    }
    events_.push_back(std::move(event));
  }
  events_cv_.notify_one();
}

void ForwardTable::refused(const std::string& lease_id, const std::string& where,
                           const ForwardConnection& c) {
  if (metrics_ != nullptr) metrics_->inc(kRefusedMetric, {{"cap", c.cap}});
  uint64_t count = 0;
  {
    MutexLock lock(refusal_mu_);
    ++refusals_unlogged_;
    const auto now = std::chrono::steady_clock::now();
    if (refusal_logged_ != std::chrono::steady_clock::time_point{} &&
        now - refusal_logged_ < kRefusalLogPeriod) {
      return;
    }
    refusal_logged_ = now;
    count = std::exchange(refusals_unlogged_, 0);
  }
  // The peer's address is the client's own text from accept (an address and a port).
  spdlog::warn(
      "access forwards: {} connection(s) refused over a session cap since the last such "
      "line; the latest from {} to lease {}'s {} ({})",
      count, c.peer, lease_id, where, c.error);
}

void ForwardTable::note_connection(const std::string& lease_id, const std::string& target,
                                   const ForwardConnection& c) {
  const std::string type = c.connected ? "forward.connection" : "forward.connection_failed";
  // The source is the peer's address without its port: one client, however many connections.
  const std::string source = c.peer.substr(0, c.peer.rfind(':'));
  if (!connections_.admit(type + " " + lease_id, source, SystemClock().now())) {
    events_cv_.notify_one();  // the deliverer learns when this window's summary is due
    return;
  }
  emit({type, lease_id, "from " + c.peer + " to " + target + (c.connected ? "" : ": " + c.error)});
}

void ForwardTable::deliver_loop() {
  MutexLock lock(events_mu_);
  for (;;) {
    // Until an event, a stop or the end of a throttled window, whichever is first.
    auto ready = [&]() REQUIRES(events_mu_) {
      return events_stop_ || !events_.empty() || events_dropped_ > 0;
    };
    if (std::optional<TimePoint> due = connections_.next_due()) {
      events_cv_.wait_for(
          lock, std::max(Millis(0), std::chrono::duration_cast<Millis>(*due - SystemClock().now())),
          ready);
    } else {
      events_cv_.wait(lock, ready);
    }
    std::vector<AccessEvent> batch;
    for (const ThrottleSummary& s : connections_.due(SystemClock().now())) {
      // The kind is "TYPE LEASE" (note_connection): one summary per lease and type.
      const size_t space = s.kind.find(' ');
      batch.push_back({s.kind.substr(0, space),
                       space == std::string::npos ? "" : s.kind.substr(space + 1), s.text()});
    }
    if (events_dropped_ > 0) {
      batch.push_back({"forward.events_dropped", "",
                       std::to_string(events_dropped_) +
                           " forward events were dropped: the sink fell behind by " +
                           std::to_string(kMaxQueuedEvents)});
      events_dropped_ = 0;
    }
    if (!events_.empty()) {
      batch.push_back(std::move(events_.front()));
      events_.pop_front();
    }
    if (batch.empty()) {
      if (events_stop_) return;  // stopping, and everything delivered
      continue;
    }
    lock.unlock();
    if (sink_) {
      for (const AccessEvent& e : batch) sink_(e);
    }
    lock.lock();
  }
}

Result<ForwardTable::Open> ForwardTable::open_one(const std::string& lease_id,
                                                  const std::string& guest_address,
                                                  int guest_port) {
  const int range = options_.port_max - options_.port_min + 1;
  for (int attempt = 0; attempt < range; ++attempt) {
    int port = 0;
    int max_sessions_per_forward = 0;
    std::chrono::milliseconds idle_timeout{};
    {
      MutexLock lock(mu_);
      if (stopped_) return unavailable("access forwards are stopping");
      max_sessions_per_forward = max_sessions_per_forward_;
      idle_timeout = idle_timeout_;
      for (int i = 0; i < range && port == 0; ++i) {
        int candidate = next_port_;
        next_port_ = next_port_ >= options_.port_max ? options_.port_min : next_port_ + 1;
        if (!reserved_.count(candidate)) port = candidate;
      }
      if (port == 0) break;
      reserved_.insert(port);
    }
    std::string where = options_.advertise_host + ":" + std::to_string(port);
    std::string target = guest_address + ":" + std::to_string(guest_port);
    TcpForward::Options fo{options_.listen_address, port, guest_address, guest_port,
                           options_.connect_timeout};
    fo.max_sessions = max_sessions_per_forward;
    fo.budget = budget_;
    fo.idle_timeout = idle_timeout;
    auto f = TcpForward::open(io_, std::move(fo),
                              [this, lease_id, target, where](const ForwardConnection& c) {
                                if (c.refused) {
                                  refused(lease_id, where, c);
                                  return;
                                }
                                note_connection(lease_id, target, c);
                              });
    if (f.is_ok()) {
      emit({"forward.opened", lease_id, where + " -> " + target});
      return Open{{lease_id, guest_port, options_.advertise_host, port, guest_address}, *f};
    }
    {
      MutexLock lock(mu_);
      reserved_.erase(port);
    }
    // Taken by another process: try the next port. Anything else is not the port's fault.
    if (f.status().code() != ErrorCode::kConflict) return f.status();
  }
  return unavailable("no free port in the access range " + std::to_string(options_.port_min) + "-" +
                         std::to_string(options_.port_max),
                     "access.port_min");
}

ForwardTable::Ticket::Ticket(ForwardTable* table, std::string lease_id, uint64_t closes_seen)
    : table_(table), lease_id_(std::move(lease_id)), closes_seen_(closes_seen) {}

ForwardTable::Ticket::Ticket(Ticket&& other) noexcept
    : table_(std::exchange(other.table_, nullptr)),
      lease_id_(std::move(other.lease_id_)),
      closes_seen_(other.closes_seen_) {}

ForwardTable::Ticket::~Ticket() noexcept {
  if (table_ == nullptr) return;
  MutexLock lock(table_->mu_);
  auto it = table_->tickets_.find(lease_id_);
  if (it != table_->tickets_.end() && --it->second.out == 0) table_->tickets_.erase(it);
}

ForwardTable::Ticket ForwardTable::ticket(const std::string& lease_id) {
  MutexLock lock(mu_);
  Tickets& t = tickets_[lease_id];
  ++t.out;
  return Ticket(this, lease_id, t.closes);
}

Result<std::vector<ForwardInfo>> ForwardTable::open(const std::string& lease_id,
                                                    const std::string& guest_address,
                                                    const std::vector<int>& guest_ports) {
  return open(ticket(lease_id), guest_address, guest_ports);
}

Result<std::vector<ForwardInfo>> ForwardTable::open(const Ticket& ticket,
                                                    const std::string& guest_address,
                                                    const std::vector<int>& guest_ports) {
  const std::string& lease_id = ticket.lease_id();
  MutexLock one_at_a_time(open_mu_);
  std::vector<int> missing;
  {
    MutexLock lock(mu_);
    std::set<int> have;
    if (auto it = leases_.find(lease_id); it != leases_.end()) {
      for (const Open& o : it->second) have.insert(o.info.guest_port);
    }
    for (int gp : guest_ports) {
      if (have.insert(gp).second) missing.push_back(gp);
    }
  }
  if (missing.empty()) return find(lease_id);
  std::vector<Open> opened;
  auto release = [&](Open& o) REQUIRES(mu_) {
    o.forward->close();
    reserved_.erase(o.info.port);
  };
  for (int gp : missing) {
    auto o = open_one(lease_id, guest_address, gp);
    if (!o.is_ok()) {
      // The ones opened here go again; the lease's earlier forwards stay.
      MutexLock lock(mu_);
      for (Open& done : opened) release(done);
      return o.status();
    }
    opened.push_back(std::move(*o));
  }
  std::vector<ForwardInfo> out;
  MutexLock lock(mu_);
  if (stopped_) {
    for (Open& o : opened) release(o);
    return unavailable("access forwards are stopping");
  }
  // Checked under the same lock close() counts under: a close before this point refuses the
  // open, one after it closes what opens here.
  if (auto t = tickets_.find(lease_id);
      t != tickets_.end() && t->second.closes != ticket.closes_seen_) {
    for (Open& o : opened) release(o);
    return conflict("lease " + lease_id +
                        "'s forwards were closed while they opened (the lease "
                        "ended or its VM changed): not reopened from an older reading of it",
                    lease_id);
  }
  auto& slot = leases_[lease_id];
  for (Open& o : opened) {
    bool raced = std::any_of(slot.begin(), slot.end(),
                             [&](const Open& x) { return x.info.guest_port == o.info.guest_port; });
    if (raced) {
      release(o);  // another caller opened this guest port meanwhile: keep theirs
    } else {
      slot.push_back(o);
    }
  }
  for (const Open& o : slot) out.push_back(o.info);
  return out;
}

void ForwardTable::close(const std::string& lease_id, const std::string& reason) {
  std::vector<Open> forwards;
  std::map<uint64_t, std::function<void()>> cuts;
  {
    MutexLock lock(mu_);
    if (auto t = tickets_.find(lease_id); t != tickets_.end()) ++t->second.closes;
    if (auto a = attached_.find(lease_id); a != attached_.end()) {
      cuts = std::move(a->second);
      attached_.erase(a);
    }
    auto it = leases_.find(lease_id);
    if (it != leases_.end()) {
      forwards = std::move(it->second);
      leases_.erase(it);
      for (const Open& o : forwards) reserved_.erase(o.info.port);
    }
  }
  for (auto& [n, cut] : cuts) cut();
  for (Open& o : forwards) {
    o.forward->close();
    emit({"forward.closed", lease_id,
          o.info.host + ":" + std::to_string(o.info.port) + " (" + reason + ")"});
  }
}

std::optional<uint64_t> ForwardTable::attach(const std::string& lease_id,
                                             std::function<void()> cut) {
  MutexLock lock(mu_);
  auto it = leases_.find(lease_id);
  if (stopped_ || it == leases_.end() || it->second.empty()) return std::nullopt;
  uint64_t id = next_attachment_++;
  attached_[lease_id][id] = std::move(cut);
  return id;
}

void ForwardTable::detach(const std::string& lease_id, uint64_t id) {
  MutexLock lock(mu_);
  auto it = attached_.find(lease_id);
  if (it == attached_.end()) return;
  it->second.erase(id);
  if (it->second.empty()) attached_.erase(it);
}

std::vector<ForwardInfo> ForwardTable::find(const std::string& lease_id) const {
  MutexLock lock(mu_);
  std::vector<ForwardInfo> out;
  auto it = leases_.find(lease_id);
  if (it != leases_.end()) {
    for (const Open& o : it->second) out.push_back(o.info);
  }
  return out;
}

std::vector<std::string> ForwardTable::leases() const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [id, f] : leases_) out.push_back(id);
  return out;
}

}  // namespace armhive
