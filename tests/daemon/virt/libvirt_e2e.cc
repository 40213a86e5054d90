// End-to-end: a real aarch64 guest under the sandboxed libvirtd (scripts/libvirt-sandbox; this
// process already runs inside its network namespace), booted from the tiny image catalogue.
#include <libvirt/libvirt.h>
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/process_runner.h"
#include "daemon/virt/dhcp_reservation.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "daemon/virt/network.h"
#include "daemon/virt/xml.h"
#include "tests/support/e2e_guest.h"
#include "tests/support/files.h"

namespace armhive {
namespace {

// This test's entries of a listing: the sandbox's libvirtd is shared by the e2e stages, and an
// armhived that stops leaves its VMs running by design (the next start adopts them), so other
// stages' domains may be listed too.
std::vector<VmInfo> only(const std::vector<VmInfo>& all, const std::string& name) {
  std::vector<VmInfo> out;
  for (const VmInfo& v : all) {
    if (v.name == name) out.push_back(v);
  }
  return out;
}

// Whether `name` still has files or an address reservation (reservations are per libvirt
// network, and other stages' VMs may hold some on theirs, so only this VM's are asked about).
bool has_vm_files(LibvirtHypervisor& hv, const std::string& name) {
  auto left = hv.list_vm_files();
  REQUIRE(left.is_ok());
  return std::find(left->begin(), left->end(), name) != left->end();
}

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// "Cpus_allowed_list:\t0-1" of /proc/PID/task/TID/status.
std::vector<int> allowed_cpus(const fs::path& task) {
  std::istringstream in(read_file(task / "status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      auto l = detail::parse_cpu_list(line.substr(line.find(':') + 1));
      return l.is_ok() ? *l : std::vector<int>{};
    }
  }
  return {};
}

struct TinyImage {
  std::string kernel, initrd, disk, cmdline, login_user;
};

TinyImage load_tiny_image() {
  Image image = e2e_tiny_image();
  return {image.kernel.path, image.initrd.path, image.disk.path, image.cmdline, image.login_user};
}

bool console_shows_userspace(const std::string& log) {
  for (const char* marker :
       {"armhive: boot done", "armhive-initramfs: root mounted", "armhive-guest: userspace up"}) {
    if (log.find(marker) != std::string::npos) return true;
  }
  return false;
}

TEST_CASE(
    "a real aarch64 guest boots to userspace, pinned as its domain says, and leaves "
    "nothing behind",
    "[virt][e2e]") {
  TinyImage img = load_tiny_image();
  const bool expect_agent = env_or("ARMHIVE_VIRT_E2E_NO_AGENT", "") != "1";

  fs::path state =
      fs::path(env_or("ARMHIVE_E2E_STATE", fs::temp_directory_path().string())) / "virt-e2e";
  E2eHypervisor e2e = open_e2e_hypervisor(env_or("ARMHIVE_VIRT_E2E_URI", "qemu:///system"), state,
                                          "armhive-virt-e2e", std::nullopt);
  const HostTopology& host = e2e.host;
  std::unique_ptr<LibvirtHypervisor>& hv = e2e.hv;
  REQUIRE_FALSE(host.cpus.empty());

  std::mutex mu;
  std::condition_variable cv;
  std::vector<VmEvent> events;
  hv->set_event_handler([&](const VmEvent& e) {
    std::lock_guard lock(mu);
    events.push_back(e);
    cv.notify_all();
  });
  auto saw = [&](const std::string& name, VmEventKind kind) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), [&] {
      for (const auto& e : events) {
        if (e.name == name && e.kind == kind) return true;
      }
      return false;
    });
  };

  NetworkSpec net{"armhive-virt-e2e", "ahvirte2e0",   "10.231.7.1/24",
                  "10.231.7.10",      "10.231.7.100", 1500};
  REQUIRE(ensure_network(hv->connection(), net).is_ok());
  REQUIRE(ensure_network(hv->connection(), net).is_ok());  // idempotent

  const int last_cpu = host.cpus.back().id;
  VmSpec spec;
  spec.name = "armhive-virt-e2e-1";
  spec.vm_id = "vm-virt-e2e-1";
  spec.pool = "e2e <pool> & 'quotes'";
  spec.base_disk = img.disk;
  spec.kernel = img.kernel;
  spec.initrd = img.initrd;
  spec.cmdline = img.cmdline + " armhive.hostname=virt-e2e";
  spec.vcpus = 2;
  spec.memory_mib = 512;
  spec.network = net.name;
  spec.vcpu_pins = {last_cpu, host.cpus.front().id};
  spec.emulator_cpus = {host.cpus.front().id};
  spec.labels = {{"test", "virt-e2e"}};

  const auto t0 = Clock::now();
  Status created = hv->create_vm(spec);
  INFO(created.to_string());
  REQUIRE(created.is_ok());
  CHECK(saw(spec.name, VmEventKind::kStarted));
  // Its address was reserved before boot: known at once, not after the guest's DHCP.
  auto reserved = hv->guest_address(spec.name);
  INFO(reserved.status().to_string());
  REQUIRE(reserved.is_ok());
  CHECK(reserved->rfind("10.231.7.", 0) == 0);
  auto entry = find_dhcp_host(hv->connection(), net.name, spec.name);
  REQUIRE(entry.is_ok());
  REQUIRE(entry->has_value());
  CHECK((*entry)->ip == *reserved);

  // Userspace: the agent answers, or (images without an agent) the console shows init running.
  bool agent_ok = false;
  bool userspace = false;
  std::string log;
  const auto deadline = Clock::now() + std::chrono::seconds(180);
  while (Clock::now() < deadline) {
    log = hv->console_log(spec.name, 1 << 20).value_or("");
    if (console_shows_userspace(log)) userspace = true;
    if (expect_agent) {
      agent_ok = hv->ping_agent(spec.name, std::chrono::seconds(2)).is_ok();
      if (agent_ok) break;
    } else if (userspace) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const double boot_s = std::chrono::duration<double>(Clock::now() - t0).count();
  INFO("console log tail:\n" << (log.size() > 3000 ? log.substr(log.size() - 3000) : log));
  CHECK_FALSE(log.empty());  // the serial console reaches its log file
  CHECK((userspace || agent_ok));
  if (expect_agent) {
    REQUIRE(agent_ok);
    auto uname =
        hv->exec(spec.name, GuestExecRequest{{"/bin/uname", "-m"}, "", std::chrono::seconds(30)});
    REQUIRE(uname.is_ok());
    CHECK(uname->exit_code == 0);
    CHECK(uname->out == "aarch64\n");

    // The DHCP lease of the isolated network (or the agent) gives an address inside it.
    Result<std::string> addr = Status(ErrorCode::kUnavailable, "not yet");
    for (int i = 0; i < 60 && !addr.is_ok(); ++i) {
      addr = hv->guest_address(spec.name);
      if (!addr.is_ok()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    INFO(addr.status().to_string());
    REQUIRE(addr.is_ok());
    CHECK(addr->rfind("10.231.7.", 0) == 0);
    CHECK(*addr == *reserved);
    // The guest really configures the reserved address (its DHCP exchange gets that one).
    std::string ip_out;
    for (int i = 0; i < 60 && ip_out.find(*reserved + "/") == std::string::npos; ++i) {
      auto ip = hv->exec(
          spec.name,
          GuestExecRequest{{"/sbin/ip", "-4", "-o", "addr"}, "", std::chrono::seconds(10)});
      if (ip.is_ok()) ip_out = ip->out;
      if (ip_out.find(*reserved + "/") == std::string::npos) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
    }
    INFO("ip -4 -o addr in the guest: " << ip_out);
    CHECK(ip_out.find(*reserved + "/") != std::string::npos);

    // authorized_keys replaced through the agent, read back through guest-exec.
    const std::string key =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIArmhiveVirtE2eKeyOnlyForTests virt-e2e";
    const std::string user = img.login_user.empty() ? "root" : img.login_user;
    Status keys = hv->set_authorized_keys(spec.name, user, {key});
    INFO(keys.to_string());
    REQUIRE(keys.is_ok());
    auto cat = hv->exec(spec.name,
                        GuestExecRequest{{"/bin/cat", (user == "root" ? "/root" : "/home/" + user) +
                                                          "/.ssh/authorized_keys"},
                                         "",
                                         std::chrono::seconds(30)});
    REQUIRE(cat.is_ok());
    CHECK(cat->out.find(key) != std::string::npos);

    // stdin goes in, a process outliving its timeout is reported as timed out.
    auto echo = hv->exec(
        spec.name, GuestExecRequest{{"/bin/cat"}, "hello <&> guest\n", std::chrono::seconds(30)});
    REQUIRE(echo.is_ok());
    CHECK(echo->out == "hello <&> guest\n");
    auto slow =
        hv->exec(spec.name, GuestExecRequest{{"/bin/sleep", "60"}, "", std::chrono::seconds(2)});
    REQUIRE(slow.is_ok());
    CHECK(slow->timed_out);
  }
  std::printf("virt e2e: %s guest reached %s %.1f s after create_vm (accel %s)\n",
              spec.name.c_str(), agent_ok ? "the guest agent" : "userspace", boot_s,
              host.accel == Accel::kKvm ? "kvm" : "tcg");

  // Pinning as the domain says: one QEMU thread per vCPU ("CPU N/TCG" or "CPU N/KVM").
  auto vms = hv->list_vms();
  REQUIRE(vms.is_ok());
  const VmInfo* info = nullptr;
  for (const auto& v : *vms) {
    if (v.name == spec.name) info = &v;
  }
  REQUIRE(info != nullptr);
  CHECK(info->vm_id == spec.vm_id);
  CHECK(info->pool == spec.pool);
  CHECK(info->running);
  CHECK(info->vcpu_pins == spec.vcpu_pins);
  REQUIRE(info->qemu_pid > 0);
  fs::path proc = fs::path("/proc") / std::to_string(info->qemu_pid);
  int vcpu_threads = 0;
  for (const auto& task : fs::directory_iterator(proc / "task")) {
    std::string comm = read_file(task.path() / "comm");
    if (comm.rfind("CPU ", 0) != 0) continue;
    int vcpu = std::atoi(comm.c_str() + 4);
    REQUIRE(vcpu >= 0);
    REQUIRE(vcpu < spec.vcpus);
    INFO("thread " << task.path() << " " << comm);
    CHECK(allowed_cpus(task.path()) == std::vector<int>{spec.vcpu_pins[vcpu]});
    ++vcpu_threads;
  }
  CHECK(vcpu_threads == spec.vcpus);
  CHECK(allowed_cpus(proc / "task" / std::to_string(info->qemu_pid)) == spec.emulator_cpus);

  REQUIRE(hv->set_lease(spec.name, "lease-e2e").is_ok());
  auto after = hv->list_vms();
  REQUIRE(after.is_ok());
  auto mine = only(*after, spec.name);
  REQUIRE(mine.size() == 1);
  CHECK(mine.front().lease_id == "lease-e2e");

  const std::string overlay = hv->paths_for(spec.name).overlay;
  CHECK(fs::exists(overlay));
  REQUIRE(hv->destroy_vm(spec.name).is_ok());
  CHECK(saw(spec.name, VmEventKind::kStopped));
  CHECK(hv->connection().lookup_domain(spec.name).status().code() == ErrorCode::kNotFound);
  CHECK(only(*hv->list_vms(), spec.name).empty());
  CHECK_FALSE(has_vm_files(*hv, spec.name));
  CHECK_FALSE(fs::exists(overlay));
  CHECK_FALSE(fs::exists(proc));
  auto released = find_dhcp_host(hv->connection(), net.name, spec.name);
  REQUIRE(released.is_ok());
  CHECK_FALSE(released->has_value());  // the reservation went with the VM
  CHECK(remove_network(hv->connection(), net.name).is_ok());
  fs::remove_all(state);
}

}  // namespace
}  // namespace armhive

