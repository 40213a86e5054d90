#include "daemon/virt/guest_filter.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <utility>
#include <vector>

#include "daemon/virt/error.h"
#include "daemon/virt/handles.h"
#include "daemon/virt/xml.h"

namespace armhive {

namespace {

using NwFilterHandle = LibvirtHandle<virNWFilterPtr, virNWFilterFree>;

// One rule of the root chain. Lower priority runs first; the first accept or drop ends the
// frame's walk through the chain.
struct Rule {
  const char* action;     // "accept" | "drop"
  const char* direction;  // "out" (from the guest) | "in" | "inout"
  int priority;
  const char* element;  // "mac" | "ip" | "arp" | nullptr (every frame)
  std::vector<std::pair<const char*, const char*>> attrs;
};

// The whole policy in the root chain (the protocol elements may all appear there), so the
// filter stands alone: Debian ships libvirt's example filters (clean-traffic and its parts) in a
// separate package, which a lab host need not have.
const std::vector<Rule>& rules() {
  static const std::vector<Rule> kRules = {
      // Another source MAC: the guest changed its address (no-mac-spoofing).
      {"drop", "out", 100, "mac", {{"match", "no"}, {"srcmacaddr", "$MAC"}}},
      // DHCP before the guest has an address.
      {"accept",
       "out",
       200,
       "ip",
       {{"srcipaddr", "0.0.0.0"},
        {"protocol", "udp"},
        {"srcportstart", "68"},
        {"dstportstart", "67"}}},
      // IPv4 from any address but its own (no-ip-spoofing), then its own.
      {"drop", "out", 210, "ip", {{"match", "no"}, {"srcipaddr", "$IP"}}},
      {"accept", "out", 220, "mac", {{"protocolid", "ipv4"}}},
      {"accept", "in", 230, "mac", {{"protocolid", "ipv4"}}},
      // ARP naming another MAC or another address (no-arp-spoofing; 0.0.0.0 is a probe).
      {"drop", "out", 300, "arp", {{"match", "no"}, {"arpsrcmacaddr", "$MAC"}}},
      {"accept", "out", 310, "arp", {{"arpsrcipaddr", "0.0.0.0"}}},
      {"drop", "out", 320, "arp", {{"match", "no"}, {"arpsrcipaddr", "$IP"}}},
      {"accept", "inout", 330, "mac", {{"protocolid", "arp"}}},
      // Everything else (IPv6, RARP, other ethertypes), both ways (no-other-l2-traffic).
      {"drop", "inout", 1000, nullptr, {}},
  };
  return kRules;
}

}  // namespace

Result<std::string> build_guest_filter_xml(std::string_view uuid) {
  detail::XmlWriter w;
  w.start("filter").attr("name", kGuestFilterName).attr("chain", "root");
  if (!uuid.empty()) w.element("uuid", uuid);
  for (const Rule& r : rules()) {
    w.start("rule")
        .attr("action", r.action)
        .attr("direction", r.direction)
        .attr("priority", static_cast<long long>(r.priority));
    if (r.element != nullptr) {
      w.start(r.element);
      for (const auto& [k, v] : r.attrs) w.attr(k, v);
      w.end();
    }
    w.end();
  }
  w.end();
  return w.finish();
}

Status ensure_guest_filter(const Connection& connection) {
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection.get());
  const std::string name(kGuestFilterName);
  std::string uuid;
  NwFilterHandle existing(virNWFilterLookupByName(conn.get(), name.c_str()));
  if (existing) {
    char buf[VIR_UUID_STRING_BUFLEN] = {};
    if (virNWFilterGetUUIDString(existing.get(), buf) < 0) {
      return libvirt_error("read the nwfilter's UUID", name);
    }
    uuid = buf;
  } else {
    Status s = libvirt_error("look up nwfilter", name);
    if (s.code() != ErrorCode::kNotFound) {
      return unavailable(
          "the host's libvirtd cannot filter guest traffic (" + s.message() +
              "): it needs its nwfilter driver and ebtables, or isolate_guests = false on the "
              "network",
          name);
    }
  }
  virResetLastError();
  ARMHIVE_ASSIGN_OR_RETURN(std::string xml, build_guest_filter_xml(uuid));
  NwFilterHandle defined(virNWFilterDefineXML(conn.get(), xml.c_str()));
  if (!defined) return libvirt_error("define nwfilter", name);
  return Status::ok();
}

}  // namespace armhive
