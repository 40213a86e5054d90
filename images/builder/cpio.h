#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive {

// Writes a "newc" (SVR4, magic 070701) cpio archive in memory, the format the Linux kernel
// unpacks as an initramfs. Entries are written in the order added; parent directories must be
// added before their contents. Owner root:root, mtime 0, so output is reproducible.
// Not thread-safe; one writer per archive.
class CpioWriter {
 public:
  void add_directory(std::string_view path, uint32_t mode = 0755);
  void add_file(std::string_view path, std::string_view data, uint32_t mode = 0644);
  void add_symlink(std::string_view path, std::string_view target);
  // A character device node, e.g. /dev/console (5, 1), which the kernel opens before /init.
  void add_char_device(std::string_view path, uint32_t major, uint32_t minor, uint32_t mode = 0600);
  // Appends the TRAILER!!! entry and returns the archive; the writer is spent afterwards.
  std::string finish();

 private:
  void add_entry(std::string_view path, uint32_t mode, std::string_view data,
                 uint32_t rdev_major = 0, uint32_t rdev_minor = 0);
  std::string out_;
  uint32_t next_ino_ = 1;
};

struct CpioEntry {
  std::string path;
  uint32_t mode = 0;  // including the file type bits
  uint32_t rdev_major = 0;
  uint32_t rdev_minor = 0;
  std::string data;  // file contents, or the symlink target
};

// Parses a newc archive (up to the trailer). kInvalidArgument on a malformed archive.
Result<std::vector<CpioEntry>> parse_cpio(std::string_view archive);

}  // namespace armhive
