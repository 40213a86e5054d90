#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "base/result.h"

namespace armhive {

// A real PostgreSQL server for tests (issue 36: "tests start their own PostgreSQL"): initdb in
// a directory of the test's, then `postgres` listening on a Unix socket in that directory only
// (no TCP port, nothing reachable from outside the machine). As root both run as the
// `postgres` user, because initdb refuses root. Binaries: $ARMHIVE_PG_BINDIR, else the newest
// /usr/lib/postgresql/N/bin (Debian's postgresql-15).
class PostgresServer {
 public:
  // Makes `dir` (which must not exist) and starts a server in it; waits until it accepts
  // connections. The server runs in its own session: it outlives this object only if
  // release() is called (the CTest fixture that shares one server between test processes).
  static Result<std::unique_ptr<PostgresServer>> start(const std::string& dir);
  // Stops the server of `dir` started by start() (by the PID in its postmaster.pid, only if
  // that process is a postgres of ours) and removes `dir`. Not an error when none runs.
  static Status stop(const std::string& dir);
  ~PostgresServer();  // stop(dir) unless released

  // A connection string to database `db` on this server (user armhive, trust auth).
  static std::string url(const std::string& dir, const std::string& db);
  const std::string& dir() const { return dir_; }
  pid_t pid() const { return pid_; }
  void release() { released_ = true; }

 private:
  PostgresServer(std::string dir, pid_t pid) : dir_(std::move(dir)), pid_(pid) {}
  std::string dir_;
  pid_t pid_;
  bool released_ = false;
};

// An empty database of its own for one test: on the run's shared server when
// $ARMHIVE_TEST_POSTGRES names its directory (the CTest fixture `postgres` starts it), else on
// a server this process starts once and stops at exit. Dropped when the object goes.
class TestPostgresDatabase {
 public:
  static Result<std::unique_ptr<TestPostgresDatabase>> make();
  ~TestPostgresDatabase();
  const std::string& url() const { return url_; }
  const std::string& dir() const { return dir_; }    // the server's (its socket is there)
  const std::string& name() const { return name_; }  // the database's

 private:
  TestPostgresDatabase(std::string dir, std::string name, std::string url)
      : dir_(std::move(dir)), name_(std::move(name)), url_(std::move(url)) {}
  std::string dir_;
  std::string name_;
  std::string url_;
};

}  // namespace armhive
