#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/core/clock.h"

namespace armhive {

// What the engine intends a VM to be. Persisted so a restarted daemon knows which running
// domains it may adopt (warm or leased), which were mid-boot, and which it was destroying.
enum class VmState { kStarting, kWarm, kLeased, kDestroying };
std::string_view to_string(VmState s);
std::optional<VmState> vm_state_from_string(std::string_view s);

// One VM as the database records it. Plain data.
struct VmRecord {
  std::string name;
  std::string vm_id;
  std::string pool;
  // The host (HostConfig::name) whose libvirt runs it. Empty in records written before hosts
  // were recorded: those belong to the one host such a daemon drove.
  std::string host;
  VmState state = VmState::kStarting;
  std::string lease_id;  // the lease it boots for (cold) or serves; empty when warm
  std::string address;
  std::vector<int> cpus;
  TimePoint created_at;
  // The guest's SSH host keys ("TYPE BASE64", daemon/core/host_keys.h), read through the guest
  // agent before the VM became warm or its lease ready; empty while booting and for pools
  // without sshd (PoolConfig::ssh false).
  std::vector<std::string> host_keys;
};

}  // namespace armhive
