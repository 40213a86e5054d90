// End-to-end: the tiny image from the e2e catalogue ($ARMHIVE_E2E_STATE/images, built by the
// "e2e: build tiny image" fixture) booted twice through LibvirtHypervisor under the sandboxed
// libvirtd (this process runs inside its network namespace). Checks what a lease user relies
// on: the agent answers, a key installed through the agent lets a real OpenSSH client in,
// iperf3 and zstd run, the benchmark corpus is the one the manifest names, and two VMs from
// one image have their own hostname, machine-id and SSH host key.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/process_runner.h"
#include "daemon/images/catalog.h"
#include "daemon/virt/libvirt_hypervisor.h"
#include "daemon/virt/network.h"
#include "tests/support/e2e_guest.h"
#include "tests/support/files.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

struct Guest {
  std::string name;
  std::string hostname;
  std::string address;
};

// Runs argv in the guest through the agent; fails the test on a transport error.
GuestExecResult guest_exec(Hypervisor& hv, const std::string& vm, std::vector<std::string> argv) {
  auto r = hv.exec(vm, GuestExecRequest{std::move(argv), "", std::chrono::seconds(60)});
  INFO("guest-exec in " << vm << ": " << r.status().to_string());
  REQUIRE(r.is_ok());
  return *r;
}

