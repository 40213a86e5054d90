// The guest file transfer against the in-memory agent (tests/support/memory_guest_agent.h):
// round trips, what a failed transfer leaves behind (nothing), and hostile guests.
#include "daemon/virt/guest_file_transfer.h"

#include <catch2/catch.hpp>

#include "base/sha256.h"
#include "tests/support/memory_guest_agent.h"

namespace armhive {
namespace {

// Hands out `data` in pieces of at most `piece` bytes, as an HTTP body would arrive.
struct StringSource : ByteSource {
  std::string data;
  size_t piece = 7;
  size_t pos = 0;
  Result<std::string> read(size_t max) override {
    size_t n = std::min({max, piece, data.size() - pos});
    std::string out = data.substr(pos, n);
    pos += n;
    return out;
  }
};

struct StringSink : ByteSink {
  GuestFileKind kind = GuestFileKind::kFile;
  uint64_t size = 0;
  std::string sha256, data;
  bool begun = false;
  Status begin(GuestFileKind k, uint64_t s, const std::string& sum) override {
    begun = true;
    kind = k;
    size = s;
    sha256 = sum;
    return Status::ok();
  }
  Status write(std::string_view d) override {
    data += d;
    return Status::ok();
  }
};

FileTransferOptions small() {
  FileTransferOptions o;
  o.write_chunk = 5;  // several reads and writes for every test file
  o.read_chunk = 5;
  return o;
}

std::string pattern(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += static_cast<char>(i * 7 % 256);
  return s;
}

TEST_CASE("guest files: a file goes in and comes out byte for byte, checksummed", "[virt][files]") {
  MemoryGuestAgent guest;
  AgentCall agent = std::ref(guest);
  StringSource in;
  in.data = pattern(1000);
  GuestFilePut put{"/work/sub/data.bin", GuestFileKind::kFile, in.data.size(), sha256_hex(in.data)};
  auto up = put_guest_file(agent, put, in, small());
  REQUIRE(up.is_ok());
  CHECK(up->bytes == 1000);
  CHECK(up->sha256 == sha256_hex(in.data));
  CHECK(guest.file("/work/sub/data.bin") == in.data);
  // The temporary file beside it was moved into place: nothing else is left.
  CHECK(guest.paths() == std::set<std::string>{"/work/sub/data.bin"});
  CHECK(guest.open_handles() == 0);
  CHECK(guest.writes == 200);  // in full 5-byte chunks from 7-byte pieces, never in one piece

  StringSink out;
  auto down = get_guest_file(agent, "/work/sub/data.bin", out, small());
  REQUIRE(down.is_ok());
  CHECK(out.begun);
  CHECK(out.kind == GuestFileKind::kFile);
  CHECK(out.size == 1000);
  CHECK(out.sha256 == sha256_hex(in.data));
  CHECK(out.data == in.data);
  CHECK(guest.open_handles() == 0);
}

TEST_CASE("guest files: a directory goes out as a tar stream and back in", "[virt][files]") {
  MemoryGuestAgent guest;
  AgentCall agent = std::ref(guest);
  guest.put("/src/a.txt", "alpha");
  guest.put("/src/deep/b.txt", pattern(33));
  StringSink out;
  auto down = get_guest_file(agent, "/src", out, small());
  REQUIRE(down.is_ok());
  CHECK(out.kind == GuestFileKind::kTar);
  CHECK(down->kind == GuestFileKind::kTar);
  // The spooled tar is gone again.
  CHECK(guest.paths() == std::set<std::string>{"/src/a.txt", "/src/deep/b.txt"});

  StringSource in;
  in.data = out.data;
  auto up =
      put_guest_file(agent, {"/dst", GuestFileKind::kTar, in.data.size(), out.sha256}, in, small());
  REQUIRE(up.is_ok());
  CHECK(guest.file("/dst/a.txt") == "alpha");
  CHECK(guest.file("/dst/deep/b.txt") == pattern(33));
  CHECK(guest.paths().size() == 4);  // no spool file left
}

TEST_CASE("guest files: a failed upload leaves nothing behind", "[virt][files]") {
  MemoryGuestAgent guest;
  AgentCall agent = std::ref(guest);
  StringSource in;
  in.data = "0123456789";

  SECTION("a body shorter than its Content-Length") {
    auto r = put_guest_file(agent, {"/f", GuestFileKind::kFile, 20, ""}, in, small());
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "body");
  }
  SECTION("a sender's checksum that does not match") {
    auto r =
        put_guest_file(agent, {"/f", GuestFileKind::kFile, 10, std::string(64, 'a')}, in, small());
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().field() == "sha256");
  }
  SECTION("a tar stream that is none") {
    auto r = put_guest_file(agent, {"/d", GuestFileKind::kTar, 10, ""}, in, small());
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kUnprocessable);
  }
  CHECK(guest.file("/f") == std::nullopt);
  CHECK(guest.paths().empty());
  CHECK(guest.open_handles() == 0);
}

