// End-to-end: a real armhived whose pool runs a compression health benchmark every 10 s on a
// fresh tiny VM. The first five runs build the host's band; then the test throttles the pool's
// VM through libvirt (a CFS quota on its vCPUs, what <cputune> period/quota sets) and the next
// run falls below the band: the host is degraded on /v1/hosts naming the figure and the band,
// the event stream has host.degraded, and the trend page and SVG show the red point. Inside the
// sandbox's network namespace only.
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <signal.h>
#include <sys/mount.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/process_runner.h"
#include "base/url_encode.h"
#include "daemon/virt/connection.h"
#include "daemon/virt/error.h"
#include "daemon/virt/event_loop.h"
#include "tests/support/daemon_process.h"
#include "tests/support/e2e_daemon.h"
#include "tests/support/xml_count.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

constexpr int kPort = 18510;
constexpr const char* kFigure = "compression.guest.t1.compress_mb_s";
// 10 % of one CPU per vCPU: a zstd figure at most a tenth of an unloaded run's (≤ 3.5 MB/s),
// below the band's low end even on the widest band seen (12–34 MB/s, median 21.4, MAD 7.7:
// low 6.0). A tighter quota only makes the throttled run longer (at 5 % it took 145 s).
constexpr unsigned long long kPeriodUs = 100000;
constexpr long long kQuotaUs = 10000;

std::vector<EventDto> events(Client& api) {
  std::vector<EventDto> out;
  (void)api.stream_events(0, false, [&](const EventDto& e) {
    out.push_back(e);
    return true;
  });
  return out;
}

int count_events(Client& api, const std::string& type) {
  int n = 0;
  for (const EventDto& e : events(api))
    if (e.type == type && e.pool == "ci") ++n;
  return n;
}

// A cpu cgroup (v1) of the test's own with the same CFS quota, for a libvirtd without a cgroup
// backend (this sandbox: "cgroup CPU controller is not mounted"): the QEMU process's vCPU
// threads ("CPU 0/TCG", "CPU 0/KVM") move into it. Removed by the destructor (its threads
// are gone by then: the VMs were destroyed).
class CpuQuotaCgroup {
 public:
  // `ip netns exec` gives the test a fresh /sys without cgroup mounts: the cpu hierarchy is
  // mounted again in the test's own mount namespace (gone with the process).
  CpuQuotaCgroup() {
    std::string root = "/sys/fs/cgroup/cpu";
    if (!std::filesystem::exists(root + "/cpu.cfs_quota_us")) {
      root = e2e_state() + "/health-cpu-cgroup";
      std::error_code ec;
      std::filesystem::create_directories(root, ec);
      if (!std::filesystem::exists(root + "/cpu.cfs_quota_us"))
        (void)::mount("cgroup", root.c_str(), "cgroup", 0, "cpu");
    }
    dir_ = root + "/armhive-health-e2e";
  }
  ~CpuQuotaCgroup() {
    std::error_code ec;
    std::filesystem::remove(dir_, ec);  // rmdir: only an empty cgroup goes
  }
  bool add_vcpus(pid_t qemu, std::string& why) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (!write(dir_ + "/cpu.cfs_period_us", std::to_string(kPeriodUs)) ||
        !write(dir_ + "/cpu.cfs_quota_us", std::to_string(kQuotaUs))) {
      why += "; no cgroup v1 cpu controller at " + dir_;
      return false;
    }
    int moved = 0;
    for (const auto& task :
         std::filesystem::directory_iterator("/proc/" + std::to_string(qemu) + "/task", ec)) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      std::getline(comm, name);
      if (name.rfind("CPU ", 0) != 0) continue;
      if (write(dir_ + "/tasks", task.path().filename().string())) ++moved;
    }
    if (moved == 0) why += "; no vCPU thread of QEMU " + std::to_string(qemu) + " moved";
    return moved > 0;
  }

 private:
  static bool write(const std::string& path, const std::string& value) {
    std::ofstream f(path);
    f << value;
    f.flush();
    return static_cast<bool>(f);
  }
  std::string dir_;
};

