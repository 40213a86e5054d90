// Warm pools that follow demand (issue 35): a discrete-event replay of one pool over synthetic
// days of CI lease requests, once per warm policy, through the real scheduler.
//
//   armhive-bench-warm-replay [--seed 35] [--weeks 2] [--days 1] [--max 8] [--max-starting 2]
//                             [--auto-max 8] [--miss-probability 0.1] [--burst-every 8]
//                             [--no-bursts]
//                             [--out FILE.json]
//
// Each time something happens (a request, a boot done, a job done) the pool's snapshot goes
// through plan_pool (daemon/core/pool_scheduler.h) and its actions are carried out: hand-outs
// take 42 ms, every boot (create + boot to agent) a uniform 12.5–16 s (the timing model of
// armhive-bench-burst: create 1.24–2.09 s, boot 11.25–14.00 s), a leased VM is destroyed when
// its job ends. Policies: fixed min_warm 0, 1, 2, 4, and `auto`, where DemandModel
// (daemon/core/demand_model.h) sets min_warm before every pass and `shrinking` retires the
// surplus; the model is seeded with the `--weeks` weeks of synthetic days before the replay.
//
// The trace (seeded, the same for every policy): weekdays with a quiet night, a morning ramp,
// a lunch dip, an afternoon plateau and an evening tail (a non-homogeneous Poisson process),
// plus 3–6 bursts of 10–20 jobs within a minute (a pipeline fanning out) at random times in
// working hours; weekends quiet. Job durations lognormal, median 6 min. The replayed days
// start on Wednesday 2026-12-02 00:00 UTC.
//
// Per policy: warm-hit rate (handed a warm VM in the pass of its request), wait from request
// to ready (p50/p90/max), idle VM-hours (warm VMs bound to nobody, integrated over time) and
// boots. Stdout a table; --out writes the same as JSON.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/core/demand_model.h"
#include "daemon/core/pool_scheduler.h"

namespace armhive {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using Dur = std::chrono::duration<double>;

constexpr double kHandoutS = 0.042;
constexpr double kBootMinS = 12.5, kBootMaxS = 16.0;
// Wednesday 2026-12-02 00:00 UTC.
const TimePoint kReplayStart = from_unix_ms(int64_t{1796169600} * 1000);

TimePoint at(double s) {
  return kReplayStart + std::chrono::duration_cast<TimePoint::duration>(Dur(s));
}

struct Job {
  double arrival_s = 0;   // seconds since kReplayStart (negative: history)
  double duration_s = 0;  // how long it holds its VM once ready
  bool burst = false;     // one of a burst's jobs
};

// Requests per minute on a weekday at `hour` (0–24), without the bursts.
double weekday_rate(double hour) {
  struct Point {
    double h, rate;
  };
  static const Point kShape[] = {{0, 0.02},  {6, 0.02},    {7, 0.10},  {9, 0.50},
                                 {12, 0.50}, {12.2, 0.30}, {13, 0.30}, {13.3, 0.40},
                                 {17, 0.40}, {19, 0.08},   {20, 0.04}, {24, 0.02}};
  for (size_t i = 1; i < std::size(kShape); ++i) {
    if (hour <= kShape[i].h) {
      double f = (hour - kShape[i - 1].h) / (kShape[i].h - kShape[i - 1].h);
      return kShape[i - 1].rate + f * (kShape[i].rate - kShape[i - 1].rate);
    }
  }
  return kShape[std::size(kShape) - 1].rate;
}
constexpr double kWeekendRate = 0.02;

// The requests of day `day` (0: the first replayed day, negative: history).
std::vector<Job> synthesize_day(uint64_t seed, int day, bool with_bursts) {
  std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(day + 100000));
  std::uniform_real_distribution<> unit(0, 1);
  std::lognormal_distribution<> duration(std::log(360.0), 0.6);
  // Day 0 is a Wednesday: (day + 2) mod 7 is 0 on Mondays.
  int weekday = ((day + 2) % 7 + 7) % 7;
  bool weekend = weekday >= 5;
  const double day_s = day * 86400.0;
  std::vector<Job> jobs;
  auto job_at = [&](double s, bool burst) {
    jobs.push_back({day_s + s, std::min(duration(rng), 3600.0), burst});
  };
  // Thinning: candidates at the peak rate, kept with probability rate(t) / peak.
  const double peak = 0.5 / 60;  // per second
  for (double t = 0;;) {
    t += -std::log(1 - unit(rng)) / peak;
    if (t >= 86400) break;
    double rate = weekend ? kWeekendRate : weekday_rate(t / 3600);
    if (unit(rng) < rate / 60 / peak) job_at(t, false);
  }
  if (!weekend && with_bursts) {
    int bursts = 3 + static_cast<int>(unit(rng) * 4);
    for (int b = 0; b < bursts; ++b) {
      double start = (8.5 + unit(rng) * 9) * 3600;
      int size = 10 + static_cast<int>(unit(rng) * 11);
      for (int j = 0; j < size; ++j) job_at(start + unit(rng) * 60, true);
    }
  }
  std::sort(jobs.begin(), jobs.end(),
            [](const Job& a, const Job& b) { return a.arrival_s < b.arrival_s; });
  return jobs;
}

