#include "tests/support/faulty_store.h"

namespace armhive {

std::optional<Status> FaultyStore::fault(std::string_view method) {
  if (on_call) on_call(method);
  return plan_.on_call(method);
}

#define ARMHIVE_FAULT(method) \
  if (auto f = fault(method)) return *f

Status FaultyStore::insert(const Lease& lease) {
  ARMHIVE_FAULT("store.insert");
  return inner_.insert(lease);
}
Status FaultyStore::update(const Lease& lease) {
  ARMHIVE_FAULT("store.update");
  return inner_.update(lease);
}
Result<std::optional<Lease>> FaultyStore::find(const std::string& id) {
  ARMHIVE_FAULT("store.find");
  return inner_.find(id);
}
Result<std::optional<Lease>> FaultyStore::find_by_idempotency_key(const std::string& owner,
                                                                  const std::string& key) {
  ARMHIVE_FAULT("store.find_by_idempotency_key");
  return inner_.find_by_idempotency_key(owner, key);
}
Result<std::vector<Lease>> FaultyStore::list(const LeaseFilter& filter) {
  ARMHIVE_FAULT("store.list");
  return inner_.list(filter);
}
Result<std::vector<Lease>> FaultyStore::active() {
  ARMHIVE_FAULT("store.active");
  return inner_.active();
}
Status FaultyStore::put_vm(const VmRecord& vm) {
  ARMHIVE_FAULT("store.put_vm");
  return inner_.put_vm(vm);
}
Status FaultyStore::delete_vm(const std::string& name) {
  ARMHIVE_FAULT("store.delete_vm");
  return inner_.delete_vm(name);
}
Result<std::vector<VmRecord>> FaultyStore::vms() {
  ARMHIVE_FAULT("store.vms");
  return inner_.vms();
}

Result<std::map<std::string, HostHealthTracker::Admin>> FaultyStore::host_admin() {
  ARMHIVE_FAULT("store.host_admin");
  return inner_.host_admin();
}
Status FaultyStore::put_host_admin(const std::string& host, HostHealthTracker::Admin admin) {
  ARMHIVE_FAULT("store.put_host_admin");
  return inner_.put_host_admin(host, admin);
}

#undef ARMHIVE_FAULT

}  // namespace armhive
