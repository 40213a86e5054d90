#pragma once

#include <set>
#include <string>
#include <vector>

#include "base/result.h"
#include "daemon/core/host_spec.h"
#include "daemon/core/host_store.h"
#include "daemon/core/lease.h"
#include "daemon/engine/lease_engine.h"
#include "daemon/fleet/host_registry.h"

namespace armhive {

// Adding and removing libvirt hosts while armhived runs (POST /v1/hosts, DELETE
// /v1/hosts/{name}): the registry connects and sets the host up, the engine drives it, the
// HostStore keeps it for the next start. Each step that fails undoes the ones before it, so a
// host is either driven and kept, or neither.
//
// The hosts of the configuration file are not the API's: adding one of their names is
// kConflict, and so is removing one ("remove it from the configuration").
//
// Ownership: borrows the registry, engine and store (they outlive it). Threading: add() and
// remove() may be called from any thread; one runs at a time (mu_, held across the steps, which
// block: the registry's connect up to libvirt_timeout).
class HostAdmin {
 public:
  struct Options {
    std::set<std::string> configured;  // the configuration file's host names
    bool has_networks = false;         // [[networks]]: a remote host's guard must be its own
    std::vector<PoolConfig> pools;     // which CPU sets a new host needs
    std::string state_dir;             // its directories' defaults
    std::string config_path;           // for messages
    // The configuration file's host URIs: the files they name (pkipath=, keyfile=) are the only
    // ones an added host's URI may name (check_libvirt_uri).
    std::vector<std::string> configured_uris;
  };
  HostAdmin(Options options, HostRegistry& registry, LeaseEngine& engine, HostStore& store)
      : options_(std::move(options)), registry_(registry), engine_(engine), store_(store) {}

  // Validates the spec (400 naming the field), then connects (a host that cannot be reached,
  // or that libvirt refuses, is kUnavailable naming the host and libvirt's error), drives and
  // keeps it.
  Status add(HostSpec spec);
  // kNotFound, or kConflict for a configured host or one that still has VMs or leases.
  Status remove(const std::string& name);

 private:
  const Options options_;
  HostRegistry& registry_;
  LeaseEngine& engine_;
  HostStore& store_;
  std::mutex mu_;
};

}  // namespace armhive
