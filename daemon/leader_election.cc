#include "daemon/leader_election.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace armhive {

Result<std::unique_ptr<LeaderElection>> LeaderElection::win(const Options& options,
                                                            const Pause& pause, const Note& note,
                                                            const Observe& observe) {
  const auto retry = options.lease / 5;
  std::string last_note;
  auto say = [&](const std::string& line) {
    if (line == last_note) return;
    last_note = line;
    spdlog::info("{}", line);
    if (note) note(line);
  };
  // Sleeps between tries; false when armhived is to stop.
  auto wait = [&] {
    if (pause) return pause(retry);
    std::this_thread::sleep_for(retry);
    return true;
  };
  const Status stopped(ErrorCode::kUnavailable, "stopped as a standby");
  std::unique_ptr<PgDatabase> db;
  while (!db) {
    auto connected = PgDatabase::connect(options.url);
    if (connected.is_ok()) {
      db = std::move(*connected);
    } else {
      say("standby: cannot reach the database (" + connected.status().to_string() + ")");
      if (!wait()) return stopped;
    }
  }
  auto lease = PgLeaderLease::open(*db, options.holder, options.api_url, options.lease);
  if (!lease.is_ok()) return lease.status();
  LeaderTerm term(options.lease);
  for (;;) {
    const auto sent = std::chrono::steady_clock::now();
    // A lost connection fails this renewal; PgDatabase makes a new one for the next.
    auto r = (*lease)->renew();
    if (!r.is_ok()) {
      say("standby: the database does not answer (" + r.status().to_string() + ")");
    } else {
      if (!r->membership.is_ok()) {
        spdlog::warn("cluster membership not recorded: {}", r->membership.to_string());
      }
      term.renewed(sent, r->ours, r->epoch, r->holder);
      if (term.acting(std::chrono::steady_clock::now())) {
        spdlog::info("leading (epoch {}) as {}", r->epoch, options.holder);
        return std::unique_ptr<LeaderElection>(new LeaderElection(
            options, std::move(db), std::move(*lease), term, r->epoch, r->since_ms));
      }
      if (observe) observe(*r);
      say("standby: " + r->holder + " leads (epoch " + std::to_string(r->epoch) + ", API " +
          r->url + "); this armhived takes over when its lease ends");
    }
    if (!wait()) return stopped;
  }
}

void LeaderElection::start(std::function<void(const std::string&)> on_lost) {
  if (!on_lost) {
    on_lost = [](const std::string& why) {
      spdlog::critical(
          "{}: exiting now so that two armhived never act on the lab at once "
          "(the VMs keep running; the new leader adopts them)",
          why);
      spdlog::default_logger()->flush();
      std::_Exit(75);  // EX_TEMPFAIL: systemd restarts it, as a standby
    };
  }
  renewals_ = std::thread([this] { renew_loop(); });
  deadline_ = std::thread([this, on_lost] { deadline_loop(on_lost); });
}

void LeaderElection::renew_loop() {
  auto next = [this] {
    MutexLock lock(mu_);
    return term_.next_renewal(std::chrono::steady_clock::now());
  }();
  for (;;) {
    {
      MutexLock lock(mu_);
      while (!stopping_ && lost_.empty() && std::chrono::steady_clock::now() < next) {
        wake_.wait_until(mu_, next);
      }
      if (stopping_ || !lost_.empty()) return;
    }
    const auto sent = std::chrono::steady_clock::now();
    auto r = lease_->renew();  // may block up to the connection's deadlines: no lock held
    MutexLock lock(mu_);
    if (!r.is_ok()) {
      spdlog::warn("leader lease not renewed: {}", r.status().to_string());
    } else {
      if (!r->membership.is_ok()) {
        spdlog::warn("cluster membership not recorded: {}", r->membership.to_string());
      }
      term_.renewed(sent, r->ours, r->epoch, r->holder);
      if (!r->ours || r->epoch != epoch_) {
        lost_ = r->ours ? "the leader lease came back in a new epoch"
                        : r->holder + " holds the leader lease now";
      }
    }
    wake_.notify_all();
    next = term_.next_renewal(sent);
  }
}

void LeaderElection::deadline_loop(const std::function<void(const std::string&)>& on_lost) {
  std::string why;
  {
    MutexLock lock(mu_);
    for (;;) {
      if (stopping_) return;
      if (!lost_.empty()) {
        why = lost_;
        break;
      }
      // Its own thread, so that a renewal blocked on the database cannot delay it.
      const auto until = term_.acting_until();
      if (std::chrono::steady_clock::now() >= until) {
        why = "the leader lease (epoch " + std::to_string(epoch_) + ") was not renewed in time";
        break;
      }
      wake_.wait_until(mu_, until);
    }
  }
  on_lost(why);
}

LeaderElection::~LeaderElection() noexcept {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (deadline_.joinable()) deadline_.join();
  if (renewals_.joinable()) renewals_.join();
  if (Status s = lease_->release(epoch_); !s.is_ok()) {
    spdlog::warn("leader lease not released (a standby takes over when it ends): {}",
                 s.to_string());
  }
}

}  // namespace armhive
