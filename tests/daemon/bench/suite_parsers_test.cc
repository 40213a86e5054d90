#include <catch2/catch.hpp>
#include <string>

#include "daemon/bench/fio_parser.h"
#include "daemon/bench/openssl_parser.h"
#include "daemon/bench/stream_parser.h"
#include "tests/daemon/bench/bench_test_util.h"

namespace armhive {
namespace {

using bench_test::read_fixture;

std::string replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

TEST_CASE("armhive-stream output of a real aarch64 run is read with its settings", "[bench]") {
  auto r = parse_stream_output(read_fixture("stream_t2.out"));
  REQUIRE(r.is_ok());
  CHECK(r->version == "1");
  CHECK(r->compiler == "gcc 12.2.0");
  CHECK(r->flags == "-O2 -static -pthread");
  CHECK(r->threads == 2);
  CHECK(r->iterations == 2);
  CHECK(r->array_elements == 1000000);
  CHECK(r->array_bytes == 8000000);
  CHECK(r->copy_mb_s > 0);
  CHECK(r->triad_mb_s > 0);
}

TEST_CASE("armhive-stream parser rejects hostile and truncated output", "[bench]") {
  const std::string good = read_fixture("stream_t2.out");
  std::string copy_line = good.substr(good.find("copy_mb_s "));
  copy_line = copy_line.substr(0, copy_line.find('\n'));

  SECTION("truncated before the validation line") {
    auto r = parse_stream_output(good.substr(0, good.find("triad_mb_s")));
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().message().find("truncated") != std::string::npos);
  }
  SECTION("validation failed") {
    auto r = parse_stream_output(replace(good, "validation ok", "validation failed 1e-3"));
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInternal);
  }
  for (const char* bad : {"copy_mb_s nan", "copy_mb_s -5.0", "copy_mb_s 1e12", "copy_mb_s fast",
                          "copy_mb_s 0.0", "copy_mb_s inf", "copy_mb_s"}) {
    SECTION(std::string("bad value: ") + bad) {
      auto r = parse_stream_output(replace(good, copy_line, bad));
      REQUIRE_FALSE(r.is_ok());
      CHECK(r.status().field() == "memory.copy_mb_s");
    }
  }
  SECTION("array size that disagrees with the element count") {
    auto r = parse_stream_output(replace(good, "array_bytes 8000000", "array_bytes 8000008"));
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "memory.array_bytes");
  }
  SECTION("a repeated key") {
    auto r = parse_stream_output(copy_line + "\n" + good);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "memory.copy_mb_s");
  }
  SECTION("garbage") {
    CHECK_FALSE(parse_stream_output("\x01\x02 garbage\nvalidation ok\n").is_ok());
    CHECK_FALSE(parse_stream_output("").is_ok());
  }
  CHECK(parse_stream_version("armhive-stream 1 (gcc 12.2.0, -O2 -static -pthread)\n").value() ==
        "armhive-stream 1 (gcc 12.2.0, -O2 -static -pthread)");
  CHECK_FALSE(parse_stream_version("sh: armhive-stream: not found").is_ok());
}

TEST_CASE("openssl speed (3.0 format) single-process RSA table", "[bench]") {
  auto r = parse_openssl_speed(read_fixture("openssl_speed_rsa2048_x86.out"));
  REQUIRE(r.is_ok());
  CHECK(r->version == "3.0.19");
  CHECK(r->processes == 1);
  REQUIRE(r->rsa.size() == 1);
  CHECK(r->rsa[0].bits == 2048);
  CHECK(r->rsa[0].sign_per_s == Approx(4096.4));
  CHECK(r->rsa[0].verify_per_s == Approx(61519.2));
}

TEST_CASE("openssl speed -multi 2 on aarch64: the parent's summed table", "[bench]") {
  auto r = parse_openssl_speed(read_fixture("openssl_speed_multi2_aarch64_user.out"));
  REQUIRE(r.is_ok());
  CHECK(r->version == "3.0.22");
  CHECK(r->processes == 2);
  REQUIRE(r->rsa.size() == 2);
  CHECK(r->rsa[0].bits == 2048);
  CHECK(r->rsa[1].bits == 4096);
  CHECK(r->rsa[0].sign_per_s == Approx(229.9));
  CHECK(r->rsa[1].verify_per_s == Approx(6404.0));
  auto x86 = parse_openssl_speed(read_fixture("openssl_speed_multi2_x86.out"));
  REQUIRE(x86.is_ok());
  CHECK(x86->processes == 2);
  CHECK(x86->rsa.size() == 2);
}

TEST_CASE("openssl speed parser rejects hostile and truncated output", "[bench]") {
  const std::string good = read_fixture("openssl_speed_rsa2048_x86.out");
  const std::string row = "rsa 2048 bits 0.000244s 0.000016s   4096.4  61519.2";
  REQUIRE(good.find(row) != std::string::npos);
  SECTION("truncated before the table") {
    auto r = parse_openssl_speed(good.substr(0, good.find("CPUINFO")));
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "crypto");
  }
  SECTION("header but no rows") {
    CHECK_FALSE(parse_openssl_speed(good.substr(0, good.find("rsa 2048"))).is_ok());
  }
  for (const char* bad : {"rsa 2048 bits 0.000244s 0.000016s   nan  61519.2",
                          "rsa 2048 bits 0.000244s 0.000016s   -4096.4  61519.2",
                          "rsa 2048 bits 0.000000s 0.000000s   1e300  1e300",
                          "rsa 2048 bits 0.000244s 0.000016s   9999.9  61519.2",
                          "rsa 2048 bits 0.000244s 0.000016s   4096.4",
                          "rsa 99999 bits 0.000244s 0.000016s   4096.4  61519.2"}) {
    SECTION(std::string("bad row: ") + bad) {
      auto r = parse_openssl_speed(replace(good, row, bad));
      REQUIRE_FALSE(r.is_ok());
      CHECK(r.status().field().rfind("crypto", 0) == 0);
    }
  }
  SECTION("a key size twice") {
    CHECK_FALSE(parse_openssl_speed(replace(good, row, row + "\n" + row)).is_ok());
  }
  CHECK(parse_openssl_version(read_fixture("openssl_version.out")).value() == "3.0.22");
  CHECK_FALSE(
      parse_openssl_version("OpenSSL 3.0.22 1 Jul 2026 (Library: OpenSSL 3.0.11 1 Jan)").is_ok());
  CHECK_FALSE(parse_openssl_version("openssl: not found").is_ok());
}