struct Policy {
  std::string name;
  int min_warm = 0;
  bool automatic = false;
};

struct Config {
  uint64_t seed = 35;
  int weeks = 2;
  int days = 1;
  int max = 8;
  int max_starting = 2;
  int auto_max = 8;
  double miss_probability = 0.1;
  double burst_every_h = 8;
  bool bursts = true;
};

struct Result {
  std::string policy;
  int leases = 0, hits = 0, boots = 0, retired = 0;
  int burst_leases = 0, burst_hits = 0;
  double idle_vm_hours = 0, warm_target_mean = 0;
  std::vector<double> waits;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

class PoolReplay {
 public:
  PoolReplay(const Config& config, const Policy& policy, const std::vector<Job>& jobs,
             const std::vector<TimePoint>& history)
      : config_(config), policy_(policy), jobs_(jobs), boot_rng_(config.seed ^ 0x35) {
    model_.seed(history);
    result_.policy = policy.name;
  }

  Result run() {
    for (size_t i = 0; i < jobs_.size(); ++i) push(jobs_[i].arrival_s, Kind::kArrival, i);
    const double end_s = config_.days * 86400.0;
    pass();  // the pool at the start: its refills
    while (!events_.empty()) {
      Event e = events_.top();
      events_.pop();
      advance(e.t);
      handle(e);
      pass();
    }
    advance(std::max(now_s_, end_s));
    result_.leases = static_cast<int>(jobs_.size());
    for (const Job& j : jobs_) result_.burst_leases += j.burst;
    result_.warm_target_mean = target_integral_ / end_s;
    return result_;
  }

 private:
  enum class Kind { kArrival, kBootDone, kJobDone };
  struct Event {
    double t;
    uint64_t seq;
    Kind kind;
    size_t id;  // job index or VM id
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  struct Vm {
    size_t id;
    VmState state = VmState::kStarting;
    std::optional<size_t> job;  // bound to it
    double boot_began = 0;
  };

  void push(double t, Kind kind, size_t id) { events_.push({t, seq_++, kind, id}); }

  // Integrates the idle warm VMs and the warm target up to `t`, within the replayed days
  // (the jobs still running after them only finish).
  void advance(double t) {
    double dt = std::min(t, config_.days * 86400.0) - now_s_;
    if (dt <= 0) {
      now_s_ = std::max(now_s_, t);
      return;
    }
    int idle = 0;
    for (const Vm& vm : vms_) idle += vm.state == VmState::kWarm && !vm.job;
    result_.idle_vm_hours += idle * dt / 3600;
    target_integral_ += min_warm_ * dt;
    now_s_ = t;
  }

  Vm* find(size_t id) {
    for (Vm& vm : vms_) {
      if (vm.id == id) return &vm;
    }
    return nullptr;
  }

  void ready(size_t job) {
    double wait = now_s_ + kHandoutS - jobs_[job].arrival_s;
    result_.waits.push_back(wait);
    push(now_s_ + kHandoutS + jobs_[job].duration_s, Kind::kJobDone, job);
  }

