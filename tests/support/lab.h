#pragma once

#include <filesystem>
#include <string>

#include "daemon/virt/connection.h"

namespace armhive {

// Helpers for tests run inside a lab of libvirt hosts (scripts/libvirt-lab, "e2e: lab").

// Host k's libvirt URI: its libvirtd listens on 10.79.k.2 in the host's network namespace.
std::string lab_host_uri(int k);

// Host k's libvirt URI over TLS (port 16514, mutual: the host admits only the lab's client
// certificate): pkipath is /run/armhive-lab/$ARMHIVE_LAB/pki, where the lab puts cacert.pem,
// clientcert.pem and clientkey.pem.
std::string lab_host_tls_uri(int k);

// Where host k's `host_path` (under /var/lib/libvirt/, as the host sees it) lies on this
// machine's disk: the lab binds /run/armhive-lab/$ARMHIVE_LAB/hK/lib there. REQUIREs the prefix.
std::filesystem::path lab_host_disk(int k, const std::string& host_path);

// Host k's libvirtd pid (the lab started it; tests stop and continue it to play a hung host).
// REQUIREs a pid.
int lab_libvirtd_pid(int k);

// Stops host k's libvirtd with SIGSTOP (a hung host: its guests keep running) until resume()
// or destruction, which send SIGCONT.
class LabHostStop {
 public:
  explicit LabHostStop(int k);
  ~LabHostStop();
  LabHostStop(const LabHostStop&) = delete;
  LabHostStop& operator=(const LabHostStop&) = delete;
  void resume();

 private:
  int pid_;
  bool stopped_ = true;
};

// Cleanup after a test: deletes the armhive volumes of the host's directory pool `pool` (at
// `dir` on the host) and stops the transient pool. Errors are ignored (nothing may be left to
// remove).
void drop_lab_pool(const Connection& conn, const std::string& pool, const std::string& dir);

}  // namespace armhive
