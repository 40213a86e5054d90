#include "daemon/bench/host_mtu.h"

#include <cctype>

namespace armhive {
namespace {

std::string first_line(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  return line.size() > 200 ? line.substr(0, 200) + "..." : line;
}

Result<std::string> run_ip(ProcessRunner& processes, std::vector<std::string> argv,
                           std::chrono::milliseconds timeout) {
  std::string what;
  for (const auto& a : argv) what += (what.empty() ? "" : " ") + a;
  auto r = processes.run({.argv = std::move(argv), .timeout = timeout});
  if (!r.is_ok()) return r.status().annotate(what);
  if (!r->ok()) {
    return unavailable(what + " failed" +
                       (r->timed_out ? std::string(" (timed out)")
                                     : " with exit code " + std::to_string(r->exit_code)) +
                       (r->err.empty() ? "" : ": " + first_line(r->err)));
  }
  return r->out;
}

}  // namespace

Result<HostMtuLinks> read_host_mtu_links(ProcessRunner& processes, const std::string& bridge,
                                         std::chrono::milliseconds timeout) {
  HostMtuLinks links;
  ARMHIVE_ASSIGN_OR_RETURN(
      std::string self,
      run_ip(processes, {"ip", "-d", "-j", "link", "show", "dev", bridge}, timeout));
  ARMHIVE_ASSIGN_OR_RETURN(links.bridge, parse_ip_link_json(self));
  ARMHIVE_ASSIGN_OR_RETURN(
      std::string ports,
      run_ip(processes, {"ip", "-d", "-j", "link", "show", "master", bridge}, timeout));
  ARMHIVE_ASSIGN_OR_RETURN(links.ports, parse_ip_link_list_json(ports));
  return links;
}

Status check_host_mtus(const std::vector<int>& mtus, const HostMtuLinks& links) {
  std::vector<HostLinkMtu> all = {links.bridge};
  all.insert(all.end(), links.ports.begin(), links.ports.end());
  for (size_t i = 0; i < mtus.size(); ++i) {
    auto plan = plan_host_mtu(mtus[i], all);
    if (!plan.is_ok()) {
      return invalid_argument("network.mtus[" + std::to_string(i) + "]", plan.status().message());
    }
  }
  return Status::ok();
}

Result<HostLinkMtu> find_tap(const HostMtuLinks& links, const std::string& guest_mac) {
  std::string mac;
  for (char c : guest_mac) {
    if (c == '\n' || c == '\r' || c == ' ') continue;
    mac += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (mac.size() != 17)
    return invalid_argument("network", "the guest's MAC \"" + mac + "\" is malformed");
  const std::string tap_mac = "fe" + mac.substr(2);
  for (const HostLinkMtu& p : links.ports) {
    if (p.address == tap_mac) return p;
  }
  return not_found("no port of bridge " + links.bridge.name + " has the MAC " + tap_mac +
                   " of the guest's tap device");
}

Status apply_mtu_steps(ProcessRunner& processes, const std::vector<MtuStep>& steps,
                       std::chrono::milliseconds timeout, size_t* applied) {
  if (applied) *applied = 0;
  for (const MtuStep& s : steps) {
    auto r = run_ip(processes, {"ip", "link", "set", "dev", s.link, "mtu", std::to_string(s.to)},
                    timeout);
    if (!r.is_ok()) return r.status();
    if (applied) ++*applied;
  }
  return Status::ok();
}

std::optional<int> verify_path_mtu(ProcessRunner& processes, const std::string& address, int mtu,
                                   std::chrono::milliseconds timeout, std::string& why) {
  const std::string payload = std::to_string(mtu - 28);
  auto r = processes.run(
      {.argv = {"ping", "-n", "-q", "-M", "do", "-s", payload, "-c", "2", "-W", "2", address},
       .timeout = timeout});
  if (!r.is_ok()) {
    why = "ping -M do -s " + payload + ": " + r.status().message();
    return std::nullopt;
  }
  if (!r->ok()) {
    why = "ping -M do -s " + payload + " " + address + " failed (exit code " +
          std::to_string(r->exit_code) + ")" + (r->err.empty() ? "" : ": " + first_line(r->err));
    return std::nullopt;
  }
  return mtu;
}

}  // namespace armhive