  void handle(const Event& e) {
    switch (e.kind) {
      case Kind::kArrival:
        queue_.push_back(e.id);
        model_.record_arrival(at(now_s_));
        break;
      case Kind::kBootDone: {
        Vm* vm = find(e.id);
        if (!vm) break;  // retired while booting
        model_.record_boot(Millis(std::llround((now_s_ - vm->boot_began) * 1000)));
        if (vm->job) {
          vm->state = VmState::kLeased;
          ready(*vm->job);
        } else {
          vm->state = VmState::kWarm;
        }
        break;
      }
      case Kind::kJobDone:
        std::erase_if(vms_, [&](const Vm& vm) { return vm.job == e.id; });
        break;
    }
  }

  void boot(std::optional<size_t> job) {
    double boot_s = std::uniform_real_distribution<>(kBootMinS, kBootMaxS)(boot_rng_);
    vms_.push_back({.id = next_vm_, .job = job, .boot_began = now_s_});
    push(now_s_ + boot_s, Kind::kBootDone, next_vm_++);
    ++result_.boots;
  }

  void pass() {
    PoolSnapshot snap;
    snap.limits = {
        .min_warm = policy_.min_warm, .max = config_.max, .max_starting = config_.max_starting};
    if (policy_.automatic) {
      AutoWarmConfig auto_config{
          .auto_min = 0,
          .auto_max = config_.auto_max,
          .miss_probability = config_.miss_probability,
          .burst_every = std::chrono::duration_cast<Seconds>(Dur(config_.burst_every_h * 3600))};
      // Leases no free warm VM serves in this pass: they wait for boots.
      int free_warm = 0;
      for (const Vm& vm : vms_) free_warm += vm.state == VmState::kWarm && !vm.job;
      int waiting = std::max(0, static_cast<int>(queue_.size()) - free_warm);
      snap.limits.min_warm = model_.target(at(now_s_), waiting, auto_config).target;
      snap.shrinking = true;
    }
    min_warm_ = snap.limits.min_warm;
    snap.free_core_slots = 1000;  // the host has room: the pool's limits decide
    snap.now = at(now_s_);
    for (const Vm& vm : vms_) {
      snap.vms.push_back(
          {.name = std::to_string(vm.id), .state = vm.state, .bound = vm.job.has_value()});
    }
    for (size_t job : queue_) snap.queue.push_back(std::to_string(job));
    PoolPlan plan = plan_pool(snap);
    for (const PoolAction& a : plan.actions) {
      switch (a.kind) {
        case PoolActionKind::kHandOut: {
          size_t job = std::stoul(a.lease_id);
          Vm* vm = find(std::stoul(a.vm_name));
          vm->state = VmState::kLeased;
          vm->job = job;
          if (jobs_[job].arrival_s == now_s_) {
            ++result_.hits;
            result_.burst_hits += jobs_[job].burst;
          }
          ready(job);
          std::erase(queue_, job);
          break;
        }
        case PoolActionKind::kBootForLease: {
          size_t job = std::stoul(a.lease_id);
          boot(job);
          std::erase(queue_, job);
          break;
        }
        case PoolActionKind::kBootWarm:
          boot(std::nullopt);
          break;
        case PoolActionKind::kRetire: {
          size_t id = std::stoul(a.vm_name);
          std::erase_if(vms_, [&](const Vm& vm) { return vm.id == id; });
          ++result_.retired;
          break;
        }
        case PoolActionKind::kWait:
          break;
      }
    }
  }

