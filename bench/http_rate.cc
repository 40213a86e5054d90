// armhive-bench-http-rate: an open-loop load generator for one HTTP/1.1 endpoint on keep-alive
// connections (BENCHMARKS.md "API under load"; bench/http_load.py drives it).
//
// wrk is closed-loop: a connection sends its next request only when the last one is answered,
// so at saturation every latency it reports is queueing it caused itself, and a stalled request
// delays (and so hides) the requests that would have been sent behind it. Issue 17's goal is a
// latency *at* a request rate ("p99 <= 5 ms at >= 1,000 requests/s"), which needs the rate to be
// offered whatever the server does: request k is due at start + k / rate, is sent on the first
// free connection, and its latency counts from when it was due, not from when it was sent (the
// correction wrk2 makes). A request that finds every connection busy waits, and that wait is
// part of its latency.
//
// Prints one JSON object: offered and achieved rate, p50/p90/p99/p99.9/max in ms, non-2xx
// answers, how many requests waited for a free connection, connection errors, and the worst
// latency of each 100 ms of the run.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace armhive {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct Connection {
  int fd = -1;
  bool busy = false;
  SteadyClock::time_point due;
  std::string in;
};

int connect_loopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// One whole response at the front of `in`: its status code and length, or 0 if not complete.
// The server answers these endpoints with Content-Length bodies.
size_t complete_response(const std::string& in, int& status) {
  size_t end = in.find("\r\n\r\n");
  if (end == std::string::npos || in.size() < 12) return 0;
  status = std::atoi(in.c_str() + 9);
  size_t length = 0;
  std::string head = in.substr(0, end);
  std::transform(head.begin(), head.end(), head.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (size_t at = head.find("\r\ncontent-length:"); at != std::string::npos) {
    length = std::strtoul(head.c_str() + at + 17, nullptr, 10);
  }
  size_t total = end + 4 + length;
  return in.size() >= total ? total : 0;
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

int run(int port, const std::string& request, double rate, double duration, int connections) {
  std::vector<Connection> conns(static_cast<size_t>(connections));
  for (auto& c : conns) {
    c.fd = connect_loopback(port);
    if (c.fd < 0) {
      std::cerr << "http-rate: cannot connect to port " << port << "\n";
      return 1;
    }
  }
  const auto interval = std::chrono::duration<double>(1.0 / rate);
  const uint64_t total = static_cast<uint64_t>(rate * duration);
  const auto start = SteadyClock::now() + std::chrono::milliseconds(10);
  auto due = [&](uint64_t k) {
    return start + std::chrono::duration_cast<SteadyClock::duration>(interval * k);
  };
  // Nothing answered within this long after the last request was due counts as lost.
  const auto give_up = due(total) + std::chrono::seconds(10);
  std::vector<double> latencies_ms;
  latencies_ms.reserve(total);
  // The worst latency of the requests due in each 100 ms of the run: a stall shows as a spike,
  // and the spikes' spacing names the periodic work behind them.
  std::vector<double> worst_per_tenth(static_cast<size_t>(duration * 10) + 1, 0.0);
  uint64_t next = 0, non_2xx = 0, waited = 0, errors = 0;
  std::vector<pollfd> fds(conns.size());
  char buf[16384];
  for (;;) {
    auto now = SteadyClock::now();
    bool any_busy = false;
    for (auto& c : conns) {
      if (!c.busy && next < total && due(next) <= now) {
        if (now - due(next) > std::chrono::milliseconds(1)) ++waited;
        if (send(c.fd, request.data(), request.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(request.size())) {
          ++errors;
          close(c.fd);
          c.fd = connect_loopback(port);
          if (c.fd < 0) return 1;
          continue;
        }
        c.busy = true;
        c.due = due(next++);
        c.in.clear();
      }
      any_busy = any_busy || c.busy;
    }
    if (next >= total && !any_busy) break;
    if (now > give_up) break;
    bool idle_free = std::any_of(conns.begin(), conns.end(), [](auto& c) { return !c.busy; });
    auto wait = std::chrono::milliseconds(100);
    timespec ts{};
    if (next < total && idle_free) {
      auto until = due(next) - now;
      if (until < SteadyClock::duration::zero()) until = SteadyClock::duration::zero();
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(until).count();
      ts = {static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    } else {
      ts = {0, static_cast<long>(std::chrono::nanoseconds(wait).count())};
    }
    for (size_t i = 0; i < conns.size(); ++i) fds[i] = {conns[i].fd, POLLIN, 0};
    if (ppoll(fds.data(), fds.size(), &ts, nullptr) < 0) break;
    for (size_t i = 0; i < conns.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto& c = conns[i];
      ssize_t n = recv(c.fd, buf, sizeof buf, 0);
      if (n <= 0) {
        // Closed by the server: an answer lost if one was awaited.
        if (c.busy) ++errors;
        close(c.fd);
        c.fd = connect_loopback(port);
        if (c.fd < 0) return 1;
        c.busy = false;
        continue;
      }
      c.in.append(buf, static_cast<size_t>(n));
      int status = 0;
      if (size_t used = complete_response(c.in, status); used > 0 && c.busy) {
        auto done = SteadyClock::now();
        double ms = std::chrono::duration<double, std::milli>(done - c.due).count();
        latencies_ms.push_back(ms);
        size_t tenth =
            static_cast<size_t>(std::chrono::duration<double>(c.due - start).count() * 10);
        if (tenth < worst_per_tenth.size()) {
          worst_per_tenth[tenth] = std::max(worst_per_tenth[tenth], ms);
        }
        if (status < 200 || status > 299) ++non_2xx;
        c.in.erase(0, used);
        c.busy = false;
      }
    }
  }
  auto elapsed = std::chrono::duration<double>(SteadyClock::now() - start).count();
  for (auto& c : conns) close(c.fd);
  uint64_t lost = total - latencies_ms.size();
  std::sort(latencies_ms.begin(), latencies_ms.end());
  nlohmann::json out = {{"offered_per_s", rate},
                        {"requests_per_s", static_cast<double>(latencies_ms.size()) / elapsed},
                        {"requests", latencies_ms.size()},
                        {"connections", connections},
                        {"p50_ms", percentile(latencies_ms, 50)},
                        {"p90_ms", percentile(latencies_ms, 90)},
                        {"p99_ms", percentile(latencies_ms, 99)},
                        {"p999_ms", percentile(latencies_ms, 99.9)},
                        {"max_ms", latencies_ms.empty() ? 0.0 : latencies_ms.back()},
                        {"non_2xx", non_2xx},
                        {"waited_for_connection", waited},
                        {"errors", errors + lost},
                        {"worst_ms_per_100ms", worst_per_tenth}};
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace
}  // namespace armhive

int main(int argc, char** argv) {
  CLI::App app{"Open-loop HTTP load at a fixed request rate"};
  int port = 0, connections = 16;
  double rate = 1000, duration = 8;
  std::string token, method = "GET", path = "/healthz", body;
  app.add_option("--port", port, "server port on 127.0.0.1")->required();
  app.add_option("--token", token, "bearer token");
  app.add_option("--method", method);
  app.add_option("--path", path);
  app.add_option("--body", body, "JSON body");
  app.add_option("--rate", rate, "requests per second offered")->check(CLI::PositiveNumber);
  app.add_option("--duration", duration, "seconds")->check(CLI::PositiveNumber);
  app.add_option("--connections", connections)->check(CLI::Range(1, 4096));
  CLI11_PARSE(app, argc, argv);
  for (const std::string* field : {&method, &token}) {
    if (field->find_first_of("\r\n ") != std::string::npos) {
      std::cerr << "http-rate: --method and --token may not contain spaces or line breaks\n";
      return 2;
    }
  }
  if (path.find_first_of("\r\n ") != std::string::npos || path.empty() || path[0] != '/') {
    std::cerr << "http-rate: --path must start with / and contain no spaces or line breaks\n";
    return 2;
  }
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!token.empty()) request += "Authorization: Bearer " + token + "\r\n";
  if (!body.empty()) {
    request +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n" + body;
  return armhive::run(port, request, rate, duration, connections);
}
