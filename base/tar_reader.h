#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>

#include "base/result.h"

namespace armhive {

// What a tar member is. Everything but kFile, kDirectory, kSymlink and kHardLink is reported
// for the caller to refuse (devices, FIFOs, GNU sparse/volume/dump entries...).
enum class TarType {
  kFile,
  kHardLink,
  kSymlink,
  kCharDevice,
  kBlockDevice,
  kDirectory,
  kFifo,
  kOther
};
const char* to_string(TarType t);

// One member's header, with pax ('x') and GNU long name/link ('L', 'K') records already applied.
// The archive's owner (uid, gid, names) is not even read: nothing extracted takes it.
struct TarMember {
  std::string path;  // as in the archive (not normalised, may be absolute or hold "..")
  TarType type = TarType::kOther;
  char typeflag = '0';      // the raw type character (kOther: which one)
  uint32_t mode = 0;        // permission and set-id bits as stored (07777)
  uint64_t size = 0;        // data bytes that follow (0 for everything but files)
  int64_t mtime = 0;        // seconds since the epoch
  std::string link_target;  // symlinks and hard links
};

// A streaming reader of tar archives: POSIX ustar (the 155-byte prefix), pax extended headers
// (path, linkpath, size, mtime; global 'g' headers are read and ignored), GNU long names and
// links ('L', 'K') and GNU base-256 numbers. Nothing is trusted: header checksums are checked,
// numbers are parsed strictly (octal digits, spaces and NULs only), pax records must be
// well-formed, long names and pax headers are bounded (kMaxMetaBytes), a truncated archive is an
// error. Errors are kInvalidArgument naming the member ("tar member 3 (\"a/b\"): ...").
//
// Ownership: borrows the stream (which outlives the reader). Threading: one thread at a time.
class TarReader {
 public:
  static constexpr uint64_t kMaxMetaBytes = 1 << 20;  // a pax header or a GNU long name

  explicit TarReader(std::istream& in) : in_(in) {}

  // The next member, skipping whatever of the previous one's data was not read; nullopt at the
  // end of the archive (two zero blocks, or the end of the stream on a block boundary).
  Result<std::optional<TarMember>> next();
  // Reads up to `n` bytes of the current member's data; 0 when it is all read.
  Result<size_t> read(char* buf, size_t n);
  // How many members next() returned so far.
  uint64_t members() const { return members_; }

 private:
  Status skip_rest();
  Status read_exact(char* buf, size_t n, const std::string& what);
  Result<std::string> read_meta(uint64_t size, const std::string& what);

  std::istream& in_;
  uint64_t left_ = 0;     // data bytes of the current member not read yet
  uint64_t padding_ = 0;  // zero bytes after them, up to the next 512-byte block
  uint64_t members_ = 0;
  bool ended_ = false;
};

}  // namespace armhive