// The vCPUs of a running domain get a CFS quota through the libvirt C API (live only, what a
// <cputune><period/><quota/> gives a persistent domain); where libvirtd has no cgroup backend,
// the same quota through the test's own cgroup. False if it is not running (any more).
bool throttle(Connection& conn, CpuQuotaCgroup& fallback, const std::string& vm, std::string& why) {
  auto dom = conn.lookup_domain(vm);
  if (!dom.is_ok() || virDomainIsActive(dom->get()) != 1) return false;
  virTypedParameterPtr params = nullptr;
  int n = 0;
  int max = 0;
  virTypedParamsAddULLong(&params, &n, &max, VIR_DOMAIN_SCHEDULER_VCPU_PERIOD, kPeriodUs);
  virTypedParamsAddLLong(&params, &n, &max, VIR_DOMAIN_SCHEDULER_VCPU_QUOTA, kQuotaUs);
  int rc = virDomainSetSchedulerParametersFlags(dom->get(), params, n, VIR_DOMAIN_AFFECT_LIVE);
  virTypedParamsFree(params, n);
  if (rc != 0) {
    virErrorPtr e = virGetLastError();
    why =
        "virDomainSetSchedulerParametersFlags(" + vm + "): " + (e && e->message ? e->message : "?");
    pid_t qemu = qemu_pid(vm);
    return qemu > 0 && fallback.add_vcpus(qemu, why);
  }
  return true;
}

// GET path with the admin token (the pages and the SVG are not in the typed client).
std::string get(const DaemonProcess& daemon, const std::string& path) {
  SubprocessRunner run;
  auto r = run.run(
      {.argv = {"curl", "-sf", "--max-time", "30", "-H", "Authorization: Bearer " + daemon.token(),
                "http://127.0.0.1:" + std::to_string(kPort) + path}});
  REQUIRE(r.is_ok());
  INFO(path << ": " << r->err);
  REQUIRE(r->ok());
  return r->out;
}

