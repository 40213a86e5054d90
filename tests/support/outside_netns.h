#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/process_runner.h"

namespace armhive {

// The "outside" of an e2e test: a second network namespace playing the CI runner or the
// developer's laptop, linked to the test's (host) namespace by a veth pair:
//   host side  `host_if` with 10.78.0.1/24      outside  `out_if` with 10.78.0.2/24
// and a route from outside to the guests' network through the host (so "unreachable" in a
// test means the host refuses to forward, not that there is no route).
// Created by the constructor (a stale namespace of the same name is deleted first), deleted
// with everything in it by the destructor; `scripts/libvirt-sandbox down` also deletes
// "<sandbox>-out" should a test be killed.
class OutsideNamespace {
 public:
  static constexpr const char* kHostAddress = "10.78.0.1";
  static constexpr const char* kOutsideAddress = "10.78.0.2";

  // `guest_cidr`: the guests' network, routed via the host (empty: no route).
  explicit OutsideNamespace(std::string name, std::string guest_cidr = {});
  ~OutsideNamespace();
  OutsideNamespace(const OutsideNamespace&) = delete;
  OutsideNamespace& operator=(const OutsideNamespace&) = delete;

  const std::string& name() const { return name_; }
  // Runs argv inside the namespace and waits.
  ProcessResult run(std::vector<std::string> argv,
                    std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  // Starts argv inside the namespace in the background (stdout+stderr to `log`); the
  // destructor kills what is still running.
  pid_t spawn(std::vector<std::string> argv, const std::string& log);
  // Whether the background process has exited (reaps it).
  bool exited(pid_t pid);
  void kill(pid_t pid);

 private:
  std::string name_;
  std::vector<pid_t> children_;
};

}  // namespace armhive
