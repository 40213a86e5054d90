#include <filesystem>
#include <map>

#include "daemon/bench/disk_backing.h"
#include "daemon/bench/fio_parser.h"
#include "daemon/bench/host_baseline.h"
#include "daemon/bench/machine_suites.h"
#include "daemon/bench/suite_figures.h"
#include "daemon/bench/tool_runner.h"

namespace armhive {
namespace {

using nlohmann::json;

struct FioJob {
  const char* name;  // the fio --name and the figure variant
  const char* rw;
  bool sequential;
};
constexpr FioJob kJobs[] = {
    {"seq_write", "write", true}, {"seq_read", "read", true}, {"rand_read_4k", "randread", false}};

std::vector<std::string> fio_argv(const StorageOptions& o, const FioJob& job,
                                  const std::string& file) {
  std::vector<std::string> argv = {"fio",
                                   std::string("--name=") + job.name,
                                   "--filename=" + file,
                                   "--size=" + std::to_string(o.file_mib) + "M",
                                   std::string("--rw=") + job.rw,
                                   "--direct=1",
                                   "--ioengine=libaio",
                                   "--iodepth=" + std::to_string(o.queue_depth),
                                   "--output-format=json"};
  if (job.sequential) {
    argv.push_back("--bs=" + std::to_string(o.block_kib) + "k");
    if (std::string_view(job.rw) == "write") argv.push_back("--end_fsync=1");
  } else {
    argv.insert(argv.end(),
                {"--bs=4k", "--runtime=" + std::to_string(o.random_seconds), "--time_based=1"});
  }
  return argv;
}

Status fio_series(const SuiteContext& ctx, ToolSide side, const StorageOptions& o,
                  const std::string& file, json& figures, std::string& version) {
  std::map<std::string, std::vector<double>> samples;
  // Writing file_mib at a few MB/s under TCG plus fio's own start-up.
  const auto timeout = std::chrono::seconds(o.random_seconds + 60 + o.file_mib);
  for (int i = 0; i < o.repeats; ++i) {
    for (const auto& job : kJobs) {
      const std::string what = std::string("fio ") + job.name;
      ARMHIVE_ASSIGN_OR_RETURN(ToolOutput out,
                               run_tool(ctx, side, what, fio_argv(o, job, file), timeout));
      auto r = parse_fio_json(out.out);
      if (!r.is_ok()) {
        std::string err = out.err.substr(0, 300);
        return Status(r.status().code(), r.status().message() + (err.empty() ? "" : ": " + err))
            .annotate(std::string(side_name(side)) + " " + what + " (repeat " +
                      std::to_string(i + 1) + ")");
      }
      if (out.exit_code != 0) {
        return unavailable(std::string(side_name(side)) + " " + what + " exited with " +
                           std::to_string(out.exit_code) + ": " + out.err.substr(0, 300));
      }
      version = r->version;
      const FioJobResult& j = r->jobs.front();
      if (job.sequential) {
        samples[std::string(job.name) + ".mb_s"].push_back(j.bw_bytes_per_s / 1e6);
      } else {
        samples[std::string(job.name) + ".iops"].push_back(j.iops);
        samples[std::string(job.name) + ".lat_us"].push_back(j.lat_mean_us);
      }
    }
  }
  const std::string seq_group = "sequential, " + std::to_string(o.block_kib) + " KiB blocks, QD " +
                                std::to_string(o.queue_depth);
  const std::string rnd_group = "4 KiB random read, QD " + std::to_string(o.queue_depth);
  const std::string side_s = side_name(side);
  figures.push_back(figure_json(
      {"storage", side_s, "seq_write", "mb_s", "sequential write MB/s", seq_group, "write", "MB/s"},
      samples["seq_write.mb_s"]));
  figures.push_back(figure_json(
      {"storage", side_s, "seq_read", "mb_s", "sequential read MB/s", seq_group, "read", "MB/s"},
      samples["seq_read.mb_s"]));
  figures.push_back(figure_json({"storage", side_s, "rand_read_4k", "iops",
                                 "4 KiB random read IOPS", rnd_group, "IOPS", "IOPS"},
                                samples["rand_read_4k.iops"]));
  figures.push_back(figure_json({.suite = "storage",
                                 .side = side_s,
                                 .variant = "rand_read_4k",
                                 .figure = "lat_us",
                                 .label = "4 KiB random read mean latency",
                                 .group = rnd_group + " latency",
                                 .name = "mean latency",
                                 .unit = "\xC2\xB5s",
                                 .higher_is_better = false},
                                samples["rand_read_4k.lat_us"]));
  return Status::ok();
}

}  // namespace

Status run_storage_suite(const SuiteContext& ctx, const StorageOptions& opts, json& out) {
  const LeaseTarget& t = ctx.target;
  const std::string file = t.guest_disk_dir + "/armhive-fio-" + ctx.run_id + ".dat";
  out = {{"settings",
          {{"file", file},
           {"file_mib", opts.file_mib},
           {"block_kib", opts.block_kib},
           {"random_block_kib", 4},
           {"queue_depth", opts.queue_depth},
           {"random_seconds", opts.random_seconds},
           {"repeats", opts.repeats},
           {"ioengine", "libaio"},
           {"direct", true},
           {"unit_note", "MB/s = 10^6 bytes/s; latency is fio's mean completion+submission"}}},
         {"figures", json::array()}};
  json backing = host_disk_backing(t);
  out["settings"]["backing"] = backing;

  // From here the test file may exist: every return passes through the guard.
  struct FileGuard {
    const SuiteContext& ctx;
    const std::string& file;
    ~FileGuard() {
      (void)ctx.agent.exec(ctx.target.vm_name, {.argv = {"rm", "-f", file},
                                                .timeout = ctx.options.guest_command_timeout});
    }
  } guard{ctx, file};

  auto mounts = run_tool_checked(ctx, ToolSide::kGuest, "reading /proc/mounts",
                                 {"cat", "/proc/mounts"}, ctx.options.guest_command_timeout);
  if (!mounts.is_ok()) return mounts.status();
  if (auto m = guest_mount_for(mounts->out, t.guest_disk_dir)) {
    out["settings"]["backing"]["guest_device"] = m->device;
    out["settings"]["backing"]["guest_filesystem"] = m->fs_type;
    out["settings"]["backing"]["guest_mount"] = m->mount_point;
  }
  auto v = run_tool_checked(ctx, ToolSide::kGuest, "fio --version", {"fio", "--version"},
                            ctx.options.guest_command_timeout);
  if (!v.is_ok()) return v.status();
  std::string version = v->out.substr(0, v->out.find('\n'));
  out["fio_version"] = version;
  std::string parsed_version;
  ARMHIVE_RETURN_IF_ERROR(
      fio_series(ctx, ToolSide::kGuest, opts, file, out["figures"], parsed_version));

  HostBaselineDecision d = decide_host_baseline(t, kSuiteStorage);
  if (d.run) {
    auto hv = run_tool(ctx, ToolSide::kHost, "fio --version", {"fio", "--version"},
                       ctx.options.guest_command_timeout);
    std::string host_version =
        hv.is_ok() && hv->exit_code == 0 ? hv->out.substr(0, hv->out.find('\n')) : "";
    d = versions_comparable("fio", version, host_version);
  }
  if (!d.run) {
    out["host"] = baseline_unavailable(d.reason);
    out["guest_host_ratio"] = baseline_unavailable(d.reason);
    return Status::ok();
  }
  const std::string host_file = t.host_scratch_dir + "/armhive-fio-" + ctx.run_id + ".dat";
  json host{{"available", true},
            {"fio_version", version},
            {"file", host_file},
            {"figures", json::array()},
            {"cpus", t.cpus}};
  std::string ignored;
  Status s = fio_series(ctx, ToolSide::kHost, opts, host_file, host["figures"], ignored);
  std::error_code ec;
  std::filesystem::remove(host_file, ec);
  if (!s.is_ok()) {
    out["host"] = baseline_unavailable("the host run failed: " + s.message());
    out["guest_host_ratio"] = out["host"];
    return Status::ok();
  }
  out["guest_host_ratio"] = guest_host_ratios(out["figures"], host["figures"]);
  out["host"] = std::move(host);
  return Status::ok();
}

}  // namespace armhive
