#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/core/clock.h"
#include "daemon/core/list_limit.h"

namespace armhive {

// Per-VM benchmarks as the HTTP API and the engine see them.
//
// A run measures one leased VM: "network" (iperf3 server in the guest, client on the host,
// both directions) and/or "compression" (zstd -b in the guest, single- and multi-threaded).
// The report JSON schema is documented in daemon/bench/README.md.
//
// Threading: every BenchmarkService method is thread-safe and returns without waiting for
// the benchmark itself (start() queues it; poll get()). Authorization is the caller's job.

inline constexpr std::string_view kSuiteNetwork = "network";
inline constexpr std::string_view kSuiteCompression = "compression";
inline constexpr std::string_view kSuiteMemory = "memory";    // armhive-stream (STREAM-style)
inline constexpr std::string_view kSuiteCrypto = "crypto";    // openssl speed rsa2048 rsa4096
inline constexpr std::string_view kSuiteStorage = "storage";  // fio, direct I/O

struct NetworkOptions {
  int streams = 4;              // iperf3 -P, 1..128
  int duration_s = 5;           // iperf3 -t, 1..600
  int interval_s = 1;           // iperf3 -i, 1..60 and <= duration_s
  int cport = 5000;             // iperf3 --cport (first client port), 1024..65535-streams
  bool both_directions = true;  // also run with -R (guest -> host)
  std::vector<int> mtus;        // 576..9216 each, at most 4; empty = the VM's configured MTU
};

struct CompressionOptions {
  int level = 3;             // zstd -b<level>, 1..19
  int repeats = 5;           // independent zstd runs per thread count, 1..50
  bool multi_thread = true;  // also run with -T<vcpus>
};

struct MemoryOptions {
  int array_mib = 128;       // MiB per array (three arrays), 8..4096; >= 4x the last-level cache
  int iterations = 5;        // armhive-stream -i: timed passes, the best counts; 1..100
  int repeats = 3;           // independent runs per thread count, 1..50
  bool multi_thread = true;  // also on all vCPUs
};

struct CryptoOptions {
  int seconds = 1;           // openssl speed -seconds per operation and key size, 1..30
  int repeats = 3;           // 1..50
  bool multi_thread = true;  // also `-multi <vcpus>`
};

struct StorageOptions {
  int file_mib = 64;       // the test file, 16..1024 (fits the tiny image's disk)
  int block_kib = 1024;    // sequential block size, 4..16384
  int queue_depth = 8;     // fio --iodepth (libaio), 1..256
  int random_seconds = 5;  // 4 KiB random read runs this long (time based), 1..120
  int repeats = 3;         // 1..50
};

struct BenchmarkRequest {
  std::string lease_id;             // from the URL path
  std::string owner;                // the authenticated caller
  std::vector<std::string> suites;  // "network", "compression", "memory", "crypto", "storage";
                                    // empty = network and compression
  NetworkOptions network;
  CompressionOptions compression;
  MemoryOptions memory;
  CryptoOptions crypto;
  StorageOptions storage;
};

enum class BenchmarkState { kQueued, kRunning, kSucceeded, kFailed };

std::string_view to_string(BenchmarkState s);
std::optional<BenchmarkState> benchmark_state_from_string(std::string_view s);

struct BenchmarkRun {
  std::string id;  // "b-" + 12 hex
  std::string lease_id;
  std::string owner;
  std::string vm_name;
  std::string pool;
  std::string host;
  BenchmarkState state = BenchmarkState::kQueued;
  std::string error;  // set when failed: what failed and why, for humans
  TimePoint created_at;
  TimePoint finished_at;  // epoch while not finished
  BenchmarkRequest request;
  nlohmann::json report =
      nlohmann::json::object();  // README.md "Report JSON"; partial while running
};

struct BenchmarkFilter {
  std::optional<std::string> owner;
  std::optional<std::string> lease_id;
  std::optional<std::string> vm_name;
  std::optional<std::string> pool;
  std::optional<std::string> host;
  std::optional<BenchmarkState> state;
  size_t limit = kDefaultListLimit;  // newest first
};

class BenchmarkService {
 public:
  virtual ~BenchmarkService() = default;

  // Validates the request (kInvalidArgument naming the field), resolves the lease (kNotFound /
  // kConflict when it has no ready VM) and queues the run; returns it in state queued. Runs on
  // one VM execute one at a time, in order.
  virtual Result<BenchmarkRun> start(const BenchmarkRequest& request) = 0;
  virtual Result<BenchmarkRun> get(const std::string& id) = 0;  // kNotFound
  virtual std::vector<BenchmarkRun> list(const BenchmarkFilter& filter) = 0;

  // Self-contained HTML (inline SVG, no scripts, no external assets): one id = the run's
  // report, several = a comparison page. kNotFound for an unknown id, kInvalidArgument for none.
  virtual Result<std::string> report_html(const std::vector<std::string>& ids) = 0;
  // One row per (run, suite, direction/threads, mtu) measurement; header row first.
  virtual Result<std::string> report_csv(const std::vector<std::string>& ids) = 0;
  // `armhive bench compare A B ...`: README.md "Comparison JSON" (metrics per run and ratios
  // against the first id).
  virtual Result<nlohmann::json> compare(const std::vector<std::string>& ids) = 0;
};

// JSON forms (README.md). The request body of POST /v1/leases/{id}/benchmarks is
// {"suites": [...], "network": {...}, "compression": {...}, "memory": {...}, "crypto": {...},
// "storage": {...}}; every member is optional, unknown
// members are rejected. lease_id and owner are not read from the body: the caller sets them.
// Errors are kInvalidArgument with field set, e.g. "network.streams".
Result<BenchmarkRequest> benchmark_request_from_json(const nlohmann::json& body);
nlohmann::json to_json(const BenchmarkRequest& request);             // without lease_id/owner
Status validate_benchmark_request(const BenchmarkRequest& request);  // also checks lease_id is set
// The memory suite's arrays must be well above the last-level cache or it measures the cache:
// kInvalidArgument naming memory.array_mib when array_mib MiB < 4 x llc_bytes (0: unknown).
Status validate_memory_array(const MemoryOptions& options, uint64_t llc_bytes);

nlohmann::json to_json(const BenchmarkRun& run);
Result<BenchmarkRun> benchmark_run_from_json(const nlohmann::json& j);

}  // namespace armhive