TEST_CASE("guest files: a hostile guest gives a clear error, never a crash",
          "[virt][files][hostile]") {
  MemoryGuestAgent guest;
  AgentCall agent = std::ref(guest);
  guest.put("/f", pattern(100));
  StringSource in;
  in.data = pattern(50);
  StringSink out;

  SECTION("a write count that is not what was sent") {
    guest.lie_write_count = true;
    auto r = put_guest_file(agent, {"/g", GuestFileKind::kFile, 50, ""}, in, small());
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("guest-file-write"));
    CHECK(guest.file("/g") == std::nullopt);
  }
  SECTION("a stored file whose checksum differs") {
    guest.wrong_sha256 = true;
    auto r = put_guest_file(agent, {"/g", GuestFileKind::kFile, 50, ""}, in, small());
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kUnavailable);
    CHECK(guest.file("/g") == std::nullopt);
  }
  SECTION("garbage base64") {
    guest.garbage_base64 = true;
    auto r = get_guest_file(agent, "/f", out, small());
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("guest-file-read"));
  }
  SECTION("a read reply far larger than the read asked for, refused before it is parsed") {
    guest.oversized_reply = true;
    auto r = get_guest_file(agent, "/f", out, small());
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("guest-file-read reply is"));
    CHECK_THAT(r.status().message(), Catch::Contains("a read of 5 bytes needs"));
    CHECK(out.data.empty());
  }
  SECTION("more bytes than it announced") {
    guest.extra_bytes = true;
    auto r = get_guest_file(agent, "/f", out, small());
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("more than the 100 bytes"));
    CHECK(out.data.size() <= 100);
  }
  SECTION("a download whose bytes do not match its checksum") {
    guest.wrong_sha256 = true;
    auto r = get_guest_file(agent, "/f", out, small());
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("other bytes than it announced"));
  }
  CHECK(guest.open_handles() == 0);
}

TEST_CASE("guest files: by default writes are 48 KiB and reads 1 MiB, in full chunks",
          "[virt][files]") {
  MemoryGuestAgent guest;
  AgentCall agent = std::ref(guest);
  StringSource in;
  in.data = pattern((3 << 20) + 17);
  in.piece = 64 * 1024;  // as the HTTP body arrives
  GuestFilePut put{"/big", GuestFileKind::kFile, in.data.size(), ""};
  auto up = put_guest_file(agent, put, in);
  REQUIRE(up.is_ok());
  CHECK(guest.writes == 65);  // 64 full writes of 48 KiB and the 17 bytes after them
  StringSink out;
  auto down = get_guest_file(agent, "/big", out);
  REQUIRE(down.is_ok());
  CHECK(out.data == in.data);
  CHECK(guest.reads == 4);  // 3 of 1 MiB; the last comes back short, at the end of the file
}

TEST_CASE("guest files: a write chunk libvirt cannot deliver is refused before anything starts",
          "[virt][files]") {
  MemoryGuestAgent guest;
  AgentCall agent = std::ref(guest);
  StringSource in;
  in.data = "x";
  FileTransferOptions o;
  o.write_chunk = kMaxWriteChunk + 1;
  auto r = put_guest_file(agent, {"/f", GuestFileKind::kFile, 1, ""}, in, o);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().field() == "write_chunk");
  CHECK(guest.paths().empty());
  CHECK(guest.writes == 0);
}

TEST_CASE("guest files: a read chunk libvirt cannot carry back is refused before anything starts",
          "[virt][files]") {
  MemoryGuestAgent guest;
  AgentCall agent = std::ref(guest);
  guest.put("/f", "abc");
  StringSink out;
  FileTransferOptions o;
  o.read_chunk = kMaxReadChunk + 1;
  auto r = get_guest_file(agent, "/f", out, o);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().field() == "read_chunk");
  CHECK(out.data.empty());
  CHECK(guest.reads == 0);
}

TEST_CASE("guest files: nothing at the path is not found, naming it", "[virt][files]") {
  MemoryGuestAgent guest;
  AgentCall agent = std::ref(guest);
  StringSink out;
  auto r = get_guest_file(agent, "/nope", out, small());
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::kNotFound);
  CHECK(r.status().field() == "path");
  CHECK_FALSE(out.begun);
}

}  // namespace
}  // namespace armhive
