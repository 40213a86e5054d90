#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "base/thread_annotations.h"
#include "daemon/core/hypervisor.h"
#include "daemon/core/topology.h"
#include "daemon/virt/connection.h"
#include "daemon/virt/console_capture.h"
#include "daemon/virt/domain_events.h"
#include "daemon/virt/domain_xml.h"

namespace armhive {

// How a VM's serial console is kept. kFile: a log file beside the VM on this disk (virtlogd
// writes it; it survives the daemon). kStream: read through libvirt's console stream into this
// process's memory (console_capture.h), the only way for a remote host's, whose disk is not
// this one; output from before this daemon started is not seen. kAuto: kFile for a local URI,
// kStream for a remote one.
enum class ConsoleMode { kAuto, kFile, kStream };

struct LibvirtHypervisorOptions {
  std::string uri = "qemu:///system";
  // Per-VM state: <state_dir>/overlays/<name>.qcow2 (the transient dir storage pool
  // `storage_pool`, made by the libvirtd of `uri` on its own host), and on a local host only
  // <state_dir>/domains/<name>/{console.log,VARS.fd}.
  std::string state_dir = "/var/lib/armhive/vms";
  std::string storage_pool = "armhive-overlays";
  Accel accel = Accel::kTcg;  // from discover_host(): kKvm only on an arm64 host with /dev/kvm
  std::string uefi_code = "/usr/share/AAVMF/AAVMF_CODE.fd";
  std::string uefi_vars_template = "/usr/share/AAVMF/AAVMF_VARS.fd";
  std::string emulator;  // empty: libvirt's default qemu-system-aarch64
  ConsoleMode console = ConsoleMode::kAuto;
  // Console output kept per VM in kStream mode.
  size_t console_capture_bytes = size_t{1} << 20;
  // Where the QEMU driver keeps <name>.pid (qemu:///system); used for VmInfo::qemu_pid, which
  // stays 0 for a remote host's VMs.
  std::string qemu_runtime_dir = "/run/libvirt/qemu";
  std::chrono::milliseconds exec_poll_interval{100};
  // Reserve each VM's address on its network's DHCP before boot (dhcp_reservation.h), so that
  // guest_address() knows it at once. false: the guest takes a dynamic lease, found only after
  // its DHCP exchange (the behaviour before; kept for the cold-lease benchmark's comparison).
  bool reserve_addresses = true;
  // Networks whose guests are isolated (guest_filter.h): their VMs' interfaces get the
  // `armhive-guest` nwfilter (bound to the reserved address) and an isolated bridge port. The
  // filter must be defined on the host first (ensure_guest_filter()).
  std::set<std::string> isolated_networks;
};

// Hypervisor on one libvirt connection: qemu:///system of the local host, or a remote host's
// (qemu+tls://, qemu+ssh://), where nothing of a VM is written on this disk: overlays live in
// the host's storage pool, base images are the host's shipped volumes (image_shipper.h), the
// console is streamed (ConsoleMode). UEFI boot (no kernel) is local only for now: its vars
// file is copied from the template on this disk.
//
// Ownership: owns its Connection and DomainEvents subscription; the caller owns the EventLoop,
// which must be started before open() and outlive this object for events to arrive.
//
// Threading: every method may be called from any thread. Each thread calls libvirt on a
// connection of its own (Connection::get says why), events and console streams have theirs;
// no lock of ours is held across a libvirt call (a mutex guards only the event handler and the
// events object). Calls about the same VM must be serialised by the caller (the engine's
// per-VM strand), as QEMU holds a per-domain job lock. Every guest-agent call has a finite
// timeout. When the events' connection is found closed (libvirtd restarted), the next call
// subscribes again; calls racing with that get kUnavailable.
// Events are a hint, not a guarantee: libvirt 9.0 drops the STOPPED event of a domain destroyed
// while a restarted libvirtd is still reconnecting to it. Reconcile with list_vms().
class LibvirtHypervisor final : public Hypervisor {
 public:
  static Result<std::unique_ptr<LibvirtHypervisor>> open(LibvirtHypervisorOptions options);
  ~LibvirtHypervisor() override;

