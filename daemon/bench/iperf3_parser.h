#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive {

// Parser for `iperf3 -J` output (tested against iperf 3.12 captures in tests/fixtures/bench).
// Pure functions; any thread.

struct IperfStreamSample {
  int socket = 0;
  int local_port = 0;  // from start.connected; 0 if unknown
  uint64_t bytes = 0;
  double bits_per_second = 0;
  std::optional<int64_t> retransmits;  // only on the sending side
  std::optional<int> pmtu;             // path MTU seen by the sender (Linux), if reported
};

struct IperfInterval {
  double start = 0;  // seconds since the test start
  double end = 0;
  std::vector<IperfStreamSample> streams;
  uint64_t sum_bytes = 0;
  double sum_bits_per_second = 0;
  std::optional<int64_t> sum_retransmits;
};

struct IperfStreamTotal {
  int socket = 0;
  int local_port = 0;
  uint64_t sender_bytes = 0;
  uint64_t receiver_bytes = 0;
  double sender_bits_per_second = 0;
  double receiver_bits_per_second = 0;
  std::optional<int64_t> retransmits;
};

struct IperfCpu {
  double host_total = 0, host_user = 0, host_system = 0;
  double remote_total = 0, remote_user = 0, remote_system = 0;
};

struct IperfResult {
  std::string version;   // "iperf 3.12"
  bool reverse = false;  // -R: the server (remote) sent
  int num_streams = 0;
  double duration_s = 0;
  std::vector<int> local_ports;
  std::vector<IperfInterval> intervals;
  std::vector<IperfStreamTotal> streams;
  uint64_t sent_bytes = 0;
  uint64_t received_bytes = 0;
  double sent_bits_per_second = 0;
  double received_bits_per_second = 0;
  std::optional<int64_t> retransmits;
  std::optional<IperfCpu> cpu;  // cpu_utilization_percent (host = the client side)
};

// kUnavailable when iperf3 reported an error ("iperf3: unable to connect to server: ...") or
// the test ended without a summary; kInvalidArgument when the text is not iperf3 JSON
// (e.g. truncated output).
Result<IperfResult> parse_iperf3_json(std::string_view text);

}  // namespace armhive