TEST_CASE("a health schedule marks a throttled host degraded", "[health-e2e]") {
  const std::string state = e2e_state() + "/health-throttle";
  // Every 10 s (the engine's minimum this test sets; real configs keep the 1 h default): the
  // next run begins 10 s after one ends, or as soon after as the refilled VM is warm, so the
  // six runs cost their boots and suites, not a timer (issue 30). A band of the last 5 results,
  // the single-threaded zstd figure. band_mads = 2: on this shared 2-core
  // machine unthrottled TCG runs spread widely (a first try saw 12-34 MB/s, MAD 7.7 around
  // 21.4), and median - 3 MAD fell below zero, where no slowdown can be seen.
  DaemonProcess daemon(state, e2e_state() + "/images", kPort,
                       one_core_pool_toml(1) +
                           "\n[pools.health]\nevery = \"10s\"\nsuite = \"compression\"\n"
                           "runs_kept = 5\nband_mads = 2\n");
  daemon.set_engine_keys("min_health_interval = \"10s\"\n");
  REQUIRE(daemon.start().is_ok());
  auto api = daemon.client();
  REQUIRE(api);
  // The libvirt client answers keepalives only while an event loop runs; without one libvirtd
  // drops the idle connection and the next call dies of SIGPIPE.
  REQUIRE(init_libvirt().is_ok());
  auto loop = EventLoop::start();
  REQUIRE(loop.is_ok());
  auto conn = Connection::open("qemu:///system");
  REQUIRE(conn.is_ok());

  // 1. Five unthrottled runs: no verdict yet, then the band exists.
  bool five = eventually([&] { return count_events(*api, "health.result") >= 5; }, 600s, 2s);
  INFO(daemon.log());
  REQUIRE(five);
  {
    auto hosts = api->hosts();
    REQUIRE(hosts.is_ok());
    REQUIRE(hosts->size() == 1);
    CHECK(hosts->at(0).state == "ok");
    REQUIRE(hosts->at(0).health.size() == 1);
    CHECK(hosts->at(0).health[0].figure == kFigure);
    CHECK(hosts->at(0).health[0].verdict != "degraded");
  }
  CHECK(count_events(*api, "host.degraded") == 0);

  // 2. Throttle the pool's VM once it is booted (warm, or already leased by the health run):
  // never while it boots, so the boot is not what gets slow. A run that took an unthrottled VM
  // just joins the band; the next one is throttled.
  std::set<std::string> throttled;
  std::string why;
  CpuQuotaCgroup fallback;
  bool degraded = eventually(
      [&] {
        auto hosts = api->hosts();
        if (hosts.is_ok() && !hosts->empty() && hosts->at(0).state == "degraded") return true;
        auto pools = api->pools();
        if (!pools.is_ok() || pools->empty()) return false;
        const PoolDto& p = pools->at(0);
        if (p.starting == 0 && (p.warm == 1 || p.leased == 1)) {
          for (const std::string& vm : vm_files(state)) {
            if (!throttled.contains(vm) && throttle(*conn, fallback, vm, why)) throttled.insert(vm);
          }
        }
        return false;
      },
      600s, 500ms);
  INFO("throttle: " << why);
  INFO(daemon.log());
  REQUIRE_FALSE(throttled.empty());
  REQUIRE(degraded);

  // 3. What a user checks. /v1/hosts: the host is degraded, naming the figure and the band.
  auto hosts = api->hosts();
  REQUIRE(hosts.is_ok());
  const HostDto& host = hosts->at(0);
  CHECK(host.state == "degraded");
  REQUIRE(host.health.size() == 1);
  const HealthResultDto& r = host.health[0];
  CHECK(r.pool == "ci");
  CHECK(r.figure == kFigure);
  CHECK(r.verdict == "degraded");
  REQUIRE(r.band.has_value());
  CHECK(r.band->n == 5);
  CHECK(r.value < r.band->low);
  CHECK(r.reason.find(kFigure) != std::string::npos);
  CHECK(r.reason.find("outside its band") != std::string::npos);
  // It is the throttled VM's run that fell out, not noise on an unthrottled one.
  auto run = api->get_benchmark(r.run_id);
  REQUIRE(run.is_ok());
  CHECK(throttled.contains(run->vm_name));

  // The event stream (admin token: pool events have no owner).
  std::string degraded_detail;
  for (const EventDto& e : events(*api))
    if (e.type == "host.degraded" && e.pool == "ci") degraded_detail = e.detail;
  INFO(degraded_detail);
  CHECK(degraded_detail.find("host " + host.hostname) != std::string::npos);
  CHECK(degraded_detail.find(kFigure) != std::string::npos);
  CHECK(degraded_detail.find("outside its band") != std::string::npos);

  // The trend page and the SVG show the degraded point; /ui/hosts lists the result.
  const std::string base = "/ui/hosts/" + url_encode(host.hostname) + "/health?pool=ci";
  std::string page = get(daemon, base);
  CHECK(page.find("class=\"degraded\"") != std::string::npos);
  CHECK(page.find(r.run_id) != std::string::npos);
  std::string svg = get(daemon, "/v1/hosts/" + url_encode(host.hostname) + "/health.svg?pool=ci");
  CHECK(xml_count(svg, "//s:circle[@class='degraded']") >= 1);
  CHECK(xml_count(svg, "//s:circle[@class='result']") >= 5);
  std::string hosts_page = get(daemon, "/ui/hosts");
  CHECK(hosts_page.find("degraded") != std::string::npos);
  CHECK(hosts_page.find("/ui/hosts/" + host.hostname + "/health?pool=ci") != std::string::npos);

  // No health lease is left behind once the run is recorded.
  CHECK(eventually(
      [&] {
        auto leases = api->list_leases({});
        if (!leases.is_ok()) return false;
        for (const LeaseDto& l : leases->items)
          if (l.state == "ready" || l.state == "provisioning") return false;
        return true;
      },
      60s));

  daemon.kill(SIGTERM);
  // The warm VM the daemon left for its next start: this test's, so it goes too.
  for (const std::string& vm : vm_files(state)) {
    if (auto dom = conn->lookup_domain(vm); dom.is_ok()) (void)virDomainDestroy(dom->get());
  }
  if (virStoragePoolPtr p = virStoragePoolLookupByName(
          conn->get()->get(), ("armhive-e2e-" + std::to_string(kPort)).c_str())) {
    (void)virStoragePoolDestroy(p);
    virStoragePoolFree(p);
  }
}

}  // namespace
}  // namespace armhive
