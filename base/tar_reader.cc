#include "base/tar_reader.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <string_view>

namespace armhive {

namespace {

constexpr size_t kBlock = 512;

// A header field: the bytes up to the first NUL (a full field has none).
std::string field_text(const char* h, size_t offset, size_t length) {
  const char* begin = h + offset;
  const char* end = std::find(begin, begin + length, '\0');
  return std::string(begin, end);
}

// A numeric header field: octal digits between optional leading spaces and trailing spaces or
// NULs (an empty field is 0), or GNU's base-256 form (the first byte's high bit set; a negative
// one, 0xff first, is refused). Anything else is an error: a lenient parse would turn noise into
// sizes.
Result<uint64_t> header_number(const char* h, size_t offset, size_t length, const char* name) {
  const auto* f = reinterpret_cast<const unsigned char*>(h + offset);
  if ((f[0] & 0x80) != 0) {
    if (f[0] == 0xff) return invalid_argument(name, std::string(name) + " is negative");
    uint64_t v = f[0] & 0x7f;
    for (size_t i = 1; i < length; ++i) {
      if (v > (std::numeric_limits<uint64_t>::max() >> 8)) {
        return invalid_argument(name, std::string(name) + " is out of range");
      }
      v = (v << 8) | f[i];
    }
    return v;
  }
  size_t i = 0;
  while (i < length && f[i] == ' ') ++i;
  uint64_t v = 0;
  for (; i < length && f[i] >= '0' && f[i] <= '7'; ++i) {
    if (v > (std::numeric_limits<uint64_t>::max() >> 3)) {
      return invalid_argument(name, std::string(name) + " is out of range");
    }
    v = (v << 3) | static_cast<uint64_t>(f[i] - '0');
  }
  for (; i < length; ++i) {
    if (f[i] != ' ' && f[i] != '\0') {
      return invalid_argument(name, std::string(name) + " is not an octal number");
    }
  }
  return v;
}

// A pax decimal ("size", the integer part of "mtime"): digits only (mtime: an optional '-'
// and a fraction, which is dropped).
Result<int64_t> pax_number(std::string_view text, bool fraction_allowed, const char* key) {
  bool negative = false;
  if (fraction_allowed && !text.empty() && text[0] == '-') {
    negative = true;
    text.remove_prefix(1);
  }
  if (fraction_allowed) {
    if (size_t dot = text.find('.'); dot != std::string_view::npos) {
      std::string_view frac = text.substr(dot + 1);
      if (frac.find_first_not_of("0123456789") != std::string_view::npos) {
        return invalid_argument(key, std::string("pax ") + key + " is not a number");
      }
      text = text.substr(0, dot);
    }
  }
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != text.npos) {
    return invalid_argument(key, std::string("pax ") + key + " is not a number in range");
  }
  int64_t v = 0;
  for (char c : text) v = v * 10 + (c - '0');
  return negative ? -v : v;
}

// The pax records of an extended header: "LENGTH KEY=VALUE\n", LENGTH counting the whole record.
struct PaxValues {
  std::optional<std::string> path, linkpath;
  std::optional<uint64_t> size;
  std::optional<int64_t> mtime;
};

Status parse_pax(std::string_view data, PaxValues& out) {
  size_t pos = 0;
  while (pos < data.size()) {
    size_t space = data.find(' ', pos);
    if (space == std::string_view::npos || space == pos || space - pos > 18) {
      return invalid_argument("pax", "malformed pax record (no length)");
    }
    uint64_t length = 0;
    for (size_t i = pos; i < space; ++i) {
      if (data[i] < '0' || data[i] > '9') {
        return invalid_argument("pax", "malformed pax record length");
      }
      length = length * 10 + static_cast<uint64_t>(data[i] - '0');
    }
    if (length <= space - pos + 1 || length > data.size() - pos) {
      return invalid_argument("pax", "pax record length out of range");
    }
    std::string_view record = data.substr(space + 1, pos + length - space - 1);
    if (record.empty() || record.back() != '\n') {
      return invalid_argument("pax", "pax record does not end with a newline");
    }
    record.remove_suffix(1);
    size_t eq = record.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return invalid_argument("pax", "pax record without KEY=");
    }
    std::string_view key = record.substr(0, eq), value = record.substr(eq + 1);
    if (key == "path") {
      out.path = std::string(value);
    } else if (key == "linkpath") {
      out.linkpath = std::string(value);
    } else if (key == "size") {
      ARMHIVE_ASSIGN_OR_RETURN(int64_t v, pax_number(value, false, "size"));
      out.size = static_cast<uint64_t>(v);
    } else if (key == "mtime") {
      ARMHIVE_ASSIGN_OR_RETURN(int64_t v, pax_number(value, true, "mtime"));
      out.mtime = v;
    }  // uid, gid, uname, gname, atime, ctime, charset, comments, vendor keys: ignored
    pos += length;
  }
  return Status::ok();
}

