#include "tests/support/postgres_server.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "daemon/store/pg_database.h"
#include "tests/support/files.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

std::string bindir() {
  std::string dir = env_or("ARMHIVE_PG_BINDIR", "");
  if (!dir.empty()) return dir;
  std::error_code ec;
  std::string best;
  int best_version = -1;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string name = e.path().filename().string();
    if (!fs::exists(e.path() / "bin" / "initdb")) continue;
    const int version = std::atoi(name.c_str());
    if (version > best_version) {
      best_version = version;
      best = (e.path() / "bin").string();
    }
  }
  return best;
}

// The user the server runs as: postgres when we are root (initdb refuses root), else us.
struct RunAs {
  bool change = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

Result<RunAs> run_as() {
  RunAs r;
  if (::geteuid() != 0) return r;
  const passwd* pw = ::getpwnam("postgres");
  if (pw == nullptr) {
    return not_found("running as root needs the postgres user (install postgresql-15)");
  }
  r.change = true;
  r.uid = pw->pw_uid;
  r.gid = pw->pw_gid;
  return r;
}

// Starts argv as `as`, in a session of its own, its output appended to `log`.
Result<pid_t> spawn(const std::vector<std::string>& argv, const RunAs& as, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return unavailable("fork failed", argv[0]);
  if (pid == 0) {
    ::setsid();
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    if (as.change &&
        (::setgroups(0, nullptr) != 0 || ::setgid(as.gid) != 0 || ::setuid(as.uid) != 0)) {
      ::_exit(126);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

Status run(const std::vector<std::string>& argv, const RunAs& as, const std::string& log) {
  ARMHIVE_ASSIGN_OR_RETURN(pid_t pid, spawn(argv, as, log));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return unavailable(argv[0] + " failed: " + read_file(log), log);
  }
  return Status::ok();
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

std::string PostgresServer::url(const std::string& dir, const std::string& db) {
  return "host=" + dir + " dbname=" + db + " user=armhive";
}

Result<std::unique_ptr<PostgresServer>> PostgresServer::start(const std::string& dir) {
  const std::string bin = bindir();
  if (bin.empty()) {
    return not_found(
        "no PostgreSQL server binaries (install postgresql-15 or set ARMHIVE_PG_BINDIR)");
  }
  ARMHIVE_ASSIGN_OR_RETURN(RunAs as, run_as());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_empty(dir, ec)) return conflict("not an empty directory", dir);
  ::chmod(dir.c_str(), 0700);
  if (as.change && ::chown(dir.c_str(), as.uid, as.gid) != 0) {
    return unavailable("cannot give the directory to postgres", dir);
  }
  const std::string data = dir + "/data";
  const std::string log = dir + "/server.log";
  ARMHIVE_RETURN_IF_ERROR(run({bin + "/initdb", "-D", data, "-U", "armhive", "-A", "trust",
                               "--no-sync", "-E", "UTF8", "--locale=C", "--no-instructions"},
                              as, log));
  // No TCP at all (listen_addresses empty): the socket in `dir` is the only way in. Durability
  // off: a test's server lives for one run.
  ARMHIVE_ASSIGN_OR_RETURN(
      pid_t pid, spawn({bin + "/postgres", "-D", data, "-k", dir, "-c", "listen_addresses=", "-c",
                        "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200"},
                       as, log));
  std::unique_ptr<PostgresServer> server(new PostgresServer(dir, pid));
  const std::string ping = url(dir, "postgres");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!PgDatabase::connect(ping).is_ok()) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      server->pid_ = -1;
      return unavailable("postgres exited: " + read_file(log), log);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return unavailable("postgres did not accept connections within 60 s: " + read_file(log), log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return server;
}

Status PostgresServer::stop(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::ok();
  // postmaster.pid's first line is the server's PID; it is ours only if its command line names
  // this directory (a PID reused by another process is left alone).
  const std::string pid_text = read_file(dir + "/data/postmaster.pid");
  const pid_t pid = static_cast<pid_t>(std::atoi(pid_text.c_str()));
  if (pid > 0 &&
      read_file("/proc/" + std::to_string(pid) + "/cmdline").find(dir) != std::string::npos) {
    ::kill(pid, SIGINT);  // fast shutdown: clients are disconnected
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (alive(pid) && std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      (void)::waitpid(pid, &status, WNOHANG);  // reaps it when it is our child
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (alive(pid)) {
      ::kill(pid, SIGKILL);
      int status = 0;
      (void)::waitpid(pid, &status, 0);
    }
  }
  fs::remove_all(dir, ec);
  if (ec) return unavailable("cannot remove " + dir + ": " + ec.message());
  return Status::ok();
}

PostgresServer::~PostgresServer() {
  if (released_) return;
  (void)stop(dir_);
  if (pid_ > 0) {
    int status = 0;
    (void)::waitpid(pid_, &status, WNOHANG);
  }
}

namespace {

std::mutex g_local_mu;
std::unique_ptr<PostgresServer> g_local;  // stopped when the process exits

Result<std::string> server_dir() {
  std::string shared = env_or("ARMHIVE_TEST_POSTGRES", "");
  if (!shared.empty()) return shared;
  std::lock_guard<std::mutex> lock(g_local_mu);
  if (!g_local) {
    char tmpl[] = "/tmp/armhive-pg-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return unavailable("mkdtemp failed");
    ARMHIVE_ASSIGN_OR_RETURN(g_local, PostgresServer::start(tmpl));
  }
  return g_local->dir();
}

}  // namespace

Result<std::unique_ptr<TestPostgresDatabase>> TestPostgresDatabase::make() {
  static std::atomic<int> counter{0};
  ARMHIVE_ASSIGN_OR_RETURN(std::string dir, server_dir());
  const std::string name =
      "t_" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1));
  ARMHIVE_ASSIGN_OR_RETURN(auto admin, PgDatabase::connect(PostgresServer::url(dir, "postgres")));
  // `name` is ours (digits and underscores), not input: safe to place in the statement.
  ARMHIVE_RETURN_IF_ERROR(admin->execute("CREATE DATABASE " + name));
  return std::unique_ptr<TestPostgresDatabase>(
      new TestPostgresDatabase(dir, name, PostgresServer::url(dir, name)));
}

TestPostgresDatabase::~TestPostgresDatabase() {
  auto admin = PgDatabase::connect(PostgresServer::url(dir_, "postgres"));
  if (admin.is_ok()) (void)(*admin)->execute("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
}

}  // namespace armhive
