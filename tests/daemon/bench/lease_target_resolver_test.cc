// make_lease_target_resolver: what the benchmark runner learns about a leased VM, in particular
// the host side of the host baselines on an aarch64/KVM host and why there is none on an
// x86_64/TCG host.
#include "daemon/bench/lease_target_resolver.h"

#include <catch2/catch.hpp>

#include "daemon/bench/benchmark_service.h"
#include "daemon/bench/host_baseline.h"

namespace armhive {
namespace {

constexpr const char* kImageDir = "/var/lib/armhive/images/tiny";

LeasedVm leased_vm() {
  LeasedVm vm;
  vm.lease.id = "l-1";
  vm.lease.vm_name = "armhive-vm-7";
  vm.lease.address = "10.77.0.12";
  vm.lease.cpus = {4, 5};
  vm.pool.name = "ci";
  vm.pool.image = "tiny";
  vm.pool.vcpus = 2;
  vm.pool.network = "armhive";
  vm.housekeeping = {0, 1};
  return vm;
}

BootImage tiny_image(bool with_host_files) {
  BootImage b;
  b.name = "tiny";
  b.version = "1";
  b.corpus_path = "/usr/share/armhive/corpus.bin";
  b.corpus_bytes = 8388608;
  b.corpus_seed = 20260130;
  b.corpus_sha256 = std::string(64, 'c');
  b.arch = "aarch64";
  if (with_host_files) {
    b.host_corpus_file = std::string(kImageDir) + "/corpus.bin";
    b.host_stream_file = std::string(kImageDir) + "/armhive-stream";
  }
  return b;
}

LeaseTargetResolver resolver(const HostTopology& host, bool with_host_files) {
  return make_lease_target_resolver(
      [](const std::string& id) -> Result<LeasedVm> {
        if (id != "l-1") return not_found("no lease", id);
        return leased_vm();
      },
      host,
      [with_host_files](const std::string&) -> Result<BootImage> {
        return tiny_image(with_host_files);
      },
      {{"armhive", "ahbr0"}},
      [](const std::string& vm) { return "/var/lib/armhive/vms/overlays/" + vm + ".qcow2"; });
}

const std::vector<std::string_view> kSuites = {kSuiteCompression, kSuiteMemory, kSuiteCrypto,
                                               kSuiteStorage};

TEST_CASE("lease target on an aarch64 KVM host: every suite has its host-side input",
          "[bench][baseline]") {
  HostTopology host;
  host.hostname = "honeycomb";
  host.arch = "aarch64";
  host.accel = Accel::kKvm;
  auto t = resolver(host, true)("l-1");
  REQUIRE(t.is_ok());
  CHECK(t->vm_name == "armhive-vm-7");
  CHECK(t->cpus == std::vector<int>{4, 5});
  CHECK_FALSE(t->emulated);
  CHECK(t->bridge == "ahbr0");
  CHECK(t->host_corpus_path == std::string(kImageDir) + "/corpus.bin");
  // The catalogue's static aarch64 binary is this host's own program.
  CHECK(t->host_stream_path == std::string(kImageDir) + "/armhive-stream");
  CHECK(t->disk_path == "/var/lib/armhive/vms/overlays/armhive-vm-7.qcow2");
  CHECK(t->host_scratch_dir == "/var/lib/armhive/vms/overlays");
  for (std::string_view suite : kSuites) {
    INFO(suite);
    HostBaselineDecision d = decide_host_baseline(*t, suite);
    CHECK(d.run);
    CHECK(d.reason.empty());
  }
}

TEST_CASE("lease target on an x86_64 TCG host: no baseline, and the report says why",
          "[bench][baseline]") {
  HostTopology host;
  host.hostname = "devbox";
  host.arch = "x86_64";
  host.accel = Accel::kTcg;
  auto t = resolver(host, true)("l-1");
  REQUIRE(t.is_ok());
  CHECK(t->emulated);
  // The aarch64 binary is not this host's program: it is never offered as the host's.
  CHECK(t->host_stream_path.empty());
  CHECK(t->host_corpus_path == std::string(kImageDir) + "/corpus.bin");
  for (std::string_view suite : kSuites) {
    INFO(suite);
    HostBaselineDecision d = decide_host_baseline(*t, suite);
    CHECK_FALSE(d.run);
    CHECK(d.reason.find("emulated by QEMU TCG on this x86_64 host") != std::string::npos);
    CHECK(d.reason.find("would measure the emulator") != std::string::npos);
  }
}

TEST_CASE("lease target from an image built before the host copies: the reason names them",
          "[bench][baseline]") {
  HostTopology host;
  host.arch = "aarch64";
  host.accel = Accel::kKvm;
  auto t = resolver(host, false)("l-1");
  REQUIRE(t.is_ok());
  CHECK(t->host_corpus_path.empty());
  CHECK(t->host_stream_path.empty());
  CHECK(decide_host_baseline(*t, kSuiteCompression).reason ==
        "the corpus is not available on the host");
  CHECK(decide_host_baseline(*t, kSuiteMemory).reason.find("armhive-stream is not installed") !=
        std::string::npos);
  CHECK(decide_host_baseline(*t, kSuiteStorage).run);  // the overlay's directory is known
  CHECK(decide_host_baseline(*t, kSuiteCrypto).run);

  auto missing = resolver(host, false)("l-2");
  CHECK(missing.status().code() == ErrorCode::kNotFound);
}

}  // namespace
}  // namespace armhive

namespace armhive {
namespace {

TEST_CASE("lease target on a remote host of the fleet: its topology, nothing of this machine",
          "[bench][baseline][fleet]") {
  HostTopology here;
  here.hostname = "controller";
  here.arch = "x86_64";
  HostTopology tx1;
  tx1.hostname = "tx1";
  tx1.arch = "aarch64";
  tx1.accel = Accel::kKvm;
  auto resolve = make_lease_target_resolver(
      [](const std::string& id) -> Result<LeasedVm> {
        LeasedVm vm = leased_vm();
        vm.lease.host = id == "l-1" ? "tx1" : "gone";
        return vm;
      },
      [&](const std::string& host) {
        return host == "tx1"          ? LeaseHost{&tx1, false}
               : host == "controller" ? LeaseHost{&here, true}
                                      : LeaseHost{};
      },
      [](const std::string&) -> Result<BootImage> { return tiny_image(true); },
      {{"armhive", "ahbr0"}},
      [](const std::string& vm) { return "/var/lib/armhive/vms/overlays/" + vm + ".qcow2"; });
  auto t = resolve("l-1");
  REQUIRE(t.is_ok());
  CHECK(t->host == "tx1");
  CHECK(t->remote_host);
  CHECK_FALSE(t->emulated);  // tx1's own KVM, not this x86 machine's
  CHECK(t->host_arch == "aarch64");
  CHECK(t->corpus_seed == 20260130);  // the guest's corpus is the image's
  // This machine's bridge, overlay directory and image files are not tx1's.
  CHECK(t->bridge.empty());
  CHECK(t->disk_path.empty());
  CHECK(t->host_scratch_dir.empty());
  CHECK(t->host_corpus_path.empty());
  CHECK(t->host_stream_path.empty());
  for (std::string_view suite : kSuites) {
    HostBaselineDecision d = decide_host_baseline(*t, suite);
    CHECK_FALSE(d.run);
    CHECK_THAT(d.reason, Catch::Contains("runs on host tx1"));
  }
  CHECK(resolve("l-2").status().code() == ErrorCode::kNotFound);
}

}  // namespace
}  // namespace armhive