TarType type_of(char flag) {
  switch (flag) {
    case '0':
    case '\0':
    case '7':  // contiguous: a regular file everywhere but a few old systems
      return TarType::kFile;
    case '1':
      return TarType::kHardLink;
    case '2':
      return TarType::kSymlink;
    case '3':
      return TarType::kCharDevice;
    case '4':
      return TarType::kBlockDevice;
    case '5':
      return TarType::kDirectory;
    case '6':
      return TarType::kFifo;
    default:
      return TarType::kOther;
  }
}

}  // namespace

const char* to_string(TarType t) {
  switch (t) {
    case TarType::kFile:
      return "regular file";
    case TarType::kHardLink:
      return "hard link";
    case TarType::kSymlink:
      return "symbolic link";
    case TarType::kCharDevice:
      return "character device";
    case TarType::kBlockDevice:
      return "block device";
    case TarType::kDirectory:
      return "directory";
    case TarType::kFifo:
      return "FIFO";
    case TarType::kOther:
      break;
  }
  return "special entry";
}

Status TarReader::read_exact(char* buf, size_t n, const std::string& what) {
  in_.read(buf, static_cast<std::streamsize>(n));
  if (static_cast<size_t>(in_.gcount()) != n) {
    return invalid_argument("tar", "the tar archive is truncated in " + what);
  }
  return Status::ok();
}

Status TarReader::skip_rest() {
  uint64_t rest = left_ + padding_;
  left_ = padding_ = 0;
  while (rest > 0) {
    const auto piece = static_cast<std::streamsize>(std::min<uint64_t>(rest, 1 << 20));
    in_.ignore(piece);
    if (in_.gcount() != piece) {
      return invalid_argument(
          "tar", "the tar archive is truncated in member " + std::to_string(members_) + "'s data");
    }
    rest -= static_cast<uint64_t>(piece);
  }
  return Status::ok();
}

Result<std::string> TarReader::read_meta(uint64_t size, const std::string& what) {
  if (size > kMaxMetaBytes) {
    return invalid_argument("tar", what + " of " + std::to_string(size) + " bytes (at most " +
                                       std::to_string(kMaxMetaBytes) + ")");
  }
  std::string data(size, '\0');
  ARMHIVE_RETURN_IF_ERROR(read_exact(data.data(), data.size(), what));
  std::array<char, kBlock> pad{};
  ARMHIVE_RETURN_IF_ERROR(read_exact(pad.data(), (kBlock - size % kBlock) % kBlock, what));
  return data;
}

