#include "daemon/bench/host_sampler.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "base/bounded_number.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> read_first_line(const fs::path& path, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    if (error) *error = "cannot open " + path.string();
    return std::nullopt;
  }
  std::string line;
  if (!std::getline(in, line)) {
    if (error) *error = "cannot read " + path.string();
    return std::nullopt;
  }
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

std::optional<double> parse_millidegrees(const std::string& text) {
  try {
    size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used == 0) return std::nullopt;
    return static_cast<double>(v) / 1000.0;
  } catch (...) {
    return std::nullopt;
  }
}

TempSensorReading read_temp(std::string id, std::string label, const fs::path& path) {
  TempSensorReading r{std::move(id), std::move(label), std::nullopt, {}};
  std::string error;
  auto line = read_first_line(path, &error);
  if (!line) {
    r.error = error;
  } else if (auto c = parse_millidegrees(*line)) {
    r.celsius = *c;
  } else {
    r.error = "not a temperature: \"" + line->substr(0, 32) + "\"";
  }
  return r;
}

std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Result<std::map<int, ProcCpuTimes>> parse_proc_stat(std::string_view text,
                                                    const std::string& path) {
  std::map<int, ProcCpuTimes> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] < '0' || line[3] > '9') {
      continue;
    }
    // Fields are decimal jiffies; a sign, garbage or a value past 2^56 (millions of years at
    // 100 Hz) is a corrupt line: the sums below could otherwise wrap.
    std::istringstream words(line.substr(3));
    std::vector<std::string> f;
    for (std::string w; words >> w && f.size() < 9;) f.push_back(w);
    auto bad = [&] {
      return unavailable("malformed line in " + path + ": " + line.substr(0, 200), path);
    };
    if (f.size() < 8) return bad();
    auto id = parse_bounded_uint(f[0], 0, 65535, "cpu");
    if (!id.is_ok()) return bad();
    int cpu = static_cast<int>(*id);
    ProcCpuTimes t;
    uint64_t* slots[] = {&t.user,   &t.nice, &t.system,  &t.idle,
                         &t.iowait, &t.irq,  &t.softirq, &t.steal};
    for (size_t i = 1; i < f.size(); ++i) {
      auto v = parse_bounded_uint(f[i], 0, uint64_t{1} << 56, "jiffies");
      if (!v.is_ok()) return bad();
      *slots[i - 1] = *v;
    }
    out[cpu] = t;
  }
  if (out.empty()) return unavailable("no per-CPU lines in " + path, path);
  return out;
}

Result<std::map<int, ProcCpuTimes>> read_proc_stat(const std::string& proc_root) {
  std::string path = proc_root + "/stat";
  std::ifstream in(path);
  if (!in) return unavailable("cannot open " + path, path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_proc_stat(text.str(), path);
}

std::vector<CoreCpuSplit> cpu_split(const std::map<int, ProcCpuTimes>& before,
                                    const std::map<int, ProcCpuTimes>& after) {
  std::vector<CoreCpuSplit> out;
  for (const auto& [cpu, a] : after) {
    auto it = before.find(cpu);
    if (it == before.end()) continue;  // CPU came online mid-run: no baseline
    const ProcCpuTimes& b = it->second;
    auto d = [](uint64_t x, uint64_t y) { return x >= y ? x - y : 0; };
    uint64_t user = d(a.user, b.user) + d(a.nice, b.nice);
    uint64_t system = d(a.system, b.system);
    uint64_t idle = d(a.idle, b.idle) + d(a.iowait, b.iowait);
    uint64_t irq = d(a.irq, b.irq);
    uint64_t softirq = d(a.softirq, b.softirq);
    uint64_t other = d(a.steal, b.steal);
    uint64_t total = user + system + idle + irq + softirq + other;
    CoreCpuSplit s;
    s.cpu = cpu;
    s.ticks = total;
    if (total > 0) {
      double t = static_cast<double>(total);
      s.user = 100.0 * static_cast<double>(user) / t;
      s.system = 100.0 * static_cast<double>(system) / t;
      s.idle = 100.0 * static_cast<double>(idle) / t;
      s.irq = 100.0 * static_cast<double>(irq) / t;
      s.softirq = 100.0 * static_cast<double>(softirq) / t;
      s.other = 100.0 * static_cast<double>(other) / t;
    }
    out.push_back(s);
  }
  return out;
}

CpuSampler::CpuSampler(std::string proc_root, std::chrono::milliseconds period)
    : proc_root_(std::move(proc_root)), period_(period) {}

CpuSampler::~CpuSampler() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CpuSampler::take_snapshot() {
  auto snap = read_proc_stat(proc_root_);
  if (!snap.is_ok()) return;  // a transient read failure loses one period, not the run
  MutexLock lock(mu_);
  snapshots_.push_back(std::move(snap).value());
}

Status CpuSampler::start() {
  auto first = read_proc_stat(proc_root_);
  if (!first.is_ok()) return first.status().annotate("host CPU sampler");
  {
    MutexLock lock(mu_);
    snapshots_.clear();
    snapshots_.push_back(std::move(first).value());
    stopping_ = false;
  }
  thread_ = std::thread([this] { loop(); });
  return Status::ok();
}

void CpuSampler::loop() {
  MutexLock lock(mu_);
  while (!stopping_) {
    if (cv_.wait_for(lock, period_, [this]() REQUIRES(mu_) { return stopping_; })) break;
    lock.unlock();
    take_snapshot();
    lock.lock();
  }
}

Result<HostCpuUsage> CpuSampler::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  take_snapshot();
  MutexLock lock(mu_);
  if (snapshots_.size() < 2) return unavailable("host CPU sampler has fewer than two snapshots");
  HostCpuUsage usage;
  usage.period_s = std::chrono::duration<double>(period_).count();
  usage.cores = cpu_split(snapshots_.front(), snapshots_.back());
  for (size_t i = 1; i < snapshots_.size(); ++i) {
    usage.periods.push_back(cpu_split(snapshots_[i - 1], snapshots_[i]));
  }
  return usage;
}

std::vector<TempSensorReading> read_sensors(const std::string& sys_root) {
  std::vector<TempSensorReading> out;
  fs::path thermal = fs::path(sys_root) / "class" / "thermal";
  for (const auto& zone : sorted_entries(thermal)) {
    std::string name = zone.filename().string();
    if (name.rfind("thermal_zone", 0) != 0) continue;
    std::error_code ec;
    if (!fs::exists(zone / "temp", ec)) continue;
    std::string type = read_first_line(zone / "type", nullptr).value_or(name);
    out.push_back(read_temp(name, type, zone / "temp"));
  }
  fs::path hwmon = fs::path(sys_root) / "class" / "hwmon";
  for (const auto& dev : sorted_entries(hwmon)) {
    std::string dev_name = dev.filename().string();
    std::string chip = read_first_line(dev / "name", nullptr).value_or(dev_name);
    for (const auto& file : sorted_entries(dev)) {
      std::string f = file.filename().string();
      const std::string suffix = "_input";
      if (f.rfind("temp", 0) != 0 || f.size() <= suffix.size() ||
          f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0) {
        continue;
      }
      std::string base = f.substr(0, f.size() - suffix.size());  // "temp1"
      std::string label = chip;
      if (auto l = read_first_line(dev / (base + "_label"), nullptr)) label += " " + *l;
      out.push_back(read_temp(dev_name + "/" + base, label, file));
    }
  }
  return out;
}

}  // namespace armhive