TEST_CASE(
    "the tiny image boots to a responding agent, takes an SSH key through it, runs "
    "iperf3 and zstd, and gives every VM its own identity",
    "[images][e2e]") {
  const fs::path state = env_or("ARMHIVE_E2E_STATE", "/var/lib/armhive/e2e");
  const Image tiny = e2e_tiny_image();
  const Image* image = &tiny;

  const fs::path work = state / "images-e2e";
  NetworkSpec net{"armhive-images-e2e", "ahimge2e0",    "10.231.8.1/24",
                  "10.231.8.10",        "10.231.8.100", 1500};
  E2eHypervisor e2e = open_e2e_hypervisor(env_or("ARMHIVE_IMAGES_E2E_URI", "qemu:///system"), work,
                                          "armhive-images-e2e", net);
  LibvirtHypervisor& hv = *e2e.hv;

  std::vector<Guest> guests = {{"armhive-images-e2e-1", "img-e2e-one", ""},
                               {"armhive-images-e2e-2", "img-e2e-two", ""}};
  struct Cleanup {
    LibvirtHypervisor& hv;
    const std::vector<Guest>& guests;
    const NetworkSpec& net;
    fs::path work;
    ~Cleanup() {
      for (const auto& g : guests) (void)hv.destroy_vm(g.name);
      (void)remove_network(hv.connection(), net.name);
      std::error_code ec;
      fs::remove_all(work, ec);
    }
  } cleanup{hv, guests, net, work};

  const auto t0 = Clock::now();
  for (size_t i = 0; i < guests.size(); ++i) {
    VmSpec spec;
    spec.name = guests[i].name;
    spec.vm_id = "vm-images-e2e-" + std::to_string(i + 1);
    spec.pool = "images-e2e";
    spec.base_disk = image->disk.path;
    spec.kernel = image->kernel.path;
    spec.initrd = image->initrd.path;
    spec.cmdline = image->cmdline + " armhive.hostname=" + guests[i].hostname;
    spec.vcpus = 1;
    spec.memory_mib = 512;
    spec.network = net.name;
    Status created = hv.create_vm(spec);
    INFO(created.to_string());
    REQUIRE(created.is_ok());
  }

  // The agent answers on both.
  for (const auto& g : guests) {
    bool agent = false;
    const auto deadline = Clock::now() + std::chrono::seconds(240);
    while (Clock::now() < deadline && !agent) {
      agent = hv.ping_agent(g.name, std::chrono::seconds(2)).is_ok();
      if (!agent) std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    std::string log = hv.console_log(g.name, 8192).value_or("");
    INFO("console of " << g.name << ":\n" << log);
    REQUIRE(agent);
    std::printf("images e2e: %s agent answered %.1f s after the first create_vm (%s)\n",
                g.name.c_str(), std::chrono::duration<double>(Clock::now() - t0).count(),
                e2e.host.accel == Accel::kKvm ? "kvm" : "tcg, emulated");
  }

  // A key installed through the agent lets a real OpenSSH client log in.
  SubprocessRunner runner;
  const fs::path key = work / "id_ed25519";
  auto keygen = runner.run({.argv = {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                                     "armhive-e2e", "-f", key.string()}});
  REQUIRE(keygen.is_ok());
  REQUIRE(keygen->ok());
  const std::string pubkey = trim(read_file(key.string() + ".pub"));
  Status keys = hv.set_authorized_keys(guests[0].name, image->login_user, {pubkey});
  INFO(keys.to_string());
  REQUIRE(keys.is_ok());

  for (auto& g : guests) {
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (Clock::now() < deadline) {
      auto addr = hv.guest_address(g.name);
      if (addr.is_ok() && !addr->empty()) {
        g.address = *addr;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    INFO(g.name << " has no IPv4 address");
    REQUIRE_FALSE(g.address.empty());
  }

  ProcessResult ssh;
  for (int attempt = 0; attempt < 20; ++attempt) {  // sshd may still be generating keys
    auto r = runner.run(
        {.argv = {"ssh", "-i", key.string(), "-o", "StrictHostKeyChecking=no", "-o",
                  "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                  "-o", "LogLevel=ERROR", image->login_user + "@" + guests[0].address,
                  "hostname; iperf3 --version; zstd --version; sha256sum " + image->corpus_path},
         .timeout = std::chrono::seconds(60)});
    REQUIRE(r.is_ok());
    ssh = *r;
    if (ssh.ok()) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  INFO("ssh stdout:\n" << ssh.out << "\nssh stderr:\n" << ssh.err);
  REQUIRE(ssh.ok());
  CHECK(ssh.out.find(guests[0].hostname + "\n") == 0);
  CHECK(ssh.out.find("iperf 3.") != std::string::npos);
  CHECK(ssh.out.find("Zstandard CLI") != std::string::npos);
  CHECK(ssh.out.find(image->corpus_sha256) != std::string::npos);

  // Without the key (second VM never got it) the same client is refused.
  auto refused = runner.run(
      {.argv = {"ssh", "-i", key.string(), "-o", "StrictHostKeyChecking=no", "-o",
                "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                "-o", "LogLevel=ERROR", image->login_user + "@" + guests[1].address, "true"},
       .timeout = std::chrono::seconds(60)});
  REQUIRE(refused.is_ok());
  CHECK_FALSE(refused->ok());

  // The tools run through the agent too, and each VM has its own identity.
  std::vector<std::string> hostnames, machine_ids, host_keys;
  for (const auto& g : guests) {
    auto iperf = guest_exec(hv, g.name, {"/usr/bin/iperf3", "--version"});
    CHECK(iperf.exit_code == 0);
    CHECK(iperf.out.find("iperf 3.") != std::string::npos);
    auto zstd = guest_exec(hv, g.name, {"/usr/bin/zstd", "--version"});
    CHECK(zstd.exit_code == 0);
    CHECK(zstd.out.find("Zstandard CLI") != std::string::npos);
    hostnames.push_back(trim(guest_exec(hv, g.name, {"/bin/hostname"}).out));
    machine_ids.push_back(trim(guest_exec(hv, g.name, {"/bin/cat", "/etc/machine-id"}).out));
    auto hk = guest_exec(hv, g.name, {"/bin/cat", "/run/ssh/ssh_host_ed25519_key.pub"});
    CHECK(hk.exit_code == 0);
    host_keys.push_back(hk.out);
  }
  CHECK(hostnames[0] == guests[0].hostname);
  CHECK(hostnames[1] == guests[1].hostname);
  CHECK(machine_ids[0].size() == 32);
  CHECK(machine_ids[1].size() == 32);
  CHECK(machine_ids[0] != machine_ids[1]);
  CHECK(host_keys[0].find("ssh-ed25519 ") != std::string::npos);
  CHECK(host_keys[0] != host_keys[1]);

  for (const auto& g : guests) CHECK(hv.destroy_vm(g.name).is_ok());
  CHECK(hv.list_vms()->empty());
}

}  // namespace
}  // namespace armhive