  const Config& config_;
  const Policy& policy_;
  const std::vector<Job>& jobs_;
  DemandModel model_;
  std::mt19937_64 boot_rng_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  std::vector<Vm> vms_;  // in creation order: the oldest warm VM is handed out first
  std::deque<size_t> queue_;
  size_t next_vm_ = 0;
  double now_s_ = 0;
  int min_warm_ = 0;
  double target_integral_ = 0;
  Result result_;
};

json to_json(const Result& r) {
  return {{"policy", r.policy},
          {"leases", r.leases},
          {"warm_hits", r.hits},
          {"warm_hit_rate", r.leases ? static_cast<double>(r.hits) / r.leases : 0.0},
          {"burst_leases", r.burst_leases},
          {"burst_warm_hits", r.burst_hits},
          {"warm_hit_rate_outside_bursts",
           r.leases > r.burst_leases
               ? static_cast<double>(r.hits - r.burst_hits) / (r.leases - r.burst_leases)
               : 0.0},
          {"wait_s",
           {{"p50", percentile(r.waits, 0.5)},
            {"p90", percentile(r.waits, 0.9)},
            {"max", percentile(r.waits, 1.0)}}},
          {"idle_vm_hours", r.idle_vm_hours},
          {"boots", r.boots},
          {"retired", r.retired},
          {"mean_min_warm", r.warm_target_mean}};
}

}  // namespace
}  // namespace armhive

// A trace of one's own (--trace FILE): one job per line, "ARRIVAL_S,DURATION_S" in seconds
// from the replay's start (a negative arrival is history the auto model is seeded with); '#'
// starts a comment, blank lines are skipped. A line that is not one names the file and line.
// False with `error` set when the file cannot be read or a line is not one.
bool read_trace(const std::string& path, std::vector<armhive::Job>& jobs, std::string& error) {
  using namespace armhive;
  std::ifstream in(path);
  if (!in) {
    error = "cannot read " + path;
    return false;
  }
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Job j;
    char comma = 0;
    std::istringstream fields(line);
    std::string rest;
    if (!(fields >> j.arrival_s >> comma >> j.duration_s) || comma != ',' || (fields >> rest) ||
        !std::isfinite(j.arrival_s) || !std::isfinite(j.duration_s) || j.duration_s < 0 ||
        j.arrival_s > 366.0 * 86400) {
      error = path + ":" + std::to_string(n) +
              ": expected ARRIVAL_S,DURATION_S (seconds, the duration not negative), got \"" +
              line + "\"";
      return false;
    }
    jobs.push_back(j);
  }
  std::sort(jobs.begin(), jobs.end(),
            [](const Job& a, const Job& b) { return a.arrival_s < b.arrival_s; });
  return true;
}

