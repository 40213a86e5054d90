// LeaseEngine's guest file transfer (`armhive cp`): the pool's policy, then the hypervisor.
#include "daemon/core/file_policy.h"
#include "daemon/engine/lease_engine.h"

namespace armhive {

Result<GuestFileTransfer> LeaseEngine::put_file(const std::string& lease_id,
                                                const GuestFilePut& put, ByteSource& source) {
  ARMHIVE_ASSIGN_OR_RETURN(LeaseVm target, lease_vm(lease_id));
  GuestFilePut checked = put;
  ARMHIVE_ASSIGN_OR_RETURN(checked.path, check_guest_path(target.pool.files, put.path));
  ARMHIVE_RETURN_IF_ERROR(check_transfer_size(target.pool.files, target.pool.name, put.size));
  Hypervisor* hv = hypervisor_of(target.lease.host);
  if (hv == nullptr) return unavailable("host " + target.lease.host + " is not driven here");
  // Off the strand, as exec(): a transfer may take minutes.
  return hv->put_file(target.lease.vm_name, checked, source);
}

Result<GuestFileTransfer> LeaseEngine::get_file(const std::string& lease_id,
                                                const std::string& path, ByteSink& sink) {
  ARMHIVE_ASSIGN_OR_RETURN(LeaseVm target, lease_vm(lease_id));
  ARMHIVE_ASSIGN_OR_RETURN(std::string checked, check_guest_path(target.pool.files, path));
  PolicyCheckedSink limited(sink, target.pool.files, target.pool.name);
  Hypervisor* hv = hypervisor_of(target.lease.host);
  if (hv == nullptr) return unavailable("host " + target.lease.host + " is not driven here");
  return hv->get_file(target.lease.vm_name, checked, limited);
}

}  // namespace armhive
