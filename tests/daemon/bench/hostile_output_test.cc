// Guest and tool output is data, never trusted: every hostile variant gives a clear error, never
// an exception, a crash or a figure outside the plausible range.
#include <catch2/catch.hpp>
#include <string>

#include "daemon/bench/iperf3_parser.h"
#include "daemon/bench/zstd_parser.h"
#include "tests/daemon/bench/bench_test_util.h"

namespace armhive {
namespace {

using bench_test::read_fixture;

const std::string kHeader = "bench 1.5.4 : input 8388608 bytes, 1 seconds, 0 KB blocks\n";

Status zstd_error(const std::string& text) {
  auto r = parse_zstd_bench(text);
  REQUIRE_FALSE(r.is_ok());
  return r.status();
}

TEST_CASE("zstd parser: a valid header then dots is an error, not a throw", "[bench][hostile]") {
  // The line that made std::stod throw on the benchmark thread (std::terminate).
  Status s = zstd_error(kHeader + "-3 1 (.) . MB/s . MB/s\n");
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("not a decimal number"));
}

TEST_CASE("zstd parser: garbage, huge, negative, inconsistent, truncated, empty",
          "[bench][hostile]") {
  CHECK_THAT(zstd_error(kHeader + "-3 3072896 (2.730) 1.2.3 MB/s 5583.7 MB/s f\n").message(),
             Catch::Contains("compression speed"));
  CHECK_THAT(
      zstd_error(kHeader + "-3 99999999999999999999999 (2.730) 903 MB/s 5583.7 MB/s f\n").message(),
      Catch::Contains("too large"));
  CHECK_THAT(zstd_error(kHeader + "-3 3072896 (2.730) 99999999999 MB/s 5583.7 MB/s f\n").message(),
             Catch::Contains("outside the plausible range"));
  CHECK_THAT(zstd_error(kHeader + "-3 3072896 (2.730) 0.0 MB/s 5583.7 MB/s f\n").message(),
             Catch::Contains("outside the plausible range"));
  CHECK_THAT(zstd_error(kHeader + "-3 3072896 (9.999) 903 MB/s 5583.7 MB/s f\n").message(),
             Catch::Contains("inconsistent"));
  CHECK_THAT(zstd_error(kHeader + "-99 3072896 (2.730) 903 MB/s 5583.7 MB/s f\n").message(),
             Catch::Contains("zstd level"));
  CHECK_THAT(zstd_error("bench 1.5.4 : input 0 bytes\n-3 1 (0.000) 1 MB/s 1 MB/s f\n").message(),
             Catch::Contains("input size"));
  // Negative numbers, NaN and inf never match the result forms: no result at all.
  CHECK_THAT(zstd_error(kHeader + "-3 -3072896 (2.730) -903 MB/s -5583.7 MB/s f\n").message(),
             Catch::Contains("no result"));
  CHECK_THAT(zstd_error(kHeader + "-3 3072896 (nan) nan MB/s inf MB/s f\n").message(),
             Catch::Contains("no result"));
  CHECK_THAT(zstd_error(kHeader).message(), Catch::Contains("no result"));
  CHECK_THAT(zstd_error("").message(), Catch::Contains("no result"));
  CHECK_THAT(zstd_error(std::string(5 << 20, ' ')).message(), Catch::Contains("implausibly long"));
  // Long lines are skipped (never handed to the recursive regex engine).
  CHECK_THAT(zstd_error(kHeader + std::string(100000, '1') + " MB/s\n").message(),
             Catch::Contains("no result"));
  // Binary garbage.
  std::string noise;
  for (int i = 0; i < 4096; ++i) noise += static_cast<char>((i * 7919) & 0xff);
  CHECK_FALSE(parse_zstd_bench(noise).is_ok());
  CHECK_FALSE(parse_zstd_version(noise).is_ok());
}

TEST_CASE("zstd parser: honest output still parses after the checks", "[bench][hostile]") {
  CHECK(parse_zstd_bench(read_fixture("zstd_b3_t1_quiet.out")).is_ok());
  CHECK(parse_zstd_bench(read_fixture("zstd_b3_t1_default.out")).is_ok());
  CHECK(parse_zstd_bench(kHeader + "-3 3072896 (x2.730) 903 MB/s 5583.7 MB/s f\n").is_ok());
}

std::string iperf_with(const std::string& from, const std::string& to) {
  std::string doc = read_fixture("iperf3_forward_p4.json");
  auto at = doc.find(from);
  REQUIRE(at != std::string::npos);
  doc.replace(at, from.size(), to);
  return doc;
}

Status iperf_error(const std::string& text) {
  auto r = parse_iperf3_json(text);
  REQUIRE_FALSE(r.is_ok());
  return r.status();
}

TEST_CASE("iperf3 parser: huge, negative and mistyped numbers are rejected", "[bench][hostile]") {
  std::string doc = read_fixture("iperf3_forward_p4.json");
  REQUIRE(parse_iperf3_json(doc).is_ok());
  CHECK_THAT(iperf_error(iperf_with("\"num_streams\":\t4", "\"num_streams\":\t1e300")).message(),
             Catch::Contains("num_streams"));
  CHECK_THAT(iperf_error(iperf_with("\"num_streams\":\t4", "\"num_streams\":\t-4")).message(),
             Catch::Contains("outside the plausible range"));
  CHECK_THAT(iperf_error(iperf_with("\"num_streams\":\t4", "\"num_streams\":\t\"4\"")).message(),
             Catch::Contains("not a number"));
  CHECK_THAT(iperf_error(iperf_with("\"socket\":\t5", "\"socket\":\t1e300")).message(),
             Catch::Contains("socket"));
  CHECK_THAT(iperf_error(iperf_with("7102874579.791007", "1e300")).message(),
             Catch::Contains("intervals.streams.bits_per_second"));
  CHECK_THAT(iperf_error(iperf_with("888668160", "-888668160")).message(),
             Catch::Contains("intervals.streams.bytes"));
  CHECK_THAT(iperf_error(iperf_with("\"pmtu\":\t65535", "\"pmtu\":\t1e19")).message(),
             Catch::Contains("pmtu"));
  CHECK_FALSE(parse_iperf3_json("{\"start\":[],\"intervals\":{},\"end\":1}").is_ok());
  CHECK_FALSE(parse_iperf3_json("[1,2,3]").is_ok());
  CHECK_FALSE(parse_iperf3_json("{\"start\":{}}").is_ok());
  CHECK_FALSE(parse_iperf3_json(std::string(100000, '[')).is_ok());
}

}  // namespace
}  // namespace armhive
