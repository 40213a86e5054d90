#include "daemon/http/context.h"

namespace armhive {

void ServerContext::audit_action(const TokenInfo& who, std::string_view action,
                                 const std::string& lease_id, const std::string& detail) {
  Status s = audit.record(who.name, action, lease_id, detail);
  if (!s.is_ok()) log("audit: cannot record " + std::string(action) + ": " + s.to_string());
}

Result<Lease> ServerContext::visible_lease(const TokenInfo& who, const std::string& id) {
  auto lease = leases.get_lease(id);
  if (!lease.is_ok()) return lease.status();
  if (!is_admin(who) && lease->owner != who.name) return not_found("no lease \"" + id + "\"");
  return lease;
}

}  // namespace armhive
