#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "api/client.h"
#include "base/result.h"

namespace armhive {

// Runs a real armhived as a child process for end-to-end tests: writes its config, starts it,
// waits for /healthz, hands out an admin API client, and kills it (SIGTERM or SIGKILL).
class DaemonProcess {
 public:
  // `state_dir` is wiped and created; `pool_toml` is appended to the generated config.
  DaemonProcess(std::string state_dir, std::string catalog, int port, std::string pool_toml);
  ~DaemonProcess();  // SIGKILL if still running

  // The API's listen address (default 127.0.0.1); set before start().
  void set_bind(std::string address) { bind_ = std::move(address); }
  // Extra `key = value` lines of the generated [host] table (e.g. libvirt_timeout); before start().
  void set_host_keys(std::string lines) { host_keys_ = std::move(lines); }
  // Extra lines of the generated [engine] table (e.g. min_health_interval); before start().
  void set_engine_keys(std::string lines) { engine_keys_ = std::move(lines); }
  // The libvirt storage pool, which names the armhived instance its domains belong to (default
  // armhive-e2e-PORT); instances that stand in for each other share it. Before start().
  void set_storage_pool(std::string name) { storage_pool_ = std::move(name); }
  Status start(std::chrono::seconds timeout = std::chrono::seconds(60));
  // Rewrites the configuration with `pool_toml` in place of the pools and sends SIGHUP (what
  // `systemctl reload armhived` does); the reload runs in armhived as the call returns.
  Status reload(std::string pool_toml);
  void kill(int signal);  // and reap
  // Sends `signal` without waiting (SIGSTOP, SIGCONT).
  void signal_only(int signal);
  // Waits for armhived to exit by itself: its exit status, or 128 + the signal that ended it.
  int wait_exit();
  bool running() const { return pid_ > 0; }

  std::unique_ptr<Client> client() const;
  std::unique_ptr<Client> client_with(const std::string& token) const;  // another bearer token
  const std::string& token() const { return token_; }                   // the admin secret
  std::string full_log() const;                                         // all of armhived.log
  const std::string& state_dir() const { return state_dir_; }
  std::string log() const;

 private:
  std::string state_dir_;
  std::string catalog_;
  int port_;
  std::string pool_toml_;
  std::string bind_ = "127.0.0.1";
  std::string host_keys_;
  std::string engine_keys_;
  std::string storage_pool_;
  void write_config() const;

  pid_t pid_ = -1;
  std::string token_;
};

// The QEMU process of a running domain (from libvirt's pid file), or -1.
pid_t qemu_pid(const std::string& domain);
// Cpus_allowed_list of every thread of `pid` whose name starts with `prefix`.
std::vector<std::string> thread_affinities(pid_t pid, const std::string& prefix);

}  // namespace armhive
