#pragma once

#include <string>
#include <vector>

namespace armhive {

// Destroys and undefines every domain of the sandbox's libvirtd (qemu:///system) whose armhive
// metadata names `instance` (an armhived's storage pool), and returns how many. An end-to-end
// test's armhived leaves its VMs running when it stops (they are re-adopted on restart); this
// ends them when the test is done with that daemon, so no test's guests outlive it and load the
// next one. Never touches domains of another instance or without armhive metadata. Errors (no
// libvirtd, a domain gone meanwhile) are ignored: it is best-effort cleanup. Blocks on libvirt.
int destroy_instance_domains(const std::string& instance) noexcept;

// "name (instance)" of every domain whose armhive metadata names an instance starting with
// `prefix`, in libvirt's order; empty when libvirtd cannot be reached (the caller checks that).
std::vector<std::string> instance_domains(const std::string& prefix) noexcept;

}  // namespace armhive