int main(int argc, char** argv) {
  using namespace armhive;
  Config config;
  std::string out;
  CLI::App app{"Warm pool policies replayed over a synthetic day of CI jobs (issue 35)"};
  app.add_option("--seed", config.seed, "seed of the trace and the boot times");
  app.add_option("--weeks", config.weeks, "weeks of history the auto model is seeded with")
      ->check(CLI::Range(0, 52));
  app.add_option("--days", config.days, "days replayed, from Wednesday")->check(CLI::Range(1, 28));
  app.add_option("--max", config.max, "the pool's max")->check(CLI::Range(1, 1000));
  app.add_option("--max-starting", config.max_starting, "the pool's max_starting")
      ->check(CLI::Range(1, 1000));
  app.add_option("--auto-max", config.auto_max, "auto_max of the auto policy")
      ->check(CLI::Range(0, 1000));
  app.add_option("--miss-probability", config.miss_probability,
                 "the auto model's chance a request may find no warm VM")
      ->check(CLI::Range(0.001, 0.999));
  app.add_option("--burst-every", config.burst_every_h,
                 "the auto model's burst_every in hours: runs of k requests that come this often "
                 "hold k warm VMs")
      ->check(CLI::Range(0.01, 1000.0));
  bool no_bursts = false;
  app.add_flag("--no-bursts", no_bursts, "the trace without its bursts (steady traffic only)");
  app.add_option("--out", out, "write the results as JSON");
  std::string trace;
  app.add_option("--trace", trace,
                 "replay this trace instead of the synthetic days: ARRIVAL_S,DURATION_S per line");
  CLI11_PARSE(app, argc, argv);
  config.bursts = !no_bursts;

  std::vector<Job> jobs, history_jobs;
  if (!trace.empty()) {
    std::vector<Job> read;
    std::string error;
    if (!read_trace(trace, read, error)) {
      std::fprintf(stderr, "armhive-bench-warm-replay: --trace: %s\n", error.c_str());
      return 2;
    }
    for (const Job& j : read) (j.arrival_s < 0 ? history_jobs : jobs).push_back(j);
  } else {
    for (int d = 0; d < config.days; ++d) {
      auto day = synthesize_day(config.seed, d, config.bursts);
      jobs.insert(jobs.end(), day.begin(), day.end());
    }
    for (int d = -7 * config.weeks; d < 0; ++d) {
      auto day = synthesize_day(config.seed, d, config.bursts);
      history_jobs.insert(history_jobs.end(), day.begin(), day.end());
    }
  }
  std::vector<TimePoint> history;
  for (const Job& j : history_jobs) history.push_back(at(j.arrival_s));

  const std::vector<Policy> policies = {{"min_warm=0", 0, false},
                                        {"min_warm=1", 1, false},
                                        {"min_warm=2", 2, false},
                                        {"min_warm=4", 4, false},
                                        {"auto", 0, true}};
  std::vector<Result> results;
  for (const Policy& p : policies) results.push_back(PoolReplay(config, p, jobs, history).run());

  std::printf(
      "%d leases over %d day(s), max %d, max_starting %d, auto model seeded with %d "
      "week(s) (%zu requests)\n",
      static_cast<int>(jobs.size()), config.days, config.max, config.max_starting, config.weeks,
      history.size());
  std::printf("%-11s %9s %15s %8s %8s %8s %10s %6s %9s\n", "policy", "warm hit", "outside bursts",
              "p50 s", "p90 s", "max s", "idle VM-h", "boots", "mean warm");
  json rows = json::array();
  for (const Result& r : results) {
    json j = to_json(r);
    rows.push_back(j);
    std::printf("%-11s %8.1f%% %14.1f%% %8.2f %8.2f %8.1f %10.2f %6d %9.2f\n", r.policy.c_str(),
                100 * j["warm_hit_rate"].get<double>(),
                100 * j["warm_hit_rate_outside_bursts"].get<double>(),
                j["wait_s"]["p50"].get<double>(), j["wait_s"]["p90"].get<double>(),
                j["wait_s"]["max"].get<double>(), r.idle_vm_hours, r.boots, r.warm_target_mean);
  }
  // The best fixed setting: the highest hit rate, then the fewest idle VM-hours.
  const Result* best = nullptr;
  for (const Result& r : results) {
    if (r.policy == "auto") continue;
    if (!best || r.hits > best->hits ||
        (r.hits == best->hits && r.idle_vm_hours < best->idle_vm_hours)) {
      best = &r;
    }
  }
  const Result& autom = results.back();
  double hit_ratio = best->hits ? static_cast<double>(autom.hits) / best->hits : 1.0;
  double idle_ratio = best->idle_vm_hours > 0 ? autom.idle_vm_hours / best->idle_vm_hours : 0.0;
  bool met = autom.hits >= best->hits && idle_ratio <= 0.6;
  std::printf(
      "auto vs best fixed (%s): hit rate x%.3f, idle VM-hours x%.2f: goal (same hit "
      "rate, <= 60%% idle) %s\n",
      best->policy.c_str(), hit_ratio, idle_ratio, met ? "MET" : "NOT met");

  if (!out.empty()) {
    json doc = {{"benchmark", "warm_replay"},
                {"trace", config.bursts ? "synthetic" : "synthetic, no bursts"},
                {"seed", config.seed},
                {"weeks_of_history", config.weeks},
                {"days", config.days},
                {"pool", {{"max", config.max}, {"max_starting", config.max_starting}}},
                {"auto",
                 {{"auto_min", 0},
                  {"auto_max", config.auto_max},
                  {"miss_probability", config.miss_probability},
                  {"burst_every_h", config.burst_every_h}}},
                {"boot_s", {{"min", kBootMinS}, {"max", kBootMaxS}}},
                {"handout_s", kHandoutS},
                {"policies", rows},
                {"goal",
                 {{"best_fixed", best->policy},
                  {"hit_rate_ratio", hit_ratio},
                  {"idle_vm_hours_ratio", idle_ratio},
                  {"met", met}}}};
    std::ofstream f(out);
    f << doc.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", out.c_str());
      return 1;
    }
  }
  return 0;
}