Result<std::optional<TarMember>> TarReader::next() {
  if (ended_) return std::optional<TarMember>();
  ARMHIVE_RETURN_IF_ERROR(skip_rest());
  const std::string which = "member " + std::to_string(members_ + 1);
  PaxValues pax;
  std::optional<std::string> long_name, long_link;
  bool pending = false;  // a pax header or long name waits for its member
  for (;;) {
    std::array<char, kBlock> h{};
    in_.read(h.data(), kBlock);
    const auto got = static_cast<size_t>(in_.gcount());
    if (got == 0 || std::all_of(h.begin(), h.end(), [](char c) { return c == '\0'; })) {
      if (got != 0 && got != kBlock) {
        return invalid_argument("tar", "the tar archive is truncated in " + which + "'s header");
      }
      if (pending) {
        return invalid_argument("tar", "the tar archive ends after a header for " + which);
      }
      ended_ = true;  // the second zero block, and anything after it, is not read
      return std::optional<TarMember>();
    }
    if (got != kBlock) {
      return invalid_argument("tar", "the tar archive is truncated in " + which + "'s header");
    }
    ARMHIVE_ASSIGN_OR_RETURN(uint64_t stored, header_number(h.data(), 148, 8, "chksum"));
    uint64_t sum_unsigned = 0;
    int64_t sum_signed = 0;
    for (size_t i = 0; i < kBlock; ++i) {
      const bool in_field = i >= 148 && i < 156;
      const char c = in_field ? ' ' : h[i];
      sum_unsigned += static_cast<unsigned char>(c);
      sum_signed += static_cast<signed char>(c);
    }
    if (stored != sum_unsigned && static_cast<int64_t>(stored) != sum_signed) {
      return invalid_argument("tar", which + ": header checksum mismatch (not a tar archive?)");
    }
    ARMHIVE_ASSIGN_OR_RETURN(uint64_t size, header_number(h.data(), 124, 12, "size"));
    const char flag = h[156];
    if (flag == 'x' || flag == 'g' || flag == 'L' || flag == 'K') {
      const std::string what = flag == 'L'   ? which + "'s GNU long name"
                               : flag == 'K' ? which + "'s GNU long link name"
                                             : which + "'s pax header";
      ARMHIVE_ASSIGN_OR_RETURN(std::string data, read_meta(size, what));
      if (flag == 'L' || flag == 'K') {
        std::string name(data.c_str());  // NUL-terminated within its data
        (flag == 'L' ? long_name : long_link) = std::move(name);
      } else if (flag == 'x') {
        if (Status s = parse_pax(data, pax); !s.is_ok()) {
          return invalid_argument("tar", which + ": " + s.message());
        }
      } else {
        PaxValues global;  // checked, then ignored: no global default is honoured
        if (Status s = parse_pax(data, global); !s.is_ok()) {
          return invalid_argument("tar", which + ": " + s.message());
        }
        continue;
      }
      pending = true;
      continue;
    }
    TarMember m;
    m.typeflag = flag;
    m.type = type_of(flag);
    m.path = field_text(h.data(), 0, 100);
    const bool posix = std::memcmp(h.data() + 257, "ustar\0", 6) == 0;
    if (posix) {
      std::string prefix = field_text(h.data(), 345, 155);
      if (!prefix.empty()) m.path = prefix + "/" + m.path;
    }
    m.link_target = field_text(h.data(), 157, 100);
    ARMHIVE_ASSIGN_OR_RETURN(uint64_t mode, header_number(h.data(), 100, 8, "mode"));
    m.mode = static_cast<uint32_t>(mode & 07777);
    auto mtime = header_number(h.data(), 136, 12, "mtime");
    m.mtime = mtime.is_ok() && *mtime <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                  ? static_cast<int64_t>(*mtime)
                  : 0;  // a time is no reason to refuse a member
    if (long_name) m.path = *long_name;
    if (long_link) m.link_target = *long_link;
    if (pax.path) m.path = *pax.path;
    if (pax.linkpath) m.link_target = *pax.linkpath;
    if (pax.mtime) m.mtime = *pax.mtime;
    if (pax.size) size = *pax.size;
    m.size = size;
    left_ = size;
    padding_ = (kBlock - size % kBlock) % kBlock;
    ++members_;
    return std::optional<TarMember>(std::move(m));
  }
}

Result<size_t> TarReader::read(char* buf, size_t n) {
  const size_t want = static_cast<size_t>(std::min<uint64_t>(n, left_));
  if (want == 0) return size_t{0};
  ARMHIVE_RETURN_IF_ERROR(read_exact(buf, want, "member " + std::to_string(members_) + "'s data"));
  left_ -= want;
  return want;
}

}  // namespace armhive
