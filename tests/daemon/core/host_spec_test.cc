// Issue 33 (finding 10): which libvirt URIs armhived connects to. libvirt's client runs or reads
// whatever some URIs name (qemu+ext://?command=, ?netcat=, ?socket=, ?keyfile=) as armhived's
// user: the API may name none of it, the configuration file only files.
#include "daemon/core/host_spec.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

Status api(const std::string& uri, const std::vector<std::string>& vouched = {}) {
  return check_libvirt_uri("libvirt_uri", uri, SpecOrigin::kApi, vouched);
}
Status config(const std::string& uri) {
  return check_libvirt_uri("hosts[0].libvirt_uri", uri, SpecOrigin::kConfig);
}

TEST_CASE("libvirt URIs: local and lab transports only, nothing that runs a program",
          "[core][hosts][hostile]") {
  for (const char* ok : {"qemu:///system", "qemu:///session", "test:///default",
                         "qemu+tls://hc1.lab/system", "qemu+ssh://armhive@tx1.lab:2222/system",
                         "qemu+tcp://10.79.1.2/system", "qemu+tcp://10.79.1.2/system?no_tty=1",
                         "qemu+tls://hc1/system?name=qemu:///system&tls_priority=NORMAL"}) {
    INFO(ok);
    CHECK(api(ok).is_ok());
    CHECK(config(ok).is_ok());
  }
  for (const char* bad :
       {"qemu+ext:///system?command=/bin/sh", "qemu+ext://x/system?command=touch%20/tmp/p",
        "qemu+unix:///system?socket=/tmp/evil.sock", "qemu+ssh://h/system?netcat=/tmp/x",
        "qemu+ssh://h/system?command=id", "qemu+ssh://h/system?proxy=netcat",
        "qemu+libssh2://h/system", "qemu+libssh://h/system", "test:///etc/shadow", "xen:///system",
        "lxc:///", "qemu:///embed?root=/tmp/x", "qemu+tcp:///system",
        "qemu+tls://h/system?keyfile=/etc/shadow", "qemu+tls://h/system?pkipath=/root",
        "qemu+tls://h/system?no_verify=1", "qemu+ssh://h/system?known_hosts_verify=ignore"}) {
    INFO(bad);
    Status s = api(bad);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK(s.field() == "libvirt_uri");
  }
  // The configuration file's operator owns the machine's files: a socket, keys and PKI are
  // theirs to name; programs and other transports are not.
  CHECK(config("qemu+unix:///system?socket=/run/libvirt/alt.sock").is_ok());
  CHECK(config("qemu+tls://h/system?pkipath=/etc/armhive/pki").is_ok());
  CHECK(config("qemu+ssh://a@h/system?keyfile=/etc/armhive/id").is_ok());
  CHECK(config("qemu+ext:///system?command=/bin/sh").field() == "hosts[0].libvirt_uri");
  CHECK(config("qemu+ssh://h/system?netcat=/tmp/x").field() == "hosts[0].libvirt_uri");
}

TEST_CASE("libvirt URIs: the API may reuse the configuration's files, never name new ones",
          "[core][hosts][hostile]") {
  const std::vector<std::string> vouched = {"qemu+tls://hc1/system?pkipath=/etc/armhive/pki"};
  CHECK(api("qemu+tls://hc2/system?pkipath=/etc/armhive/pki", vouched).is_ok());
  CHECK_FALSE(api("qemu+tls://hc2/system?pkipath=/etc/armhive/pki2", vouched).is_ok());
  CHECK_FALSE(api("qemu+tls://hc2/system?pkipath=/etc/armhive/%70ki", vouched).is_ok());
  CHECK_FALSE(api("qemu+tls://hc2/system?keyfile=/etc/armhive/pki", vouched).is_ok());
}

}  // namespace
}  // namespace armhive