TEST_CASE("fio JSON of real aarch64 runs: sequential write and 4 KiB random read", "[bench]") {
  auto w = parse_fio_json(read_fixture("fio_seqwrite_aarch64_user.json"));
  REQUIRE(w.is_ok());
  CHECK(w->version == "fio-3.33");
  REQUIRE(w->jobs.size() == 1);
  CHECK(w->jobs[0].direction == "write");
  CHECK(w->jobs[0].block_bytes == 1048576);
  CHECK(w->jobs[0].direct);
  CHECK(w->jobs[0].size == "16M");
  CHECK(w->jobs[0].io_bytes == 16777216);
  CHECK(w->jobs[0].bw_bytes_per_s == Approx(1290555076));
  auto rr = parse_fio_json(read_fixture("fio_randread_aarch64_user.json"));
  REQUIRE(rr.is_ok());
  CHECK(rr->jobs[0].direction == "read");
  CHECK(rr->jobs[0].block_bytes == 4096);
  CHECK(rr->jobs[0].iops == Approx(17523.238381));
  REQUIRE(rr->jobs[0].clat_p99_us.has_value());
  CHECK(*rr->jobs[0].clat_p99_us > 0);
}

TEST_CASE("fio parser rejects failed jobs, truncated and hostile JSON", "[bench]") {
  SECTION("a job fio reports as failed (libaio without io_setup)") {
    auto r = parse_fio_json(read_fixture("fio_libaio_enosys.json"));
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kUnavailable);
    CHECK(r.status().message().find("error 38") != std::string::npos);
  }
  const std::string good = read_fixture("fio_randread_aarch64_user.json");
  SECTION("truncated") {
    auto r = parse_fio_json(good.substr(0, good.size() / 2));
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "storage");
  }
  SECTION("warnings before the JSON are skipped") {
    CHECK(parse_fio_json("fio: some warning\n" + good).is_ok());
  }
  SECTION("no JSON at all") { CHECK_FALSE(parse_fio_json("fio: command not found").is_ok()); }
  SECTION("a negative bandwidth") {
    auto r = parse_fio_json(replace(good, "\"bw_bytes\" : 71775184", "\"bw_bytes\" : -71775184"));
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "storage.randread.read.bw_bytes");
  }
  SECTION("an absurd bandwidth") {
    auto r = parse_fio_json(replace(good, "\"bw_bytes\" : 71775184", "\"bw_bytes\" : 1e18"));
    REQUIRE_FALSE(r.is_ok());
  }
  SECTION("a bandwidth that contradicts io_bytes / runtime") {
    auto r = parse_fio_json(replace(good, "\"bw_bytes\" : 71775184", "\"bw_bytes\" : 91775184"));
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "storage.randread.read.bw_bytes");
  }
  SECTION("IOPS that contradict the block size") {
    auto r = parse_fio_json(replace(good, "\"iops\" : 17523.238381", "\"iops\" : 1752.238381"));
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "storage.randread.read.iops");
  }
  SECTION("a string where a number belongs") {
    auto r = parse_fio_json(replace(good, "\"runtime\" : 2001", "\"runtime\" : \"2001\""));
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "storage.randread.read.runtime");
  }
  SECTION("no jobs") {
    CHECK_FALSE(parse_fio_json(R"({"fio version": "fio-3.33", "jobs": []})").is_ok());
  }
  CHECK(parse_fio_size("4k") == 4096);
  CHECK(parse_fio_size("1M") == 1048576);
  CHECK(parse_fio_size("64MiB") == 64ULL << 20);
  CHECK_FALSE(parse_fio_size("4q").has_value());
  CHECK_FALSE(parse_fio_size("-4k").has_value());
  CHECK_FALSE(parse_fio_size("99999999999999g").has_value());
}

TEST_CASE("outputs captured from a tiny-image guest (e2e) parse", "[bench]") {
  auto stream = parse_stream_output(read_fixture("stream_tiny_guest.out"));
  REQUIRE(stream.is_ok());
  CHECK(stream->array_elements == 4194304);
  CHECK(stream->threads == 2);
  auto single = parse_openssl_speed(read_fixture("openssl_speed_tiny_guest.out"));
  REQUIRE(single.is_ok());
  CHECK(single->version == "3.0.22");
  CHECK(single->processes == 1);
  REQUIRE(single->rsa.size() == 1);
  auto multi = parse_openssl_speed(read_fixture("openssl_speed_multi2_tiny_guest.out"));
  REQUIRE(multi.is_ok());
  CHECK(multi->processes == 2);
  CHECK(multi->rsa.size() == 2);
  auto fio = parse_fio_json(read_fixture("fio_randread_tiny_guest.json"));
  REQUIRE(fio.is_ok());
  CHECK(fio->jobs[0].ioengine == "libaio");  // io_setup works in a real guest kernel
  CHECK(fio->jobs[0].iodepth == 8);
  CHECK(fio->jobs[0].iops == Approx(323.894685));
}

}  // namespace
}  // namespace armhive
