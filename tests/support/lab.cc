#include "tests/support/lab.h"

#include <libvirt/virterror.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "daemon/virt/image_shipper.h"
#include "daemon/virt/storage.h"
#include "tests/support/files.h"

namespace armhive {

std::string lab_host_uri(int k) { return "qemu+tcp://10.79." + std::to_string(k) + ".2/system"; }

std::string lab_host_tls_uri(int k) {
  return "qemu+tls://10.79." + std::to_string(k) + ".2/system?pkipath=" +
         (std::filesystem::path("/run/armhive-lab") / env_or("ARMHIVE_LAB", "") / "pki").string();
}

std::filesystem::path lab_host_disk(int k, const std::string& host_path) {
  const std::string prefix = "/var/lib/libvirt/";
  REQUIRE(host_path.rfind(prefix, 0) == 0);
  return std::filesystem::path("/run/armhive-lab") / env_or("ARMHIVE_LAB", "") /
         ("h" + std::to_string(k)) / "lib" / host_path.substr(prefix.size());
}

int lab_libvirtd_pid(int k) {
  std::filesystem::path file = std::filesystem::path("/run/armhive-lab") /
                               env_or("ARMHIVE_LAB", "") / ("h" + std::to_string(k)) /
                               "libvirtd.pid";
  std::ifstream in(file);
  int pid = 0;
  in >> pid;
  INFO(file);
  REQUIRE(pid > 1);
  return pid;
}

LabHostStop::LabHostStop(int k) : pid_(lab_libvirtd_pid(k)) { REQUIRE(::kill(pid_, SIGSTOP) == 0); }

LabHostStop::~LabHostStop() { resume(); }

void LabHostStop::resume() {
  if (stopped_) (void)::kill(pid_, SIGCONT);
  stopped_ = false;
}

void drop_lab_pool(const Connection& conn, const std::string& pool, const std::string& dir) {
  (void)remove_unused(conn, pool, {});
  auto handle = ensure_dir_pool(conn, pool, dir);
  if (handle.is_ok() && virStoragePoolDestroy(handle->get()) < 0) virResetLastError();
}

}  // namespace armhive
