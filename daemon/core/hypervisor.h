#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/core/usage_meter.h"

namespace armhive {

// What the lease engine asks of a host's hypervisor, in four interfaces (VM lifecycle, guest
// agent, console, usage meter). The libvirt implementation lives in daemon/virt
// (LibvirtHypervisor); tests use the hand-written fake in tests/support, kept honest by a
// conformance suite.
//
// Threading: every method may be called from any engine thread, but the engine serialises all
// calls about one VM on that VM's strand (QEMU's per-domain job lock punishes overlap). Calls
// about different VMs may run concurrently. Methods block on libvirt and must never be called
// with an engine lock held.

// Everything needed to create one VM. All strings are validated or escaped by the
// implementation before they reach XML.
struct VmSpec {
  std::string name;   // domain name: "armhive-" + vm_id; [a-z0-9-] only
  std::string vm_id;  // stable id of this VM (survives hand-out), e.g. "vm-3f2a9c"
  std::string pool;
  // Image, all absolute paths from the image catalogue.
  std::string base_disk;  // qcow2 base; the VM gets a qcow2 overlay on it
  std::string kernel;     // direct kernel boot when set; UEFI (AAVMF) boot when empty
  std::string initrd;
  std::string cmdline;
  int vcpus = 1;
  uint64_t memory_mib = 512;
  uint64_t disk_gib = 0;            // overlay virtual size; 0 = the base image's size
  std::string network = "default";  // libvirt network name
  // The NIC's MAC, "52:54:00:xx:xx:xx" style; empty: the hypervisor picks one (LibvirtHypervisor
  // also reserves the VM's address under it before boot, see daemon/virt/dhcp_reservation.h).
  std::string mac;
  int mtu = 1500;
  int net_queues = 1;
  std::vector<int> vcpu_pins;      // host CPU for vCPU i; empty = not pinned
  std::vector<int> emulator_cpus;  // housekeeping CPUs for QEMU's own threads; empty = any
  std::optional<int> numa_node;    // strict memory binding
  std::map<std::string, std::string> labels;
};

struct VmInfo {
  std::string name;
  std::string vm_id;
  std::string pool;
  std::string lease_id;  // from the domain metadata; empty while warm
  bool running = false;
  std::vector<int> vcpu_pins;  // from the live <cputune>
  std::vector<int> emulator_cpus;
  int64_t qemu_pid = 0;  // 0 if unknown
};

enum class VmEventKind {
  kStarted,
  kStopped,  // shut down or destroyed
  kCrashed,  // QEMU died or the guest crashed
  kAgentConnected,
  kAgentDisconnected,
};

struct VmEvent {
  std::string name;  // domain name
  VmEventKind kind = VmEventKind::kStopped;
  std::string detail;  // libvirt's reason, for the lease history
};

struct GuestExecRequest {
  std::vector<std::string> argv;  // run directly by the guest agent, no shell
  std::string stdin_data;
  // exec(): must be positive. exec_stream(): zero means no timeout of its own (the command
  // runs until it exits, the sink cancels it or the VM goes away).
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // "NAME=value" entries given to the process (guest-exec "env"); empty: the agent's own.
  // Values may be secrets: implementations never log or persist them.
  std::vector<std::string> env;
};

struct GuestExecResult {
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;  // the process was killed by us after `timeout`
  std::string out;
  std::string err;
  bool out_truncated = false;
  bool cancelled = false;  // exec_stream(): the sink cancelled it and the process was killed
};

enum class ExecOutputStream { kStdout, kStderr };

// Receives the output of GuestAgent::exec_stream() while the command runs. Every method is
// called on the thread that called exec_stream(), never concurrently; `data` are the guest's
// untrusted bytes, only valid during the call.
class ExecSink {
 public:
  virtual ~ExecSink() = default;
  // Once, when the guest process runs (before any output); not called when it could not start.
  virtual void started() {}
  virtual void output(ExecOutputStream stream, std::string_view data) = 0;
  // Polled between agent calls: true kills the guest process and ends the exec with
  // `cancelled` set.
  virtual bool cancelled() { return false; }
};

// Guest file transfer (GuestAgent::put_file/get_file). What goes in or comes out is a single
// file or, for a directory, a tar stream of it.
enum class GuestFileKind { kFile, kTar };

// The bytes of an upload, pulled piece by piece (an HTTP body as it arrives, so a large file
// never sits whole in memory). Called on the transferring thread only.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // At most `max` bytes; an empty string once the source is exhausted. An error (the client
  // went away, its deadline passed) ends the transfer.
  virtual Result<std::string> read(size_t max) = 0;
};

// Receives a download piece by piece. Called on the transferring thread only.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  // Once, before the first write: what follows, its size and the guest's sha256 of it.
  virtual Status begin(GuestFileKind kind, uint64_t size, const std::string& sha256) = 0;
  // The guest's untrusted bytes, only valid during the call; an error stops the transfer.
  virtual Status write(std::string_view data) = 0;
};

struct GuestFilePut {
  std::string path;  // absolute; the file, or the directory a tar stream is unpacked into
  GuestFileKind kind = GuestFileKind::kFile;
  uint64_t size = 0;   // exactly this many bytes follow (the Content-Length)
  std::string sha256;  // the sender's checksum (lowercase hex); empty: none given
};

struct GuestFileTransfer {
  GuestFileKind kind = GuestFileKind::kFile;
  uint64_t bytes = 0;
  std::string sha256;  // computed while streaming and equal to the guest's sha256sum
};

