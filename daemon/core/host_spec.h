#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace armhive {

// One libvirt host of the fleet as an operator describes it: in the configuration
// ([[hosts]], or [host] alone) or added through the API (POST /v1/hosts), where it is kept
// (HostStore) so that a restart drives it again. Plain data.
struct HostSpec {
  std::string name;         // [[hosts]]: required, unique; [host]: empty = the machine's name
  std::string libvirt_uri;  // "qemu:///system", "qemu+ssh://armhive@hc1/system", "qemu+tls://..."
  std::map<std::string, std::string> labels;  // what pools select hosts by (board = "honeycomb")
  // [hosts.cpus] in cpuset syntax, overriding what discovery finds on that host.
  std::optional<std::string> housekeeping_cpus;
  std::optional<std::string> dedicated_cpus;
  std::optional<std::string> shared_cpus;
  // CPUs sharing an L2 cache, one cpuset each ("0-1"): libvirt's capabilities list only L3,
  // so a remote host's clusters come from here (a local host's from sysfs; this wins).
  std::vector<std::string> l2_clusters;
  // Directories on that host (its own disk, made by its libvirtd as storage pools): the VMs'
  // overlays, and (a remote host) the images shipped to it. Empty: <state_dir>/vms and
  // <state_dir>/shipped-images, with [host] state_dir.
  std::string vm_dir;
  std::string image_dir;
  // Who applies the network guard (daemon/virt/network_guard.h) of [[networks]] on that host:
  // "armhived" (this machine's nftables: a local host only) or "host" (the host's own
  // provisioning installs the tables `armhived network-guard` prints; a remote host with
  // [[networks]] must say so, so that no guest runs unguarded by accident).
  std::string network_guard = "armhived";
  // How errors name this host's keys: "hosts[1]." for [[hosts]], "host." for [host] alone,
  // "" for the API's request body.
  std::string field_prefix = "host.";
};

// Who wrote a host's spec, which decides what its libvirt URI may make armhived do: the
// configuration file (the machine's operator, who owns its files already) or an API client
// (POST /v1/hosts: an admin token, possibly from anywhere).
enum class SpecOrigin { kConfig, kApi };

// Everything about a spec that can be checked without the host: the name, the URI's form and
// transport (check_libvirt_uri), labels, the cpusets' and clusters' syntax, absolute
// directories, network_guard's value, and (with guest networks) who guards a remote host's
// guests. kInvalidArgument naming the field (field_prefix + key).
Status validate_host_spec(const HostSpec& spec, bool has_networks, SpecOrigin origin,
                          const std::vector<std::string>& vouched_uris = {});

// A libvirt URI as virConnectOpen takes it ("driver[+transport]://[user@][host][:port]/path
// [?...]"), limited to what armhived needs, since libvirt's client runs or reads whatever some
// URIs name (qemu+ext://?command=, ?netcat=, ?socket=, ?keyfile=) as armhived's user:
//   - this machine: qemu:///system, qemu:///session (and test:///default, libvirt's built-in
//     test driver, which reads no file);
//   - a lab host: qemu+tls://, qemu+ssh://, qemu+tcp:// with a host name;
//   - from the configuration file only: qemu+unix:/// (a local socket the operator chose).
// Every other driver or transport (ext, libssh, libssh2, unix from the API, test:///PATH, ...)
// is refused. Query parameters: name, mode, no_tty, sshauth and tls_priority anywhere (they
// run and read nothing); keyfile, pkipath, known_hosts and socket (files on this machine) and
// no_verify / known_hosts_verify (weaker checks) from the configuration file, and from the API
// only as `name=value` exactly as one of `vouched` (the configuration file's host URIs) has it:
// the operator chose those files, a client may reuse but never name one; command, netcat
// (programs to run), proxy and anything else never. kInvalidArgument naming `field`.
Status check_libvirt_uri(const std::string& field, const std::string& uri, SpecOrigin origin,
                         const std::vector<std::string>& vouched = {});

}  // namespace armhive
