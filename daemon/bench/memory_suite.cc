#include <map>

#include "daemon/bench/cache_topology.h"
#include "daemon/bench/host_baseline.h"
#include "daemon/bench/machine_suites.h"
#include "daemon/bench/stream_parser.h"
#include "daemon/bench/suite_figures.h"
#include "daemon/bench/tool_runner.h"

namespace armhive {
namespace {

using nlohmann::json;

constexpr const char* kKernels[] = {"copy", "scale", "add", "triad"};

std::string threads_text(int n) { return std::to_string(n) + (n == 1 ? " thread" : " threads"); }

// Runs armhive-stream `repeats` times with n threads; appends four figures to `figures`.
Status stream_series(const SuiteContext& ctx, ToolSide side, const std::string& binary,
                     const MemoryOptions& opts, int threads, json& figures, json& settings) {
  const uint64_t elements = (static_cast<uint64_t>(opts.array_mib) << 20) / sizeof(double);
  std::map<std::string, std::vector<double>> samples;
  const std::string what = "armhive-stream -t " + std::to_string(threads);
  for (int i = 0; i < opts.repeats; ++i) {
    ARMHIVE_ASSIGN_OR_RETURN(ToolOutput o, run_tool_checked(ctx, side, what,
                                                            {binary, "-n", std::to_string(elements),
                                                             "-t", std::to_string(threads), "-i",
                                                             std::to_string(opts.iterations)},
                                                            ctx.options.stream_timeout));
    auto r = parse_stream_output(o.out);
    if (!r.is_ok()) {
      return r.status().annotate(std::string(side_name(side)) + " " + what + " (repeat " +
                                 std::to_string(i + 1) + ")");
    }
    if (r->threads != threads || r->array_elements != elements) {
      return invalid_argument("memory", "armhive-stream ran other settings than asked");
    }
    settings["array_bytes"] = r->array_bytes;
    samples["copy"].push_back(r->copy_mb_s);
    samples["scale"].push_back(r->scale_mb_s);
    samples["add"].push_back(r->add_mb_s);
    samples["triad"].push_back(r->triad_mb_s);
  }
  for (const char* k : kKernels) {
    figures.push_back(figure_json({.suite = "memory",
                                   .side = side_name(side),
                                   .variant = "t" + std::to_string(threads),
                                   .figure = std::string(k) + "_mb_s",
                                   .label = std::string(k) + ", " + threads_text(threads),
                                   .group = threads_text(threads),
                                   .name = k,
                                   .unit = "MB/s",
                                   .threads = threads},
                                  samples[k]));
  }
  return Status::ok();
}

Result<std::string> stream_version(const SuiteContext& ctx, ToolSide side,
                                   const std::string& binary) {
  ARMHIVE_ASSIGN_OR_RETURN(
      ToolOutput o, run_tool_checked(ctx, side, "armhive-stream --version", {binary, "--version"},
                                     ctx.options.guest_command_timeout));
  return parse_stream_version(o.out);
}

// MemAvailable in bytes from /proc/meminfo text; 0 when absent.
uint64_t mem_available(const std::string& meminfo) {
  size_t at = meminfo.find("MemAvailable:");
  if (at == std::string::npos) return 0;
  uint64_t kib = 0;
  for (size_t i = at + 13; i < meminfo.size() && meminfo[i] != '\n'; ++i) {
    if (meminfo[i] >= '0' && meminfo[i] <= '9' && kib < (1ULL << 50))
      kib = kib * 10 + static_cast<uint64_t>(meminfo[i] - '0');
  }
  return kib * 1024;
}

}  // namespace

Status run_memory_suite(const SuiteContext& ctx, const MemoryOptions& opts, json& out) {
  const LeaseTarget& t = ctx.target;
  const uint64_t array_bytes = static_cast<uint64_t>(opts.array_mib) << 20;
  json llc = nullptr;
  uint64_t llc_bytes = t.last_level_cache_bytes;
  if (llc_bytes != 0) {
    llc = {{"bytes", llc_bytes}, {"source", "lease target"}};
  } else if (auto c = read_last_level_cache(ctx.options.sys_root)) {
    llc_bytes = c->bytes;
    llc = {{"bytes", c->bytes}, {"level", c->level}, {"source", c->source}};
  }
  out = {{"settings",
          {{"array_mib", opts.array_mib},
           {"array_bytes", array_bytes},
           {"arrays", 3},
           {"iterations", opts.iterations},
           {"repeats", opts.repeats},
           {"unit_note",
            "MB/s = 10^6 bytes/s; copy/scale count 2 arrays, add/triad 3; the "
            "best of the timed passes"},
           {"last_level_cache", llc},
           {"array_to_cache",
            llc_bytes ? json(static_cast<double>(array_bytes) / static_cast<double>(llc_bytes))
                      : json(nullptr)}}},
         {"figures", json::array()},
         {"skipped", json::array()}};
  // Checked again here: the request was validated against the resolver's figure at start().
  // An emulated guest's figure measures QEMU, not memory (the report says EMULATED): the
  // rule that keeps native arrays out of the host's cache would only refuse the suite on a
  // machine with a large cache, so it is noted instead.
  if (!t.emulated) {
    ARMHIVE_RETURN_IF_ERROR(validate_memory_array(opts, llc_bytes));
  } else if (!validate_memory_array(opts, llc_bytes).is_ok()) {
    out["settings"]["cache_note"] =
        "the arrays are not 4x the host's last-level cache: emulated, the figures measure QEMU "
        "more than memory";
  }

  ARMHIVE_ASSIGN_OR_RETURN(std::string version,
                           stream_version(ctx, ToolSide::kGuest, "armhive-stream"));
  out["tool"] = version;
  ARMHIVE_ASSIGN_OR_RETURN(
      ToolOutput meminfo,
      run_tool_checked(ctx, ToolSide::kGuest, "reading /proc/meminfo", {"cat", "/proc/meminfo"},
                       ctx.options.guest_command_timeout));
  uint64_t available = mem_available(meminfo.out);
  out["settings"]["guest_mem_available_bytes"] = available;
  if (available != 0 && 3 * array_bytes > available * 9 / 10) {
    return Status(ErrorCode::kResourceExhausted,
                  "the three arrays need " + std::to_string(3 * opts.array_mib) +
                      " MiB but the guest has " + std::to_string(available >> 20) +
                      " MiB available: lower memory.array_mib or give the VM more memory")
        .with_field("memory.array_mib");
  }
  std::vector<int> threads = {1};
  if (opts.multi_thread && t.vcpus > 1) {
    threads.push_back(t.vcpus);
  } else if (opts.multi_thread) {
    out["skipped"].push_back(
        {{"threads", t.vcpus}, {"reason", "the VM has one vCPU: 1 thread is the only run"}});
  }
  out["settings"]["threads"] = threads;
  for (int n : threads) {
    ARMHIVE_RETURN_IF_ERROR(stream_series(ctx, ToolSide::kGuest, "armhive-stream", opts, n,
                                          out["figures"], out["settings"]));
  }

  HostBaselineDecision d = decide_host_baseline(t, kSuiteMemory);
  if (d.run) {
    auto hv = stream_version(ctx, ToolSide::kHost, t.host_stream_path);
    d = versions_comparable("armhive-stream", version, hv.is_ok() ? *hv : "");
  }
  if (!d.run) {
    out["host"] = baseline_unavailable(d.reason);
    out["guest_host_ratio"] = baseline_unavailable(d.reason);
    return Status::ok();
  }
  json host{{"available", true}, {"tool", version}, {"figures", json::array()}, {"cpus", t.cpus}};
  json ignored = json::object();
  for (int n : threads) {
    Status s =
        stream_series(ctx, ToolSide::kHost, t.host_stream_path, opts, n, host["figures"], ignored);
    if (!s.is_ok()) {
      out["host"] = baseline_unavailable("the host run failed: " + s.message());
      out["guest_host_ratio"] = out["host"];
      return Status::ok();  // the guest figures stand on their own
    }
  }
  out["guest_host_ratio"] = guest_host_ratios(out["figures"], host["figures"]);
  out["host"] = std::move(host);
  return Status::ok();
}

}  // namespace armhive