// Every Hypervisor refuses other names with kInvalidArgument (field "name"): 1-63 characters of
// [a-z0-9-], not starting with '-' (they become file names and XML text).
Status validate_domain_name(std::string_view name);

// A host's VM lifecycle: what the engine creates, finds, marks and destroys.
class VmLifecycle {
 public:
  virtual ~VmLifecycle() = default;

  // Creates the overlay disk and per-VM files, then creates (starts) a transient domain whose
  // metadata names vm_id and pool. On failure everything it made is removed again.
  virtual Status create_vm(const VmSpec& spec) = 0;

  // Destroys the domain if it runs and deletes its overlay and per-VM files (console log,
  // UEFI vars). Idempotent: parts already gone are not errors.
  virtual Status destroy_vm(std::string_view name) = 0;

  // This armhived's domains (recognised by their metadata: a vm_id, and LibvirtHypervisor's
  // instance marker, so another armhived's VMs on the same libvirtd are not listed), running or
  // not. destroy_vm refuses another armhived's domain (kConflict).
  virtual Result<std::vector<VmInfo>> list_vms() = 0;

  // Domain names whose overlay or per-VM files exist on disk (for orphan cleanup).
  virtual Result<std::vector<std::string>> list_vm_files() = 0;

  // Records the lease a VM is handed to in its live metadata (empty clears it).
  virtual Status set_lease(std::string_view name, std::string_view lease_id) = 0;

  // Lifecycle and agent events. The callback runs on the libvirt event-loop thread: it must
  // copy what it needs and return at once. Set once, before the first create_vm.
  virtual void set_event_handler(std::function<void(const VmEvent&)> handler) = 0;
};

// The guest agent of a running VM. Every call has a finite timeout.
class GuestAgent {
 public:
  virtual ~GuestAgent() = default;

  // guest-ping with a finite timeout.
  virtual Status ping_agent(std::string_view name, std::chrono::milliseconds timeout) = 0;

  // The guest's IPv4 address on its libvirt network (DHCP lease, then the agent).
  virtual Result<std::string> guest_address(std::string_view name) = 0;

  // Replaces the user's ~/.ssh/authorized_keys through the guest agent.
  virtual Status set_authorized_keys(std::string_view name, std::string_view user,
                                     const std::vector<std::string>& keys) = 0;

  virtual Result<GuestExecResult> exec(std::string_view name, const GuestExecRequest& request) = 0;

  // Runs a command and hands its output to `sink` while it runs; the result carries the exit
  // code (out/err stay empty: the sink had them). The default runs exec() and delivers the
  // output when the command ends (an agent that cannot stream; a zero timeout becomes one
  // hour there); LibvirtHypervisor streams (daemon/virt/guest_exec_stream.h).
  virtual Result<GuestExecResult> exec_stream(std::string_view name,
                                              const GuestExecRequest& request, ExecSink& sink);

  // Writes `put.size` bytes from `source` to put.path in the guest (parent directories made)
  // or, for kTar, unpacks them into the directory put.path. The bytes go to a temporary file
  // first that is checked (size, the sha256 computed while streaming against the guest's
  // sha256sum and against put.sha256) before it is moved into place or unpacked, and removed
  // in every case: a failed transfer leaves nothing behind. The default: kUnavailable.
  virtual Result<GuestFileTransfer> put_file(std::string_view name, const GuestFilePut& put,
                                             ByteSource& source);
  // Streams the guest's file at `path` (or a tar of the directory) to `sink`: begin() with
  // the guest's size and sha256sum, then the bytes, each chunk checked; a guest that sends
  // more or other bytes than it announced ends the transfer with an error. kNotFound naming
  // `path` when nothing is there. The default: kUnavailable.
  virtual Result<GuestFileTransfer> get_file(std::string_view name, const std::string& path,
                                             ByteSink& sink);

  // Starts a guest process and returns its pid at once, without capturing its output (it goes
  // to the agent's stdio): for commands that run as long as the lease (startup commands). The
  // call is bounded by the agent timeout; request.timeout is not used.
  virtual Result<int64_t> exec_start(std::string_view name, const GuestExecRequest& request) = 0;
  // nullopt while the process started by exec_start runs; its exit code or signal once it
  // ended (the agent then forgets the pid). Bounded by the agent timeout.
  virtual Result<std::optional<GuestExecResult>> exec_status(std::string_view name,
                                                             int64_t pid) = 0;
};

// A VM's serial console.
class VmConsole {
 public:
  virtual ~VmConsole() = default;
  // The tail (at most max_bytes) of the VM's serial console log.
  virtual Result<std::string> console_log(std::string_view name, size_t max_bytes) = 0;
};

// One running VM's counters (VmMeter::vm_counters).
struct VmCounters {
  std::string name;  // domain name
  UsageCounters counters;
};

// What a host's running VMs have used, for the usage of their leases (daemon/core/
// usage_meter.h).
class VmMeter {
 public:
  virtual ~VmMeter() = default;
  // The counters of those of `names` that run now, read in ONE call to the host however many
  // are named (libvirt's bulk domain statistics), in no particular order. A name that is not
  // a running domain of the host is left out, not an error; an error means the host could not
  // be asked. The default (a hypervisor that cannot meter its VMs) reports none.
  virtual Result<std::vector<VmCounters>> vm_counters(const std::vector<std::string>& names);
};

// Everything the engine asks of a host's hypervisor. Users that need less take the narrower
// interface (the benchmark runner takes only the GuestAgent).
class Hypervisor : public VmLifecycle, public GuestAgent, public VmConsole, public VmMeter {};

}  // namespace armhive
