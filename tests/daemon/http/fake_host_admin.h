#pragma once

#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "daemon/http/server.h"
#include "tests/daemon/http/fake_lease_service.h"

namespace armhive {

// HttpOptions' add_host/remove_host over a FakeLeaseService, as armhived's HostAdmin answers:
// a URI containing "unreachable" is 503 naming the host with libvirt's words ("Name or service
// not known"), removing "busy" is 409 "drain it first", anything else is added to or removed
// from the service's hosts. The hooks run on the server's threads and the test reads added()
// on its own, so what they record is behind a lock (TSan sees no order through the socket).
class FakeHostAdmin {
 public:
  explicit FakeHostAdmin(FakeLeaseService& service) : service_(service) {}

  // Sets o.add_host and o.remove_host; this object must outlive the server.
  void install(HttpOptions& o);
  // The specs added so far, in order.
  std::vector<HostSpec> added() const EXCLUDES(mu_);

 private:
  FakeLeaseService& service_;
  mutable Mutex mu_;
  std::vector<HostSpec> added_ GUARDED_BY(mu_);
};

}  // namespace armhive
