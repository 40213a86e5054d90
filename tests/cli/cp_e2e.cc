// End-to-end, real aarch64 guest: `armhive cp` against a real armhived, as a user runs it. One
// daemon, one pool of one VM, one lease shared by every case (booting is most of the cost):
// a directory tree both ways with checksums, a large file both ways with the progress bar on a
// terminal (the CLI under a pty), the pool's size limit and path prefix refused before a byte
// is sent, and nothing left in the guest after a refused or failed copy.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>

#include "api/client.h"
#include "base/process_runner.h"
#include "base/sha256.h"
#include "tests/support/daemon_process.h"
#include "tests/support/e2e_daemon.h"
#include "tests/support/files.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr int kApiPort = 18500;
// The large file, once each way: 16 MiB by default, hundreds of 48 KiB writes and 16 reads of
// 1 MiB through the agent and many redraws of the bar, the code paths the 100 MiB takes;
// ARMHIVE_E2E_CP_MIB=100 moves the size (under TCG 0.5–0.8 MiB/s in and 1–1.7 MiB/s out
// on the shared 2-core host, BENCHMARKS.md: over three minutes of the CI budget, issue 30).
const uint64_t kBigMib = std::stoull(env_or("ARMHIVE_E2E_CP_MIB", "16"));
const uint64_t kBigBytes = kBigMib << 20;
// The pool's files.max_bytes: room for the large file, not for one byte more than this.
const uint64_t kMaxBytes = (kBigMib + 10) << 20;

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

struct Env {
  std::string cli = ARMHIVE_CLI_PATH;
  std::map<std::string, std::string> vars;
};

CliResult run_cli(const Env& env, std::vector<std::string> args) {
  args.insert(args.begin(), env.cli);
  SubprocessRunner run;
  auto r = run.run({.argv = args, .env = env.vars, .timeout = 15min});
  REQUIRE(r.is_ok());
  return {r->exit_code, r->out, r->err};
}

// The CLI with stdin, stdout and stderr on a pseudo-terminal, as a user at a shell runs it;
// returns everything it wrote there and its exit code.
CliResult run_cli_on_pty(const Env& env, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {env.cli};
  argv.insert(argv.end(), args.begin(), args.end());
  winsize ws{};
  ws.ws_col = 100;
  ws.ws_row = 30;
  int master = -1;
  pid_t pid = forkpty(&master, nullptr, nullptr, &ws);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    for (const auto& [k, v] : env.vars) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> c;
    for (const auto& a : argv) c.push_back(const_cast<char*>(a.c_str()));
    c.push_back(nullptr);
    execv(c[0], c.data());
    _exit(127);
  }
  CliResult r;
  const auto deadline = std::chrono::steady_clock::now() + 15min;
  for (;;) {
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, 1000) > 0) {
      char buf[4096];
      ssize_t n = read(master, buf, sizeof buf);
      if (n <= 0) break;  // EIO once the child and its pty side are gone
      r.out.append(buf, static_cast<size_t>(n));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      break;
    }
  }
  close(master);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

void write_bytes(const fs::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  REQUIRE(out.good());
}

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& ch : s) ch = static_cast<char>(rng());
  return s;
}

// relative path -> sha256 of every regular file under `dir`, and "DIR" for every directory.
std::map<std::string, std::string> tree_sums(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).string();
    if (e.is_directory()) {
      out[rel] = "DIR";
    } else if (e.is_regular_file()) {
      auto sum = sha256_file(e.path().string());
      REQUIRE(sum.is_ok());
      out[rel] = *sum;
    }
  }
  return out;
}

// A PUT of `bytes` bytes with `Expect: 100-continue`, over a raw socket: the answer that
// comes back before the client sent any of its body (the status line and the problem body).
std::string put_expecting_continue(int port, const std::string& token, const std::string& target,
                                   uint64_t bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const std::string head =
      "PUT " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "Authorization: Bearer " + token +
      "\r\nContent-Type: application/octet-stream\r\nContent-Length: " + std::to_string(bytes) +
      "\r\nExpect: 100-continue\r\n\r\n";
  REQUIRE(send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
    if (answer.starts_with("HTTP/1.1 100")) break;  // the server wants the body: a failure
  }
  close(fd);
  return answer;
}

// Reported, not asserted: the rate in the CLI's summary line ("... (verified), 0.4 MiB/s").
void report_rate(const std::string& what, const std::string& out) {
  const size_t at = out.find("(verified), ");
  if (at == std::string::npos) return;
  const size_t end = out.find_first_of("\r\n", at);
  std::cerr << "cp-e2e: " << what << " " << out.substr(at + 12, end - at - 12) << "\n";
}

