#include <map>

#include "daemon/bench/host_baseline.h"
#include "daemon/bench/machine_suites.h"
#include "daemon/bench/openssl_parser.h"
#include "daemon/bench/suite_figures.h"
#include "daemon/bench/tool_runner.h"

namespace armhive {
namespace {

using nlohmann::json;

constexpr int kKeySizes[] = {2048, 4096};

std::string processes_text(int n) {
  return n == 1 ? std::string("1 process") : "-multi " + std::to_string(n);
}

// `openssl speed` `repeats` times with n processes; appends sign/verify figures per key size.
Status speed_series(const SuiteContext& ctx, ToolSide side, const CryptoOptions& opts,
                    int processes, json& figures) {
  std::vector<std::string> argv = {"openssl", "speed", "-seconds", std::to_string(opts.seconds)};
  if (processes > 1) argv.insert(argv.end(), {"-multi", std::to_string(processes)});
  for (int bits : kKeySizes) argv.push_back("rsa" + std::to_string(bits));
  // Sign and verify per key size, opts.seconds each, plus key loading; TCG is slow to start.
  const auto timeout = std::chrono::seconds(4 * opts.seconds * 2 + 120);
  std::map<std::string, std::vector<double>> samples;
  const std::string what = "openssl speed (" + processes_text(processes) + ")";
  for (int i = 0; i < opts.repeats; ++i) {
    ARMHIVE_ASSIGN_OR_RETURN(ToolOutput o, run_tool_checked(ctx, side, what, argv, timeout));
    auto r = parse_openssl_speed(o.text());
    if (!r.is_ok()) {
      return r.status().annotate(std::string(side_name(side)) + " " + what + " (repeat " +
                                 std::to_string(i + 1) + ")");
    }
    if (r->processes != processes) {
      return invalid_argument("crypto", what + " ran " + std::to_string(r->processes) +
                                            " processes, not " + std::to_string(processes));
    }
    for (int bits : kKeySizes) {
      bool found = false;
      for (const auto& row : r->rsa) {
        if (row.bits != bits) continue;
        found = true;
        samples["rsa" + std::to_string(bits) + ".sign"].push_back(row.sign_per_s);
        samples["rsa" + std::to_string(bits) + ".verify"].push_back(row.verify_per_s);
      }
      if (!found) {
        return invalid_argument("crypto.rsa" + std::to_string(bits),
                                what + " printed no RSA " + std::to_string(bits) + " row");
      }
    }
  }
  for (int bits : kKeySizes) {
    for (const char* op : {"sign", "verify"}) {
      std::string k = "rsa" + std::to_string(bits) + "." + op;
      figures.push_back(figure_json(
          {.suite = "crypto",
           .side = side_name(side),
           .variant = "p" + std::to_string(processes),
           .figure = "rsa" + std::to_string(bits) + "_" + op + "_per_s",
           .label = "RSA " + std::to_string(bits) + " " + op + "/s, " + processes_text(processes),
           .group = "RSA " + std::to_string(bits) + " " + op,
           .name = processes_text(processes),
           .unit = "ops/s",
           .threads = processes},
          samples[k]));
    }
  }
  return Status::ok();
}

Result<std::string> openssl_version(const SuiteContext& ctx, ToolSide side) {
  ARMHIVE_ASSIGN_OR_RETURN(ToolOutput o,
                           run_tool_checked(ctx, side, "openssl version", {"openssl", "version"},
                                            ctx.options.guest_command_timeout));
  return parse_openssl_version(o.out);
}

}  // namespace

Status run_crypto_suite(const SuiteContext& ctx, const CryptoOptions& opts, json& out) {
  const LeaseTarget& t = ctx.target;
  out = {{"settings",
          {{"seconds", opts.seconds},
           {"repeats", opts.repeats},
           {"rsa_bits", json(std::vector<int>(std::begin(kKeySizes), std::end(kKeySizes)))},
           {"unit_note", "operations per second; with -multi N the sum over N processes"}}},
         {"figures", json::array()},
         {"skipped", json::array()}};
  auto version = openssl_version(ctx, ToolSide::kGuest);
  if (!version.is_ok()) return version.status().annotate("openssl in the guest");
  out["openssl_version"] = *version;
  std::vector<int> processes = {1};
  if (opts.multi_thread && t.vcpus > 1) {
    processes.push_back(t.vcpus);
  } else if (opts.multi_thread) {
    out["skipped"].push_back(
        {{"processes", t.vcpus}, {"reason", "the VM has one vCPU: no -multi run"}});
  }
  out["settings"]["processes"] = processes;
  for (int n : processes) {
    ARMHIVE_RETURN_IF_ERROR(speed_series(ctx, ToolSide::kGuest, opts, n, out["figures"]));
  }

  HostBaselineDecision d = decide_host_baseline(t, kSuiteCrypto);
  if (d.run) {
    auto hv = openssl_version(ctx, ToolSide::kHost);
    d = versions_comparable("openssl", *version, hv.is_ok() ? *hv : "");
  }
  if (!d.run) {
    out["host"] = baseline_unavailable(d.reason);
    out["guest_host_ratio"] = baseline_unavailable(d.reason);
    return Status::ok();
  }
  json host{{"available", true},
            {"openssl_version", *version},
            {"figures", json::array()},
            {"cpus", t.cpus}};
  for (int n : processes) {
    Status s = speed_series(ctx, ToolSide::kHost, opts, n, host["figures"]);
    if (!s.is_ok()) {
      out["host"] = baseline_unavailable("the host run failed: " + s.message());
      out["guest_host_ratio"] = out["host"];
      return Status::ok();
    }
  }
  out["guest_host_ratio"] = guest_host_ratios(out["figures"], host["figures"]);
  out["host"] = std::move(host);
  return Status::ok();
}

}  // namespace armhive