namespace armhive {
namespace {

TEST_CASE("a UEFI guest starts on AAVMF with its own vars file, removed with it",
          "[virt][e2e][uefi]") {
  TinyImage img = load_tiny_image();
  fs::path state =
      fs::path(env_or("ARMHIVE_E2E_STATE", fs::temp_directory_path().string())) / "virt-e2e-uefi";
  NetworkSpec net{"armhive-virt-e2e", "ahvirte2e0",   "10.231.7.1/24",
                  "10.231.7.10",      "10.231.7.100", 1500};
  E2eHypervisor e2e = open_e2e_hypervisor(env_or("ARMHIVE_VIRT_E2E_URI", "qemu:///system"), state,
                                          "armhive-virt-e2e-uefi", net);
  std::unique_ptr<LibvirtHypervisor>& hv = e2e.hv;

  VmSpec spec;
  spec.name = "armhive-virt-e2e-uefi";
  spec.vm_id = "vm-virt-e2e-uefi";
  spec.pool = "uefi";
  spec.base_disk = img.disk;  // any qcow2: the test only needs the firmware to start
  spec.memory_mib = 512;
  spec.network = net.name;
  Status created = hv->create_vm(spec);
  INFO(created.to_string());
  REQUIRE(created.is_ok());
  const DomainPaths paths = hv->paths_for(spec.name);
  CHECK(fs::exists(paths.nvram));
  CHECK(fs::file_size(paths.nvram) == fs::file_size(hv->options().uefi_vars_template));
  auto vms = hv->list_vms();
  REQUIRE(vms.is_ok());
  auto mine = only(*vms, spec.name);
  REQUIRE(mine.size() == 1);
  CHECK(mine.front().running);

  REQUIRE(hv->destroy_vm(spec.name).is_ok());
  CHECK_FALSE(fs::exists(paths.nvram));
  CHECK_FALSE(fs::exists(paths.overlay));
  CHECK_FALSE(has_vm_files(*hv, spec.name));
  CHECK(remove_network(hv->connection(), net.name).is_ok());
  fs::remove_all(state);
}

}  // namespace
}  // namespace armhive