TEST_CASE("armhive cp through the guest agent on a real guest", "[cp-e2e]") {
  const std::string state = e2e_state() + "/cp";
  std::string pool = one_core_pool_toml(1, "30m");
  pool +=
      "\n[pools.files]\nmax_bytes = " + std::to_string(kMaxBytes) + "\npath_prefix = \"/root\"\n";
  DaemonProcess daemon(state, e2e_state() + "/images", kApiPort, pool);
  Status started = daemon.start();
  INFO(daemon.log());
  REQUIRE(started.is_ok());
  auto api = daemon.client();
  REQUIRE(api);
  Env env;
  env.vars = {{"ARMHIVE_SERVER", "http://127.0.0.1:" + std::to_string(kApiPort)},
              {"ARMHIVE_TOKEN", daemon.token()},
              {"HOME", state},
              {"TMPDIR", state},
              {"TERM", "xterm"},
              {"PATH", env_or("PATH", "/usr/bin:/bin")}};
  const LeaseDto lease = lease_warm_vm(*api, state);
  const std::string id = lease.id;
  const fs::path local = fs::path(state) / "local";
  fs::create_directories(local);

  // What a copy may leave in the guest besides its target: nothing (the temporary files are
  // .armhive-cp-* beside the target or in /tmp).
  auto guest_leftovers = [&] {
    auto r =
        api->exec(id, {{"/bin/sh", "-c", "ls -A /root /tmp | grep armhive-cp || true"}, "", 60});
    REQUIRE(r.is_ok());
    return r->out;
  };
  auto guest_has = [&](const std::string& path) {
    auto r = api->exec(id, {{"/bin/sh", "-c", "test -e \"$1\"", "sh", path}, "", 60});
    REQUIRE(r.is_ok());
    return r->exit_code == 0;
  };

  {
    // 1. A directory tree in and back out, byte for byte, checked in the guest too.
    {
      const fs::path tree = local / "tree";
      fs::create_directories(tree / "sub dir" / "deeper");
      fs::create_directories(tree / "empty");
      write_bytes(tree / "top.txt", "hello from the host\n");
      write_bytes(tree / "sub dir" / "binary.bin", random_bytes(300 * 1024 + 7, 1));
      write_bytes(tree / "sub dir" / "deeper" / "zero", "");
      write_bytes(tree / "sub dir" / "deeper" / "x.dat", random_bytes(4097, 2));
      auto in = run_cli(env, {"cp", tree.string(), id + ":/root/tree"});
      INFO(in.err);
      REQUIRE(in.exit_code == 0);
      CHECK(in.out.find("directory") != std::string::npos);
      CHECK(in.out.find("(verified)") != std::string::npos);
      // The guest's own checksums of what landed.
      auto sums = api->exec(
          id,
          {{"/bin/sh", "-c", "cd /root/tree && find . -type f -exec sha256sum {} \\;"}, "", 120});
      REQUIRE(sums.is_ok());
      CHECK(sums->out.find(sha256_hex("hello from the host\n") + "  ./top.txt") !=
            std::string::npos);
      CHECK(sums->out.find(sha256_hex(random_bytes(4097, 2)) + "  ./sub dir/deeper/x.dat") !=
            std::string::npos);

      const fs::path back = local / "back";
      fs::create_directories(back);
      auto out = run_cli(env, {"cp", id + ":/root/tree", back.string()});
      INFO(out.err);
      REQUIRE(out.exit_code == 0);
      CHECK(out.out.find("(verified)") != std::string::npos);
      // Without a terminal there is no bar: only the summary line.
      CHECK(out.err.find("MiB/s") == std::string::npos);
      CHECK(tree_sums(back / "tree") == tree_sums(tree));
      CHECK(guest_leftovers().empty());
    }

    // 2. A large file in and out on a terminal: the progress bar is drawn while it moves.
    {
      const fs::path big = local / "big.bin";
      write_bytes(big, random_bytes(kBigBytes, 3));
      auto big_sum = sha256_file(big.string());
      REQUIRE(big_sum.is_ok());
      auto in = run_cli_on_pty(env, {"cp", big.string(), id + ":/root/big.bin"});
      INFO(in.out);
      REQUIRE(in.exit_code == 0);
      CHECK(in.out.find("big.bin  [") != std::string::npos);
      const std::string mib = std::to_string(kBigMib) + ".0";
      CHECK(in.out.find("100%  " + mib + "/" + mib + " MiB") != std::string::npos);
      // Drawn while bytes moved, not only at the end: some redraw shows a share below 100 %.
      CHECK(in.out.find("\r") != std::string::npos);
      bool partial = false;
      for (int pct = 1; pct < 100 && !partial; ++pct) {
        partial = in.out.find("]  " + std::to_string(pct) + "%") != std::string::npos ||
                  in.out.find("]   " + std::to_string(pct) + "%") != std::string::npos;
      }
      CHECK(partial);
      CHECK(in.out.find("sha256 " + *big_sum + " (verified)") != std::string::npos);
      report_rate(std::to_string(kBigBytes >> 20) + " MiB in:", in.out);

      const fs::path back = local / "big.back";
      auto out = run_cli_on_pty(env, {"cp", id + ":/root/big.bin", back.string()});
      INFO(out.out);
      REQUIRE(out.exit_code == 0);
      CHECK(out.out.find("100%") != std::string::npos);
      report_rate(std::to_string(kBigBytes >> 20) + " MiB out:", out.out);
      auto back_sum = sha256_file(back.string());
      REQUIRE(back_sum.is_ok());
      CHECK(*back_sum == *big_sum);
      fs::remove(big);
      fs::remove(back);
      REQUIRE(api->exec(id, {{"rm", "-f", "/root/big.bin"}, "", 60}).is_ok());
      CHECK(guest_leftovers().empty());
    }

    // 3. Over the pool's limit: refused naming the limit before a byte is sent.
    {
      const fs::path huge = local / "huge.bin";
      { std::ofstream(huge, std::ios::binary); }
      fs::resize_file(huge, kMaxBytes + 1);  // sparse: no need to write 110 MiB
      auto r = run_cli(env, {"cp", huge.string(), id + ":/root/huge.bin"});
      CHECK(r.exit_code != 0);
      CHECK(r.err.find("files.max_bytes") != std::string::npos);
      CHECK(r.err.find(std::to_string(kMaxBytes)) != std::string::npos);
      // The server itself, to a client that waits for `100 Continue` before its body: 413
      // naming the limit, and no 100 ever came.
      std::string answer =
          put_expecting_continue(kApiPort, daemon.token(),
                                 "/v1/leases/" + id + "/files?path=/root/huge.bin", kMaxBytes + 1);
      CHECK(answer.starts_with("HTTP/1.1 413"));
      CHECK(answer.find("files.max_bytes") != std::string::npos);
      CHECK_FALSE(guest_has("/root/huge.bin"));
      CHECK(guest_leftovers().empty());
      fs::remove(huge);
    }

    // 4. Outside the pool's path prefix: refused naming the prefix, both ways.
    {
      const fs::path small = local / "small.txt";
      write_bytes(small, "small\n");
      auto r = run_cli(env, {"cp", small.string(), id + ":/tmp/small.txt"});
      CHECK(r.exit_code != 0);
      CHECK(r.err.find("path_prefix") != std::string::npos);
      CHECK(r.err.find("'/root'") != std::string::npos);
      CHECK_FALSE(guest_has("/tmp/small.txt"));
      auto get = run_cli(env, {"cp", id + ":/etc/passwd", (local / "passwd").string()});
      CHECK(get.exit_code != 0);
      CHECK(get.err.find("/root") != std::string::npos);
      CHECK_FALSE(fs::exists(local / "passwd"));
      // `..` cannot climb out of it.
      auto dots = run_cli(env, {"cp", small.string(), id + ":/root/../tmp/small.txt"});
      CHECK(dots.exit_code != 0);
      CHECK_FALSE(guest_has("/tmp/small.txt"));
    }

    // 5. A copy that fails midway leaves nothing in the guest: the body's sha256 is not the
    // one the request announced (the server finds it after every byte reached the guest).
    {
      const std::string data = random_bytes(200 * 1024, 4);
      auto r = api->put_file(id, "/root/mismatch.bin", false, data.size(), std::string(64, 'a'),
                             [&](uint64_t offset, size_t max) -> Result<std::string> {
                               return data.substr(offset, max);
                             });
      REQUIRE_FALSE(r.is_ok());
      CHECK(r.status().field() == "sha256");
      CHECK_FALSE(guest_has("/root/mismatch.bin"));
      CHECK(guest_leftovers().empty());
      // A download of something that is not there: 404, nothing written locally.
      auto missing = run_cli(env, {"cp", id + ":/root/nothing-here", (local / "n").string()});
      CHECK(missing.exit_code != 0);
      CHECK(missing.err.find("/root/nothing-here") != std::string::npos);
      CHECK_FALSE(fs::exists(local / "n"));
    }
  }

  CHECK(api->release_lease(id).is_ok());
  daemon.kill(SIGTERM);
}

}  // namespace
}  // namespace armhive
