#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"

namespace armhive {

struct ProcessRequest {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH; never a shell
  std::string stdin_data;
  std::map<std::string, std::string> env;  // added to the inherited environment
  std::string cwd;                         // empty: inherit
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal or on timeout
  int signal = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
  bool ok() const { return exit_code == 0 && !timed_out; }
};

// Runs external programs. Returns an error only when the program could not be started
// (kNotFound for a missing binary); a non-zero exit is a successful run with exit_code set.
// Implementations are thread-safe.
class ProcessRunner {
 public:
  virtual ~ProcessRunner() = default;
  virtual Result<ProcessResult> run(const ProcessRequest& request) = 0;
};

// fork/exec with pipes; kills the process group on timeout. The child gets descriptors 0, 1
// and 2 only: every other one armhived holds (sockets, the database, files) is closed before
// exec, whether or not it was opened close-on-exec.
class SubprocessRunner final : public ProcessRunner {
 public:
  Result<ProcessResult> run(const ProcessRequest& request) override;
};

}  // namespace armhive
