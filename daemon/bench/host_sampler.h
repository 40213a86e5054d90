#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/thread_annotations.h"

namespace armhive {

// Host-side samplers for a benchmark run: the per-core CPU split from /proc/stat while the
// run lasts, and temperature sensors before and after. The file roots are injectable so tests
// use fake trees (tests/fixtures/bench/proc*, sys*).

// Cumulative jiffies of one CPU line of /proc/stat.
struct ProcCpuTimes {
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  uint64_t total() const { return user + nice + system + idle + iowait + irq + softirq + steal; }
};

// Per-core lines ("cpuN") of PROC_ROOT/stat, keyed by N.
Result<std::map<int, ProcCpuTimes>> read_proc_stat(const std::string& proc_root);
// The same from the file's text; `path` names it in errors. Pure.
Result<std::map<int, ProcCpuTimes>> parse_proc_stat(std::string_view text, const std::string& path);

// Percentages of one core between two snapshots; they sum to 100 (user includes nice,
// idle includes iowait, other is steal). All zero with `ticks` 0 when no time passed.
struct CoreCpuSplit {
  int cpu = 0;
  double user = 0, system = 0, irq = 0, softirq = 0, idle = 0, other = 0;
  uint64_t ticks = 0;
};
std::vector<CoreCpuSplit> cpu_split(const std::map<int, ProcCpuTimes>& before,
                                    const std::map<int, ProcCpuTimes>& after);

struct HostCpuUsage {
  std::vector<CoreCpuSplit> cores;                 // over the whole sampled span
  std::vector<std::vector<CoreCpuSplit>> periods;  // one entry per sampling period, in order
  double period_s = 0;
};

// Samples PROC_ROOT/stat every `period` on a background thread between start() and stop().
// One owner thread calls start/stop; the destructor stops and joins.
class CpuSampler {
 public:
  explicit CpuSampler(std::string proc_root = "/proc",
                      std::chrono::milliseconds period = std::chrono::seconds(1));
  ~CpuSampler();
  CpuSampler(const CpuSampler&) = delete;
  CpuSampler& operator=(const CpuSampler&) = delete;

  // Takes the first snapshot (error if PROC_ROOT/stat is unreadable) and starts the thread.
  Status start();
  // Takes the last snapshot, joins the thread and returns the split.
  Result<HostCpuUsage> stop();

 private:
  void loop();
  void take_snapshot();

  std::string proc_root_;
  std::chrono::milliseconds period_;
  Mutex mu_;
  std::condition_variable_any cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::map<int, ProcCpuTimes>> snapshots_ GUARDED_BY(mu_);
  std::thread thread_;
};

// A temperature sensor reading. `celsius` is absent when the sensor exists but could not be
// read (many thermal zones return EIO/ENODATA); a missing sensor is simply not listed.
struct TempSensorReading {
  std::string id;     // "thermal_zone0", "hwmon1/temp2"
  std::string label;  // thermal zone type, or hwmon name + temp label
  std::optional<double> celsius;
  std::string error;
};

// SYS_ROOT/class/thermal/thermal_zone*/temp and SYS_ROOT/class/hwmon/*/temp*_input, sorted by
// id. Empty when the host exposes no sensors (VMs, containers).
std::vector<TempSensorReading> read_sensors(const std::string& sys_root);

}  // namespace armhive