  Status create_vm(const VmSpec& spec) override;
  Status destroy_vm(std::string_view name) override;
  Result<std::vector<VmInfo>> list_vms() override;
  Result<std::vector<std::string>> list_vm_files() override;
  Status set_lease(std::string_view name, std::string_view lease_id) override;
  Status ping_agent(std::string_view name, std::chrono::milliseconds timeout) override;
  // kUnavailable while the guest has no IPv4 address (no DHCP lease, agent not up): poll.
  Result<std::string> guest_address(std::string_view name) override;
  Status set_authorized_keys(std::string_view name, std::string_view user,
                             const std::vector<std::string>& keys) override;
  // guest-exec with captured output, polled every exec_poll_interval until request.timeout;
  // then timed_out is set and the guest process is sent SIGKILL through the agent (best
  // effort, needs /bin/kill in the guest). Each agent call is capped at 10 s, so the call can
  // return up to ~10 s after the timeout.
  Result<GuestExecResult> exec(std::string_view name, const GuestExecRequest& request) override;
  // Through the agent's file calls (guest_file_transfer.h).
  Result<GuestFileTransfer> put_file(std::string_view name, const GuestFilePut& put,
                                     ByteSource& source) override;
  Result<GuestFileTransfer> get_file(std::string_view name, const std::string& path,
                                     ByteSink& sink) override;
  // Output through guest files read while the command runs (guest_exec_stream.h).
  Result<GuestExecResult> exec_stream(std::string_view name, const GuestExecRequest& request,
                                      ExecSink& sink) override;
  Result<int64_t> exec_start(std::string_view name, const GuestExecRequest& request) override;
  Result<std::optional<GuestExecResult>> exec_status(std::string_view name, int64_t pid) override;
  Result<std::string> console_log(std::string_view name, size_t max_bytes) override;
  void set_event_handler(std::function<void(const VmEvent&)> handler) override;
  // One virConnectGetAllDomainStats (active domains, NOWAIT) with the groups of
  // domain_stats.h, filtered to `names`. libvirt's test driver answers it with no counters.
  Result<std::vector<VmCounters>> vm_counters(const std::vector<std::string>& names) override;

  // The paths this hypervisor uses for VM `name` (name must be valid).
  DomainPaths paths_for(std::string_view name) const;
  const Connection& connection() const { return connection_; }
  const LibvirtHypervisorOptions& options() const { return options_; }

  // Raw guest-agent command (JSON in, JSON reply out), timeout rounded up to whole seconds.
  Result<std::string> agent_command(std::string_view name, const std::string& json,
                                    std::chrono::milliseconds timeout);

 private:
  LibvirtHypervisor(LibvirtHypervisorOptions options, Connection connection);
  Status ensure_connected();
  Result<DomainHandle> lookup(std::string_view name);
  Status remove_files(const std::string& name);
  // True if this armhived made the domain (VmMetadata::instance is its storage pool, or empty).
  bool ours(const VmMetadata& metadata) const {
    return metadata.instance.empty() || metadata.instance == options_.storage_pool;
  }

  bool streams_console() const { return consoles_ != nullptr; }
  // Starts the domain paused, opens its console, then resumes it: captured from its first byte.
  Status start_captured(const std::string& xml, const std::string& name);

  LibvirtHypervisorOptions options_;
  Connection connection_;
  const bool remote_;
  const std::unique_ptr<ConsoleCapture> consoles_;  // null in ConsoleMode::kFile
  std::atomic<bool> reconnecting_{false};
  Mutex mu_;
  std::shared_ptr<DomainEvents> events_ GUARDED_BY(mu_);  // copied out to call it without mu_
  std::function<void(const VmEvent&)> handler_ GUARDED_BY(mu_);
  int subscription_ GUARDED_BY(mu_) = 0;
};

}  // namespace armhive
