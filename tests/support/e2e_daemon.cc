#include "tests/support/e2e_daemon.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "base/process_runner.h"

namespace armhive {

namespace fs = std::filesystem;

std::string make_ssh_key(const std::string& dir) {
  SubprocessRunner run;
  fs::remove(dir + "/id_ed25519");
  fs::remove(dir + "/id_ed25519.pub");
  auto r = run.run({.argv = {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "e2e@armhive",
                             "-f", dir + "/id_ed25519"}});
  REQUIRE(r.is_ok());
  REQUIRE(r->ok());
  std::ifstream in(dir + "/id_ed25519.pub");
  std::string line;
  std::getline(in, line);
  return line;
}

std::set<std::string> vm_files(const std::string& state) {
  std::set<std::string> names;
  for (const char* sub : {"/vms/overlays", "/vms/domains"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(state + sub, ec)) {
      std::string n = e.path().filename().string();
      names.insert(n.substr(0, n.find('.')));
    }
  }
  return names;
}

LeaseDto lease_warm_vm(Client& api, const std::string& state_dir) {
  REQUIRE(eventually([&] { return api.pools().is_ok() && (*api.pools())[0].warm == 1; },
                     std::chrono::seconds(240)));
  LeaseCreateRequest req;
  req.pool = (*api.pools())[0].name;
  req.ssh_keys = {make_ssh_key(state_dir)};
  auto lease = api.create_lease(req);
  REQUIRE(lease.is_ok());
  REQUIRE(lease->state == "ready");
  REQUIRE(lease->vm.has_value());
  return *lease;
}

std::vector<LeaseDto> gitlab_job_leases(Client& api, const std::string& job_id, bool active) {
  LeaseQuery q;
  q.labels = {{"gitlab.job", job_id}};
  q.active = active;
  auto page = api.list_leases(q);
  REQUIRE(page.is_ok());
  return page->items;
}

}  // namespace armhive
