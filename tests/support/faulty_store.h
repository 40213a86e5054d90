#pragma once

#include <functional>

#include "daemon/core/lease_store.h"
#include "tests/support/fault_plan.h"

namespace armhive {

// A LeaseStore that forwards to another one, failing the calls its FaultPlan says (a failed
// write wrote nothing). `on_call`, when set, runs at the start of every call (tests use it to
// check which locks the caller holds). Thread-safe as the wrapped store is.
class FaultyStore final : public LeaseStore {
 public:
  FaultyStore(LeaseStore& inner, FaultPlan& plan) : inner_(inner), plan_(plan) {}

  Status insert(const Lease& lease) override;
  Status update(const Lease& lease) override;
  Result<std::optional<Lease>> find(const std::string& id) override;
  Result<std::optional<Lease>> find_by_idempotency_key(const std::string& owner,
                                                       const std::string& key) override;
  Result<std::vector<Lease>> list(const LeaseFilter& filter) override;
  Result<std::vector<Lease>> active() override;
  Status put_vm(const VmRecord& vm) override;
  Status delete_vm(const std::string& name) override;
  Result<std::vector<VmRecord>> vms() override;
  Result<std::map<std::string, HostHealthTracker::Admin>> host_admin() override;
  Status put_host_admin(const std::string& host, HostHealthTracker::Admin admin) override;

  std::function<void(std::string_view method)> on_call;  // set before use

 private:
  std::optional<Status> fault(std::string_view method);
  LeaseStore& inner_;
  FaultPlan& plan_;
};

}  // namespace armhive
