#include "daemon/config/access_reload.h"

#include "base/validation.h"

namespace armhive {
namespace {

std::string text(const std::string& v) { return "'" + v + "'"; }
std::string text(int v) { return std::to_string(v); }
std::string text(std::chrono::milliseconds d) {
  return format_duration(std::chrono::duration_cast<std::chrono::seconds>(d).count());
}

}  // namespace

AccessReload plan_access_reload(const AccessConfig& running, const AccessConfig& next) {
  AccessReload out;
  out.config = running;
  if (!running.enabled && !next.enabled) return out;
  if (running.enabled != next.enabled) {
    out.restart_needed.push_back(
        std::string("[access] ") + (next.enabled ? "added" : "removed") +
        ": it takes effect at the next start (the forwards are built at start; VMs keep running "
        "across a restart)");
    return out;
  }
  auto restart = [&out](const char* key, const std::string& from, const std::string& to,
                        const char* why) {
    if (from == to) return;
    out.restart_needed.push_back(std::string("[access] ") + key + ": " + from + " -> " + to +
                                 " needs a restart (" + why + "; VMs keep running across it)");
  };
  restart("listen", text(running.listen), text(next.listen), "the open forwards listen there");
  restart("port_min", text(running.port_min), text(next.port_min),
          "the open forwards hold ports of the running range");
  restart("port_max", text(running.port_max), text(next.port_max),
          "the open forwards hold ports of the running range");
  restart("advertise", text(running.advertise), text(next.advertise),
          "the leases' SSH endpoints were handed out under the running one");
  restart("ssh_ca_key", text(running.ssh_ca_key), text(next.ssh_ca_key),
          "the guests trust the running CA");

  AccessConfig& c = out.config;
  auto take = [&out](const char* key, auto& field, const auto& value, const std::string& from,
                     const std::string& to, const char* when) {
    if (field == value) return;
    field = value;
    out.applied.push_back(std::string("access: ") + key + " " + from + " -> " + to + " (" + when +
                          ")");
    out.limits = true;
  };
  take("max_sessions", c.max_sessions, next.max_sessions, text(running.max_sessions),
       text(next.max_sessions), "at once; sessions over it run on");
  take("max_sessions_per_forward", c.max_sessions_per_forward, next.max_sessions_per_forward,
       text(running.max_sessions_per_forward), text(next.max_sessions_per_forward),
       "forwards opened from now on");
  take("forward_idle_timeout", c.forward_idle_timeout, next.forward_idle_timeout,
       text(running.forward_idle_timeout), text(next.forward_idle_timeout),
       "forwards opened from now on");
  take("max_extra_ports", c.max_extra_ports, next.max_extra_ports, text(running.max_extra_ports),
       text(next.max_extra_ports), "leases asking from now on");
  return out;
}

}  // namespace armhive