namespace armhive {
namespace {

bool wait_until(const std::function<bool()>& cond, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return cond();
}

TEST_CASE(
    "each thread calls libvirtd on a connection of its own and a dedicated one is nobody "
    "else's",
    "[virt][e2e][threads]") {
  auto conn = Connection::open("qemu:///system");
  REQUIRE(conn.is_ok());
  auto mine = conn->get();
  REQUIRE(mine.is_ok());
  // The same thread is given the same connection again...
  CHECK(conn->get().value() == *mine);
  // ...another thread one of its own (libvirt 9.0's client must not be shared between threads:
  // connection.h), and a dedicated user yet another.
  ConnectPtr theirs;
  std::thread([&] { theirs = conn->get().value(); }).join();
  REQUIRE(theirs != nullptr);
  CHECK(theirs != *mine);
  auto dedicated = conn->open_dedicated();
  REQUIRE(dedicated.is_ok());
  CHECK(*dedicated != *mine);
  CHECK(*dedicated != theirs);
  // Each works: the other thread's answers as this one's does.
  CHECK(virConnectIsAlive(theirs.get()) == 1);
  LibvirtString host(virConnectGetHostname(theirs.get()));
  CHECK(host);
  CHECK_FALSE(conn->disconnected());
}

TEST_CASE("after libvirtd restarts, the hypervisor reconnects and still sees its running VM",
          "[virt][e2e][reconnect]") {
  TinyImage img = load_tiny_image();
  fs::path state = fs::path(env_or("ARMHIVE_E2E_STATE", fs::temp_directory_path().string())) /
                   "virt-e2e-reconnect";
  NetworkSpec net{"armhive-virt-e2e", "ahvirte2e0",   "10.231.7.1/24",
                  "10.231.7.10",      "10.231.7.100", 1500};
  E2eHypervisor e2e = open_e2e_hypervisor(env_or("ARMHIVE_VIRT_E2E_URI", "qemu:///system"), state,
                                          "armhive-virt-e2e-reconnect", net);
  std::unique_ptr<LibvirtHypervisor>& hv = e2e.hv;
  VmSpec spec;
  spec.name = "armhive-virt-e2e-rc";
  spec.vm_id = "vm-virt-e2e-rc";
  spec.pool = "reconnect";
  spec.base_disk = img.disk;
  spec.kernel = img.kernel;
  spec.initrd = img.initrd;
  spec.cmdline = img.cmdline;
  spec.network = net.name;
  REQUIRE(hv->create_vm(spec).is_ok());
  REQUIRE(only(*hv->list_vms(), spec.name).size() == 1);

  // Stop libvirtd (QEMU keeps running) and start a fresh one in this same namespace.
  int64_t pid = 0;
  {
    std::ifstream in("/run/libvirtd.pid");
    in >> pid;
  }
  REQUIRE(pid > 0);
  REQUIRE(::kill(static_cast<pid_t>(pid), SIGTERM) == 0);
  CHECK(wait_until(
      [&] {
        return !fs::exists("/proc/" + std::to_string(pid) + "/status") ||
               read_file("/proc/" + std::to_string(pid) + "/status").find("State:\tZ") !=
                   std::string::npos;
      },
      std::chrono::seconds(30)));
  CHECK(wait_until([&] { return hv->connection().disconnected(); }, std::chrono::seconds(30)));
  CHECK(hv->list_vms().status().code() == ErrorCode::kUnavailable);

  SubprocessRunner runner;
  ProcessRequest start;
  start.argv = {"libvirtd", "-d"};
  start.env = {{"LIBVIRT_LOG_OUTPUTS", "3:file:/var/log/libvirt/libvirtd.log"}};
  start.timeout = std::chrono::seconds(60);
  auto started = runner.run(start);
  REQUIRE(started.is_ok());
  REQUIRE(started->exit_code == 0);

  Result<std::vector<VmInfo>> vms = Status(ErrorCode::kUnavailable, "not yet");
  CHECK(wait_until(
      [&] {
        vms = hv->list_vms();
        return vms.is_ok();
      },
      std::chrono::seconds(60)));
  INFO(vms.status().to_string());
  REQUIRE(vms.is_ok());
  auto mine = only(*vms, spec.name);
  REQUIRE(mine.size() == 1);
  CHECK(mine.front().vm_id == spec.vm_id);
  CHECK(mine.front().running);
  CHECK_FALSE(hv->connection().disconnected());
  // The restarted libvirtd reconnects to QEMU and the agent in the background; a destroy racing
  // with that stops the domain without a lifecycle event (libvirt 9.0). The agent answering
  // again means it is done (and is what a user checks after a restart).
  CHECK(wait_until([&] { return hv->ping_agent(spec.name, std::chrono::seconds(2)).is_ok(); },
                   std::chrono::seconds(120)));

  // Events are re-registered on the new connection.
  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;
  hv->set_event_handler([&](const VmEvent& e) {
    std::lock_guard lock(mu);
    if (e.name == spec.name && e.kind == VmEventKind::kStopped) stopped = true;
    cv.notify_all();
  });
  REQUIRE(hv->destroy_vm(spec.name).is_ok());
  {
    std::unique_lock lock(mu);
    CHECK(cv.wait_for(lock, std::chrono::seconds(30), [&] { return stopped; }));
  }
  CHECK(only(*hv->list_vms(), spec.name).empty());
  CHECK_FALSE(has_vm_files(*hv, spec.name));
  CHECK(remove_network(hv->connection(), net.name).is_ok());
  fs::remove_all(state);
}

}  // namespace
}  // namespace armhive
