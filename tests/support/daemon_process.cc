#include "tests/support/daemon_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/files.h"
#include "tests/support/instance_domains.h"
#include "tests/support/response_recorder.h"

namespace armhive {
namespace fs = std::filesystem;

DaemonProcess::DaemonProcess(std::string state_dir, std::string catalog, int port,
                             std::string pool_toml)
    : state_dir_(std::move(state_dir)),
      catalog_(std::move(catalog)),
      port_(port),
      pool_toml_(std::move(pool_toml)) {
  fs::remove_all(state_dir_);
  fs::create_directories(state_dir_);
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) kill(SIGKILL);
  // Its VMs outlive the daemon by design; they must not outlive the test.
  destroy_instance_domains(storage_pool_.empty() ? "armhive-e2e-" + std::to_string(port_)
                                                 : storage_pool_);
}

void DaemonProcess::write_config() const {
  std::string config = state_dir_ + "/armhived.toml";
  {
    std::ofstream out(config);
    out << "[server]\nbind = \"" << bind_ << "\"\nport = " << port_ << "\nbootstrap_token_file = \""
        << state_dir_ << "/admin.token\"\n\n[host]\nstate_dir = \"" << state_dir_
        << "\"\nstorage_pool = \""
        << (storage_pool_.empty() ? "armhive-e2e-" + std::to_string(port_) : storage_pool_)
        << "\"\ncatalog = \"" << catalog_ << "\"\n"
        << host_keys_ << "\n[engine]\nreconcile_period = \"5s\"\n"
        << engine_keys_
        << "\n[[networks]]\nname = \"armhive\"\n"
           "bridge = \"ahbr0\"\ncidr = \"10.77.0.1/24\"\ndhcp_start = \"10.77.0.10\"\n"
           "dhcp_end = \"10.77.0.250\"\n\n"
        << pool_toml_;
  }
}

Status DaemonProcess::reload(std::string pool_toml) {
  if (pid_ <= 0) return unavailable("armhived is not running");
  pool_toml_ = std::move(pool_toml);
  write_config();
  if (::kill(pid_, SIGHUP) != 0) return unavailable("cannot signal armhived");
  return Status::ok();
}

Status DaemonProcess::start(std::chrono::seconds timeout) {
  const std::string config = state_dir_ + "/armhived.toml";
  write_config();
  const char* build = std::getenv("ARMHIVE_BUILD_DIR");
  std::string binary = std::string(build ? build : ".") + "/daemon/armhived";
  std::string log_path = state_dir_ + "/armhived.log";
  pid_ = ::fork();
  if (pid_ < 0) return internal_error("fork failed");
  if (pid_ == 0) {
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl(binary.c_str(), binary.c_str(), "--config", config.c_str(), "--verbose", nullptr);
    ::_exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return unavailable("armhived exited during start-up: " + log());
    }
    if (token_.empty() && fs::exists(state_dir_ + "/admin.token")) {
      token_ = read_file(state_dir_ + "/admin.token");
      while (!token_.empty() && (token_.back() == '\n' || token_.back() == ' ')) token_.pop_back();
    }
    if (!token_.empty()) {
      auto c = client();
      if (c && c->health().is_ok()) return Status::ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return Status(ErrorCode::kTimeout, "armhived did not answer /healthz: " + log());
}

void DaemonProcess::kill(int signal) {
  if (pid_ <= 0) return;
  ::kill(pid_, signal);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

void DaemonProcess::signal_only(int signal) {
  if (pid_ > 0) ::kill(pid_, signal);
}

int DaemonProcess::wait_exit() {
  if (pid_ <= 0) return -1;
  int status = 0;
  if (::waitpid(pid_, &status, 0) != pid_) return -1;
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::unique_ptr<Client> DaemonProcess::client() const { return client_with(token_); }

std::string DaemonProcess::full_log() const { return read_file(state_dir_ + "/armhived.log"); }

std::unique_ptr<Client> DaemonProcess::client_with(const std::string& token) const {
  ClientOptions o;
  o.server = "http://127.0.0.1:" + std::to_string(port_);
  o.token = token;
  o.timeout = std::chrono::seconds(60);
  o.on_response = [](const ClientExchange& x) {
    record_response(x.method, x.path, x.status, x.content_type, x.body);
  };
  auto c = Client::create(o);
  if (!c.is_ok()) return nullptr;
  return std::move(c).value();
}

std::string DaemonProcess::log() const {
  std::string l = read_file(state_dir_ + "/armhived.log");
  return l.size() > 4000 ? l.substr(l.size() - 4000) : l;
}

pid_t qemu_pid(const std::string& domain) {
  std::string text = read_file("/run/libvirt/qemu/" + domain + ".pid");
  if (text.empty()) return -1;
  return static_cast<pid_t>(std::stol(text));
}

std::vector<std::string> thread_affinities(pid_t pid, const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::string comm = read_file(task.path().string() + "/comm");
    if (comm.rfind(prefix, 0) != 0) continue;
    std::istringstream status(read_file(task.path().string() + "/status"));
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        std::string v = line.substr(line.find(':') + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        out.push_back(v);
      }
    }
  }
  return out;
}

}  // namespace armhive
