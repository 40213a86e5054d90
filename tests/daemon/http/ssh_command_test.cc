// The lease's ssh block (daemon/http/convert.h): what a client is told to run and to trust.
#include <catch2/catch.hpp>

#include "daemon/http/convert.h"

namespace armhive {
namespace {

const std::string kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL4VKYqD6zyeGmUdw5PnHb2hHd3HpM6d3ODBC8iXrGrg";

Lease ready_lease() {
  Lease l;
  l.id = "l-0123456789ab";
  l.state = LeaseState::kReady;
  l.address = "10.77.0.10";
  l.login_user = "root";
  l.host_keys = {kKey};
  return l;
}

TEST_CASE("ssh command: strict, under the lease's alias, against the lease's own file",
          "[http][ssh]") {
  CHECK(ssh_command("root", "10.77.0.10", 22, "l-0123456789ab") ==
        "ssh -o HostKeyAlias=armhive-lease-l-0123456789ab -o StrictHostKeyChecking=yes "
        "-o UserKnownHostsFile=l-0123456789ab.known_hosts root@10.77.0.10");
  // Through a forward: the port changes, the alias (and so the known_hosts lines) does not.
  CHECK(ssh_command("armhive", "armhive.example", 22001, "l-0123456789ab") ==
        "ssh -o HostKeyAlias=armhive-lease-l-0123456789ab -o StrictHostKeyChecking=yes "
        "-o UserKnownHostsFile=l-0123456789ab.known_hosts -p 22001 armhive@armhive.example");
}

TEST_CASE("ssh block: a ready lease's keys as known_hosts lines for the alias the command uses",
          "[http][ssh]") {
  auto s = ssh_dto(ready_lease());
  REQUIRE(s);
  CHECK(s->user == "root");
  CHECK(s->host == "10.77.0.10");
  CHECK(s->port == 22);
  CHECK(s->host_key_alias == "armhive-lease-l-0123456789ab");
  CHECK(s->host_keys == std::vector<std::string>{kKey});
  CHECK(s->known_hosts == "armhive-lease-l-0123456789ab " + kKey + "\n");
  CHECK(s->command.find("HostKeyAlias=" + s->host_key_alias) != std::string::npos);
  CHECK(s->command.find("UserKnownHostsFile=" + lease_known_hosts_file("l-0123456789ab")) !=
        std::string::npos);
  CHECK(to_dto(ready_lease()).ssh.has_value());
}

TEST_CASE("ssh block: none without keys to verify, nor before ready", "[http][ssh]") {
  Lease no_sshd = ready_lease();
  no_sshd.host_keys.clear();  // a pool with ssh = false
  CHECK_FALSE(ssh_dto(no_sshd));
  CHECK_FALSE(to_dto(no_sshd).ssh);
  Lease provisioning = ready_lease();
  provisioning.state = LeaseState::kProvisioning;
  CHECK_FALSE(ssh_dto(provisioning));
  Lease released = ready_lease();
  released.state = LeaseState::kReleased;
  CHECK_FALSE(ssh_dto(released));
}

}  // namespace
}  // namespace armhive
