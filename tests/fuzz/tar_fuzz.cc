// The tar reader `armhive cp` unpacks a guest's stream with (base/tar_reader.h), and the member
// policy it applies (cli/tar_extract.h): nothing is written here, only the verdicts checked.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "base/tar_reader.h"
#include "cli/tar_extract.h"
#include "tests/fuzz/fuzz_check.h"

// libFuzzer calls this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  armhive::TarReader reader(in);
  armhive::TarPolicy policy;
  uint64_t data_bytes = 0;
  for (;;) {
    auto m = reader.next();
    if (!m.is_ok() || !m->has_value()) break;
    // Every byte of data read came from the input.
    char buf[4096];
    uint64_t got = 0;
    for (;;) {
      auto n = reader.read(buf, sizeof buf);
      if (!n.is_ok() || *n == 0) break;
      got += *n;
    }
    FUZZ_CHECK(got <= (*m)->size);
    data_bytes += got;
    FUZZ_CHECK(data_bytes <= size);
    auto checked = policy.check(**m, reader.members());
    if (!checked.is_ok()) continue;
    // What the policy keeps stays inside the target: no "..", ".", empty or NUL components,
    // and only files, directories and links.
    for (const std::string& part : checked->path) {
      FUZZ_CHECK(!part.empty() && part != "." && part != "..");
      FUZZ_CHECK(part.find('/') == std::string::npos && part.find('\0') == std::string::npos);
    }
    const armhive::TarType t = checked->type;
    FUZZ_CHECK(t == armhive::TarType::kFile || t == armhive::TarType::kDirectory ||
               t == armhive::TarType::kSymlink || t == armhive::TarType::kHardLink);
    if (t == armhive::TarType::kSymlink) {
      FUZZ_CHECK(!(*m)->link_target.empty() && (*m)->link_target[0] != '/');
    }
  }
  return 0;
}
