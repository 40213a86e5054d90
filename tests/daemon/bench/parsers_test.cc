#include <catch2/catch.hpp>

#include "daemon/bench/iperf3_parser.h"
#include "daemon/bench/stats.h"
#include "daemon/bench/zstd_parser.h"
#include "tests/daemon/bench/bench_test_util.h"

namespace armhive {
namespace {

using bench_test::read_fixture;

TEST_CASE("iperf3 parser reads per-stream and summed throughput of a real -P 4 run", "[bench]") {
  auto r = parse_iperf3_json(read_fixture("iperf3_forward_p4.json"));
  REQUIRE(r.is_ok());
  CHECK(r->version == "iperf 3.12");
  CHECK_FALSE(r->reverse);
  CHECK(r->num_streams == 4);
  CHECK(r->local_ports == std::vector<int>{5000, 5001, 5002, 5003});  // --cport 5000
  REQUIRE(r->intervals.size() == 2);
  for (const auto& iv : r->intervals) {
    REQUIRE(iv.streams.size() == 4);
    double sum = 0;
    uint64_t bytes = 0;
    for (const auto& s : iv.streams) {
      CHECK(s.bits_per_second > 0);
      CHECK(s.local_port >= 5000);
      CHECK(s.retransmits.has_value());  // the client sends: it knows its retransmits
      sum += s.bits_per_second;
      bytes += s.bytes;
    }
    CHECK(sum == Approx(iv.sum_bits_per_second).epsilon(0.005));
    CHECK(bytes == iv.sum_bytes);
  }
  CHECK(r->intervals[0].sum_bits_per_second == Approx(28359117238.192116));
  CHECK(r->intervals[0].sum_retransmits == 5);
  REQUIRE(r->streams.size() == 4);
  CHECK(r->streams[0].local_port == 5000);
  CHECK(r->sent_bytes == 7024148480ULL);
  CHECK(r->received_bytes == 7024148480ULL);
  CHECK(r->received_bits_per_second == Approx(28087998992.308357));
  CHECK(r->retransmits == 13);
  REQUIRE(r->cpu.has_value());
  CHECK(r->cpu->host_total == Approx(64.0675710948312));
  CHECK(r->cpu->remote_system == Approx(69.00035139229827));
}

TEST_CASE("iperf3 parser reads a reverse (-R) run", "[bench]") {
  auto r = parse_iperf3_json(read_fixture("iperf3_reverse_p4.json"));
  REQUIRE(r.is_ok());
  CHECK(r->reverse);
  CHECK(r->local_ports.front() == 5010);
  REQUIRE(r->intervals.size() == 2);
  CHECK_FALSE(r->intervals[0].streams[0].retransmits.has_value());  // receiver side
  CHECK(r->received_bytes == 10026155979ULL);
  CHECK(r->retransmits == 1);  // reported by the sending server in the summary
}

TEST_CASE("iperf3 parser turns errors and truncated output into clear failures", "[bench]") {
  auto refused = parse_iperf3_json(read_fixture("iperf3_refused.json"));
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == ErrorCode::kUnavailable);
  CHECK_THAT(refused.status().message(),
             Catch::Contains("unable to connect to server: Connection refused"));

  auto died = parse_iperf3_json(read_fixture("iperf3_server_died.json"));
  REQUIRE_FALSE(died.is_ok());
  CHECK_THAT(died.status().message(), Catch::Contains("Connection reset by peer"));

  auto truncated = parse_iperf3_json(read_fixture("iperf3_truncated.json"));
  REQUIRE_FALSE(truncated.is_ok());
  CHECK(truncated.status().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(truncated.status().message(), Catch::Contains("truncated"));

  CHECK_FALSE(parse_iperf3_json("").is_ok());
  CHECK_FALSE(parse_iperf3_json("iperf3: error - unable to connect").is_ok());
  // Valid JSON but no summary: an interrupted run.
  auto no_end = parse_iperf3_json(R"({"start":{},"intervals":[],"end":{}})");
  REQUIRE_FALSE(no_end.is_ok());
  CHECK_THAT(no_end.status().message(), Catch::Contains("without a summary"));
}

TEST_CASE("zstd bench parser reads the quiet and the progress forms", "[bench]") {
  auto q1 = parse_zstd_bench(read_fixture("zstd_b3_t1_quiet.out"));
  REQUIRE(q1.is_ok());
  CHECK(q1->version == "1.5.4");
  CHECK(q1->level == 3);
  CHECK(q1->input_bytes == 8388608);
  CHECK(q1->compressed_bytes == 3072896);
  CHECK(q1->compressed_bytes < q1->input_bytes);
  CHECK(q1->ratio == Approx(2.730));
  CHECK(q1->compress_mb_s == Approx(903.03));
  CHECK(q1->decompress_mb_s == Approx(5583.7));

  auto q2 = parse_zstd_bench(read_fixture("zstd_b3_t2_quiet.out"));
  REQUIRE(q2.is_ok());
  CHECK(q2->compress_mb_s == Approx(828.24));

  auto d1 = parse_zstd_bench(read_fixture("zstd_b3_t1_default.out"));
  REQUIRE(d1.is_ok());
  CHECK(d1->level == 3);
  CHECK(d1->input_bytes == 8388608);
  CHECK(d1->compressed_bytes == 3072896);
  CHECK(d1->compress_mb_s == Approx(879.6));
  CHECK(d1->decompress_mb_s == Approx(5369.9));
}

TEST_CASE("zstd bench parser fails clearly on errors and truncated output", "[bench]") {
  auto missing = parse_zstd_bench(read_fixture("zstd_missing_file.out"));
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == ErrorCode::kUnavailable);
  CHECK_THAT(missing.status().message(), Catch::Contains("Error loading files"));

  auto truncated = parse_zstd_bench(read_fixture("zstd_b3_truncated.out"));
  REQUIRE_FALSE(truncated.is_ok());
  CHECK(truncated.status().code() == ErrorCode::kInvalidArgument);
  CHECK_FALSE(parse_zstd_bench("").is_ok());
}

TEST_CASE("zstd version parser", "[bench]") {
  auto v = parse_zstd_version(read_fixture("zstd_version.out"));
  REQUIRE(v.is_ok());
  CHECK(*v == "1.5.4");
  CHECK_FALSE(parse_zstd_version("zstd: command not found").is_ok());
}

TEST_CASE("spread gives median, min/max, stddev and CV", "[bench]") {
  SampleSpread s = compute_spread({10, 12, 11, 9, 13});
  CHECK(s.n == 5);
  CHECK(s.median == 11);
  CHECK(s.min == 9);
  CHECK(s.max == 13);
  CHECK(s.mean == Approx(11));
  CHECK(s.stddev == Approx(1.5811388));
  CHECK(s.cv == Approx(1.5811388 / 11));
  CHECK(compute_spread({4, 2}).median == 3);
  CHECK(compute_spread({7}).stddev == 0);
  CHECK(compute_spread({}).n == 0);
}

}  // namespace
}  // namespace armhive
