#include "daemon/bench/suites.h"

#include <functional>
#include <optional>
#include <thread>

#include "daemon/bench/host_mtu.h"
#include "daemon/bench/host_sampler.h"
#include "daemon/bench/iperf3_parser.h"
#include "daemon/bench/mtu_journal.h"
#include "daemon/bench/report.h"
#include "daemon/bench/stats.h"
#include "daemon/bench/tool_runner.h"
#include "daemon/bench/zstd_parser.h"

namespace armhive {
namespace {

using nlohmann::json;

std::string ms_text(std::chrono::milliseconds d) {
  return std::to_string(d.count() / 1000) + "." + std::to_string((d.count() % 1000) / 100) + " s";
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (s.size() > 400) s = s.substr(0, 400) + "...";
  return s;
}

// Runs argv in the guest; a non-zero exit, a signal or a timeout is an error naming `what`.
Result<GuestExecResult> guest_run(const SuiteContext& ctx, const std::string& what,
                                  std::vector<std::string> argv,
                                  std::chrono::milliseconds timeout) {
  auto r = ctx.agent.exec(ctx.target.vm_name, {.argv = std::move(argv), .timeout = timeout});
  if (!r.is_ok()) return r.status().annotate(what + " in the guest");
  if (r->timed_out) {
    return Status(ErrorCode::kTimeout, what + " in the guest timed out after " + ms_text(timeout),
                  ctx.target.vm_name);
  }
  if (r->exit_code != 0) {
    std::string detail = trim(r->err.empty() ? r->out : r->err);
    std::string hint = r->exit_code == 127 ? " (not installed in the guest image?)" : "";
    return Status(ErrorCode::kUnavailable,
                  what + " in the guest failed with exit code " + std::to_string(r->exit_code) +
                      hint + (detail.empty() ? "" : ": " + detail),
                  ctx.target.vm_name);
  }
  return r;
}

// Stops the guest iperf3 server named by `pidfile`, whatever state it is in. Best effort: the
// server may have exited already (-1 makes it exit after one test) or never started.
void stop_guest_server(const SuiteContext& ctx, const std::string& pidfile) {
  auto pid = ctx.agent.exec(
      ctx.target.vm_name, {.argv = {"cat", pidfile}, .timeout = ctx.options.guest_command_timeout});
  if (pid.is_ok() && pid->exit_code == 0) {
    std::string p = trim(pid->out);
    if (!p.empty() && p.find_first_not_of("0123456789") == std::string::npos) {
      (void)ctx.agent.exec(ctx.target.vm_name,
                           {.argv = {"kill", p}, .timeout = ctx.options.guest_command_timeout});
    }
  }
  (void)ctx.agent.exec(ctx.target.vm_name, {.argv = {"rm", "-f", pidfile},
                                            .timeout = ctx.options.guest_command_timeout});
}

// One iperf3 test (one direction at one MTU): server in the guest, client here.
Status one_iperf(const SuiteContext& ctx, const NetworkOptions& opts, int mtu, bool reverse,
                 json& runs) {
  const std::string port = std::to_string(ctx.options.iperf3_port);
  const std::string pidfile = ctx.options.guest_run_dir + "/armhive-iperf3-" + ctx.run_id + ".pid";
  std::string what = std::string(reverse ? "guest-to-host" : "host-to-guest") + " iperf3 at MTU " +
                     std::to_string(mtu);

  // From here on the server may exist: every return passes through stop_guest_server.
  struct ServerGuard {
    const SuiteContext& ctx;
    const std::string& pidfile;
    ~ServerGuard() { stop_guest_server(ctx, pidfile); }
  } guard{ctx, pidfile};

  auto started = guest_run(ctx, "starting the iperf3 server",
                           {"iperf3", "-s", "-D", "-1", "-p", port, "--pidfile", pidfile},
                           ctx.options.guest_command_timeout);
  if (!started.is_ok()) return started.status().annotate(what);

  std::vector<std::string> argv = {"iperf3",
                                   "-c",
                                   ctx.target.address,
                                   "-p",
                                   port,
                                   "-P",
                                   std::to_string(opts.streams),
                                   "--cport",
                                   std::to_string(opts.cport),
                                   "-t",
                                   std::to_string(opts.duration_s),
                                   "-i",
                                   std::to_string(opts.interval_s),
                                   "-J",
                                   "--connect-timeout",
                                   "5000"};
  if (reverse) argv.push_back("-R");
  const auto timeout = std::chrono::seconds(opts.duration_s + 30);

  CpuSampler sampler(ctx.options.proc_root, std::chrono::seconds(opts.interval_s));
  Status sampler_started = sampler.start();
  Result<IperfResult> parsed = unavailable("iperf3 client not run");
  for (int attempt = 1; attempt <= std::max(1, ctx.options.client_connect_attempts); ++attempt) {
    if (ctx.cancelled())
      return unavailable("cancelled: the daemon is shutting down").annotate(what);
    auto client = ctx.processes.run({.argv = argv, .timeout = timeout});
    if (!client.is_ok()) {
      if (client.status().code() == ErrorCode::kNotFound) {
        return unavailable("iperf3 is not installed on the host: " + client.status().message())
            .annotate(what);
      }
      return client.status().annotate(what + ": running the host iperf3 client");
    }
    if (client->timed_out) {
      return Status(ErrorCode::kTimeout, "the host iperf3 client timed out after " +
                                             std::to_string(timeout.count()) + " s")
          .annotate(what);
    }
    parsed = parse_iperf3_json(client->out);
    if (parsed.is_ok()) break;
    bool refused = parsed.status().message().find("unable to connect") != std::string::npos;
    if (!refused || attempt == ctx.options.client_connect_attempts) {
      std::string extra =
          client->out.empty() && !client->err.empty() ? " (" + trim(client->err) + ")" : "";
      return Status(parsed.status().code(), parsed.status().message() + extra).annotate(what);
    }
    std::this_thread::sleep_for(ctx.options.client_retry_delay);
  }
  std::optional<HostCpuUsage> usage;
  std::string usage_error = sampler_started.is_ok() ? "" : sampler_started.message();
  if (sampler_started.is_ok()) {
    auto u = sampler.stop();
    if (u.is_ok()) {
      usage = std::move(u).value();
    } else {
      usage_error = u.status().message();
    }
  }
  runs.push_back(network_run_json(*parsed, mtu, usage, usage_error));
  return Status::ok();
}

Status set_guest_mtu(const SuiteContext& ctx, int mtu) {
  auto r = guest_run(
      ctx, "setting the guest MTU to " + std::to_string(mtu),
      {"ip", "link", "set", "dev", ctx.options.guest_interface, "mtu", std::to_string(mtu)},
      ctx.options.guest_command_timeout);
  return r.is_ok() ? Status::ok() : r.status();
}

// The host side of MTU runs: the VM's bridge and tap, found once per run.
struct HostMtuSide {
  HostMtuLinks links;
  HostLinkMtu tap;
};

Result<HostMtuSide> find_host_mtu_side(const SuiteContext& ctx) {
  HostMtuSide side;
  ARMHIVE_ASSIGN_OR_RETURN(side.links, read_host_mtu_links(ctx.processes, ctx.target.bridge,
                                                           ctx.options.guest_command_timeout));
  auto mac = guest_run(ctx, "reading the guest's MAC",
                       {"cat", "/sys/class/net/" + ctx.options.guest_interface + "/address"},
                       ctx.options.guest_command_timeout);
  if (!mac.is_ok()) return mac.status();
  ARMHIVE_ASSIGN_OR_RETURN(side.tap, find_tap(side.links, mac->out));
  return side;
}

json mtu_steps_json(const std::vector<MtuStep>& steps) {
  json out = json::array();
  for (const MtuStep& s : steps) out.push_back({{"link", s.link}, {"from", s.from}, {"to", s.to}});
  return out;
}

// Runs `body` at `mtu` with bridge, tap (when `host` is set) and guest changed, and restores
// all three in reverse order on every path. Records what changed and the verified path MTU in
// `change`. Returns the first error (the body's before a restore's).
Status at_mtu(const SuiteContext& ctx, const std::optional<HostMtuSide>& host, int mtu,
              json& change, const std::function<Status()>& body) {
  const auto timeout = ctx.options.guest_command_timeout;
  change = {{"mtu", mtu},
            {"guest",
             {{"interface", ctx.options.guest_interface}, {"from", ctx.target.mtu}, {"to", mtu}}},
            {"host", nullptr},
            {"verified_path_mtu", nullptr}};
  MtuPlan plan;
  size_t applied = 0;
  Status result = Status::ok();
  const std::string journal = mtu_journal_path(ctx.options.runs_dir, ctx.run_id);
  if (host) {
    auto p = plan_host_mtu(mtu, {host->links.bridge, host->tap});
    if (!p.is_ok()) return p.status();
    plan = *p;
    change["host"] = {{"bridge", host->links.bridge.name},
                      {"tap", host->tap.name},
                      {"applied", mtu_steps_json(plan.apply)}};
    // The originals go to disk before the shared bridge changes: a crash before the restore
    // below is undone at the next start (mtu_journal.h).
    if (!plan.apply.empty() && !ctx.options.runs_dir.empty()) {
      result = write_mtu_journal(journal, plan.apply);
    }
    if (result.is_ok()) result = apply_mtu_steps(ctx.processes, plan.apply, timeout, &applied);
    if (!result.is_ok()) result = result.annotate("setting the host MTU to " + std::to_string(mtu));
  }
  bool guest_changed = false;
  if (result.is_ok()) {
    guest_changed = true;
    result = set_guest_mtu(ctx, mtu);
  }
  if (result.is_ok()) {
    std::string why;
    if (auto verified = verify_path_mtu(ctx.processes, ctx.target.address, mtu, timeout, why)) {
      change["verified_path_mtu"] = *verified;
    } else {
      change["path_mtu_error"] = why;
    }
    result = body();
  }
  // Restore: guest, then tap and bridge (the reverse of the steps that were applied).
  if (guest_changed) {
    Status s = set_guest_mtu(ctx, ctx.target.mtu);
    if (result.is_ok() && !s.is_ok()) result = s.annotate("restoring the guest MTU");
  }
  if (applied > 0) {
    std::vector<MtuStep> undo(plan.restore.end() - static_cast<std::ptrdiff_t>(applied),
                              plan.restore.end());
    Status s = apply_mtu_steps(ctx.processes, undo, timeout);
    if (result.is_ok() && !s.is_ok()) result = s.annotate("restoring the host MTU");
    if (host) change["host"]["restored"] = s.is_ok() ? json(mtu_steps_json(undo)) : json(nullptr);
    // Kept when the restore failed: the next start tries again.
    if (s.is_ok()) remove_mtu_journal(journal);
  } else if (host) {
    remove_mtu_journal(journal);  // nothing changed on the host
  }
  return result;
}

Result<std::vector<ZstdBenchResult>> zstd_repeats(const SuiteContext& ctx, bool on_host, int level,
                                                  int threads, int repeats,
                                                  const std::string& corpus) {
  std::vector<std::string> argv = {"zstd",
                                   "-q",
                                   "-b" + std::to_string(level),
                                   "-T" + std::to_string(threads),
                                   "-i" + std::to_string(ctx.options.zstd_seconds),
                                   corpus};
  std::string what = std::string(on_host ? "host" : "guest") + " zstd -b" + std::to_string(level) +
                     " -T" + std::to_string(threads);
  std::vector<ZstdBenchResult> out;
  for (int i = 0; i < repeats; ++i) {
    if (ctx.cancelled()) return unavailable("cancelled: the daemon is shutting down");
    std::string text;
    if (on_host) {
      // On the VM's pinned cores (taskset), like the other suites' host runs.
      auto r = run_tool(ctx, ToolSide::kHost, what, argv, ctx.options.zstd_timeout);
      if (!r.is_ok()) return r.status();
      text = r->text();
    } else {
      auto r = guest_run(ctx, "zstd -b" + std::to_string(level) + " -T" + std::to_string(threads),
                         argv, ctx.options.zstd_timeout);
      if (!r.is_ok()) return r.status();
      text = r->out + "\n" + r->err;
    }
    auto parsed = parse_zstd_bench(text);
    if (!parsed.is_ok())
      return parsed.status().annotate(what + " (repeat " + std::to_string(i + 1) + ")");
    out.push_back(*parsed);
  }
  return out;
}

}  // namespace

Status run_network_suite(const SuiteContext& ctx, const NetworkOptions& opts, json& out) {
  out = {{"runs", json::array()},
         {"iperf3_port", ctx.options.iperf3_port},
         {"guest_iperf3_version", nullptr}};
  // Best effort: a missing iperf3 is reported by the server start below, with its context.
  auto version = ctx.agent.exec(ctx.target.vm_name, {.argv = {"iperf3", "--version"},
                                                     .timeout = ctx.options.guest_command_timeout});
  if (version.is_ok() && version->exit_code == 0) {
    std::string first = version->out.substr(0, version->out.find('\n'));
    if (!first.empty()) out["guest_iperf3_version"] = trim(first);
  }
  auto both = [&](int mtu) -> Status {
    for (bool reverse : {false, true}) {
      if (reverse && !opts.both_directions) continue;
      ARMHIVE_RETURN_IF_ERROR(one_iperf(ctx, opts, mtu, reverse, out["runs"]));
    }
    return Status::ok();
  };
  if (opts.mtus.empty()) {
    Status result = both(ctx.target.mtu);
    if (!out["runs"].empty()) out["iperf3_version"] = out["runs"][0].value("iperf3_version", "");
    return result;
  }
  // MTU runs: the host's bridge and the VM's tap change with the guest when the bridge is
  // known; otherwise only the guest does, and the report says so.
  std::optional<HostMtuSide> host;
  out["mtu_changes"] = json::array();
  if (ctx.target.bridge.empty()) {
    out["host_mtu_note"] = "the VM's bridge is not known: only the guest's MTU was changed";
  } else {
    auto side = find_host_mtu_side(ctx);
    if (!side.is_ok()) return side.status().annotate("finding the VM's bridge and tap");
    host = *side;
  }
  Status result = Status::ok();
  for (int mtu : opts.mtus) {
    json change;
    result = at_mtu(ctx, host, mtu, change, [&] { return both(mtu); });
    out["mtu_changes"].push_back(std::move(change));
    if (!result.is_ok()) break;
  }
  if (!out["runs"].empty()) out["iperf3_version"] = out["runs"][0].value("iperf3_version", "");
  return result;
}

Status run_compression_suite(const SuiteContext& ctx, const CompressionOptions& opts, json& out) {
  const LeaseTarget& t = ctx.target;
  out = {{"level", opts.level},
         {"repeats", opts.repeats},
         {"seconds_per_measurement", ctx.options.zstd_seconds},
         {"corpus",
          {{"path", t.corpus_path},
           {"bytes", t.corpus_bytes},
           {"seed", t.corpus_seed},
           {"sha256", t.corpus_sha256},
           {"description", t.corpus_description}}},
         {"guest", json::array()},
         {"skipped", json::array()}};
  auto version =
      guest_run(ctx, "zstd --version", {"zstd", "--version"}, ctx.options.guest_command_timeout);
  if (!version.is_ok()) return version.status().annotate("zstd");
  auto v = parse_zstd_version(version->out + version->err);
  if (!v.is_ok()) return v.status().annotate("zstd in the guest");
  out["zstd_version"] = *v;

  std::vector<int> threads = {1};
  if (opts.multi_thread && t.vcpus > 1) {
    threads.push_back(t.vcpus);
  } else if (opts.multi_thread) {
    out["skipped"].push_back(
        {{"threads", t.vcpus}, {"reason", "the VM has one vCPU: -T1 is the only run"}});
  }
  std::map<int, std::vector<ZstdBenchResult>> guest;
  for (int n : threads) {
    auto r = zstd_repeats(ctx, false, opts.level, n, opts.repeats, t.corpus_path);
    if (!r.is_ok()) return r.status();
    // The bench reads the input size; a manifest that disagrees means another corpus.
    if (t.corpus_bytes != 0 && !r->empty() && r->front().input_bytes != t.corpus_bytes) {
      out["corpus"]["note"] = "zstd read " + std::to_string(r->front().input_bytes) +
                              " bytes, the manifest says " + std::to_string(t.corpus_bytes);
    }
    out["guest"].push_back(zstd_series_json(n, *r));
    guest[n] = std::move(r).value();
  }

  // The host comparison only means something when the host runs the guest's architecture
  // natively (KVM): under TCG it would compare the emulator against the host.
  std::string reason;
  if (t.emulated) {
    reason = "the guest (" + t.guest_arch + ") is emulated by QEMU TCG on this " + t.host_arch +
             " host: a guest/host ratio would measure the emulator, not the VM";
  } else if (t.host_arch != t.guest_arch) {
    reason = "the host architecture (" + t.host_arch + ") differs from the guest's (" +
             t.guest_arch + ")";
  } else if (t.host_corpus_path.empty()) {
    reason = "the corpus is not available on the host";
  }
  if (!reason.empty()) {
    out["host"] = {{"available", false}, {"reason", reason}};
    out["guest_host_ratio"] = {{"available", false}, {"reason", reason}};
    return Status::ok();
  }
  json host{{"available", true}, {"results", json::array()}};
  auto hv = ctx.processes.run(
      {.argv = {"zstd", "--version"}, .timeout = ctx.options.guest_command_timeout});
  if (hv.is_ok()) {
    if (auto hvv = parse_zstd_version(hv->out + hv->err); hvv.is_ok()) host["zstd_version"] = *hvv;
  }
  json ratios = json::array();
  for (int n : threads) {
    auto r = zstd_repeats(ctx, true, opts.level, n, opts.repeats, t.host_corpus_path);
    if (!r.is_ok()) {
      out["host"] = {{"available", false},
                     {"reason", "the host run failed: " + r.status().message()}};
      out["guest_host_ratio"] = out["host"];
      return Status::ok();  // the guest figures stand on their own
    }
    json series = zstd_series_json(n, *r);
    json gs = zstd_series_json(n, guest[n]);
    double hc = series["compress_mb_s"]["median"].get<double>();
    double hd = series["decompress_mb_s"]["median"].get<double>();
    ratios.push_back(
        {{"threads", n},
         {"compress", hc > 0 ? gs["compress_mb_s"]["median"].get<double>() / hc : 0.0},
         {"decompress", hd > 0 ? gs["decompress_mb_s"]["median"].get<double>() / hd : 0.0}});
    host["results"].push_back(series);
  }
  if (host.contains("zstd_version") && host["zstd_version"] != out["zstd_version"]) {
    host["note"] =
        "host and guest zstd versions differ: throughput moves by up to 17 % between versions";
  }
  out["host"] = host;
  out["guest_host_ratio"] = {{"available", true}, {"by_threads", ratios}};
  return Status::ok();
}

}  // namespace armhive
