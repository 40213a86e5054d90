// qemu-guest-agent replies (the guest answers them: a CI job is root there). Property: a
// finished process has an exit code in -1..255 and a signal in 0..255; a file read never
// yields more bytes than were asked for; a file handle is never negative; nothing nested deeper
// than kMaxJsonDepth is parsed.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/json_depth.h"
#include "daemon/virt/guest_agent_reply.h"
#include "tests/fuzz/fuzz_check.h"

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
// libFuzzer calls this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // A reply nested deeper than kMaxJsonDepth is refused before nlohmann parses it.
  if (!armhive::check_json_depth(text, "reply").is_ok()) {
    FUZZ_CHECK(!armhive::parse_guest_exec_started(text).is_ok());
    FUZZ_CHECK(!armhive::parse_guest_exec_status(text).is_ok());
  }
  if (auto pid = armhive::parse_guest_exec_started(text); pid.is_ok()) FUZZ_CHECK(*pid > 0);
  auto status = armhive::parse_guest_exec_status(text);
  if (status.is_ok() && status->has_value()) {
    const auto& r = **status;
    FUZZ_CHECK(r.exit_code >= -1 && r.exit_code <= 255);
    FUZZ_CHECK(r.signal >= 0 && r.signal <= 255);
  }
  if (auto chunk = armhive::parse_guest_file_read(text, 64); chunk.is_ok()) {
    FUZZ_CHECK(chunk->data.size() <= 64);
  }
  if (auto handle = armhive::parse_guest_file_open(text); handle.is_ok()) FUZZ_CHECK(*handle >= 0);
  return 0;
}
