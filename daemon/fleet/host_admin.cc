#include "daemon/fleet/host_admin.h"

#include <spdlog/spdlog.h>

namespace armhive {

Status HostAdmin::add(HostSpec spec) {
  spec.field_prefix.clear();  // the request's own keys
  ARMHIVE_RETURN_IF_ERROR(
      validate_host_spec(spec, options_.has_networks, SpecOrigin::kApi, options_.configured_uris));
  std::lock_guard one_at_a_time(mu_);
  if (options_.configured.count(spec.name)) {
    return Status(ErrorCode::kConflict,
                  "host '" + spec.name + "' is in " + options_.config_path + " already", spec.name,
                  "name");
  }
  HostSetup setup = make_host_setup(spec, spec.name, options_.pools, options_.state_dir);
  auto host = registry_.add(setup);
  if (!host.is_ok()) {
    // Could not reach it, or libvirt refused: the service behind is not there (503), whatever
    // the transport said (a timeout included); a name taken stays 409.
    if (host.status().code() == ErrorCode::kConflict) return host.status();
    return Status(ErrorCode::kUnavailable, host.status().message(), spec.name);
  }
  auto engine_host = registry_.engine_host(**host);
  Status driven =
      engine_host.is_ok() ? engine_.add_host(std::move(engine_host).value()) : engine_host.status();
  if (!driven.is_ok()) {
    (void)registry_.remove(spec.name);
    return driven;
  }
  Status kept = store_.put(spec);
  if (!kept.is_ok()) {
    (void)engine_.remove_host(spec.name);  // nothing is on it yet
    (void)registry_.remove(spec.name);
    return kept.annotate("host " + spec.name + " not added (it would be gone after a restart)");
  }
  spdlog::info("host {} ({}) added through the API", spec.name, spec.libvirt_uri);
  return Status::ok();
}

Status HostAdmin::remove(const std::string& name) {
  std::lock_guard one_at_a_time(mu_);
  if (options_.configured.count(name)) {
    return Status(ErrorCode::kConflict,
                  "host '" + name + "' is in " + options_.config_path +
                      ": remove it there (and restart armhived), not through the API",
                  name, "name");
  }
  Status left = engine_.remove_host(name);
  // A host never reached since armhived started is not the engine's yet: the registry's alone.
  if (!left.is_ok() && (left.code() != ErrorCode::kNotFound || !registry_.waiting().count(name))) {
    return left;
  }
  (void)registry_.remove(name);
  Status forgot = store_.remove(name);
  if (!forgot.is_ok()) {
    return forgot.annotate("host " + name +
                           " is no longer driven, but the database still lists it: it comes back "
                           "at the next start unless removed again");
  }
  return Status::ok();
}

}  // namespace armhive
