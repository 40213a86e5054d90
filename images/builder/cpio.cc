#include "images/builder/cpio.h"

#include <sys/stat.h>

#include <cstdio>

namespace armhive {
namespace {

void append_hex8(std::string& out, uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08X", v);
  out.append(buf, 8);
}

void pad4(std::string& out) {
  while (out.size() % 4 != 0) out.push_back('\0');
}

std::string_view strip_leading_slash(std::string_view path) {
  while (!path.empty() && path.front() == '/') path.remove_prefix(1);
  return path;
}

}  // namespace

void CpioWriter::add_entry(std::string_view path, uint32_t mode, std::string_view data,
                           uint32_t rdev_major, uint32_t rdev_minor) {
  std::string_view name = strip_leading_slash(path);
  out_.append("070701");
  append_hex8(out_, next_ino_++);                             // c_ino
  append_hex8(out_, mode);                                    // c_mode
  append_hex8(out_, 0);                                       // c_uid
  append_hex8(out_, 0);                                       // c_gid
  append_hex8(out_, S_ISDIR(mode) ? 2 : 1);                   // c_nlink
  append_hex8(out_, 0);                                       // c_mtime
  append_hex8(out_, static_cast<uint32_t>(data.size()));      // c_filesize
  append_hex8(out_, 0);                                       // c_devmajor
  append_hex8(out_, 0);                                       // c_devminor
  append_hex8(out_, rdev_major);                              // c_rdevmajor
  append_hex8(out_, rdev_minor);                              // c_rdevminor
  append_hex8(out_, static_cast<uint32_t>(name.size() + 1));  // c_namesize incl. NUL
  append_hex8(out_, 0);                                       // c_check
  out_.append(name);
  out_.push_back('\0');
  pad4(out_);
  out_.append(data);
  pad4(out_);
}

void CpioWriter::add_directory(std::string_view path, uint32_t mode) {
  add_entry(path, S_IFDIR | (mode & 07777), {});
}

void CpioWriter::add_file(std::string_view path, std::string_view data, uint32_t mode) {
  add_entry(path, S_IFREG | (mode & 07777), data);
}

void CpioWriter::add_symlink(std::string_view path, std::string_view target) {
  add_entry(path, S_IFLNK | 0777, target);
}

void CpioWriter::add_char_device(std::string_view path, uint32_t major, uint32_t minor,
                                 uint32_t mode) {
  add_entry(path, S_IFCHR | (mode & 07777), {}, major, minor);
}

std::string CpioWriter::finish() {
  add_entry("TRAILER!!!", 0, {});
  // The kernel accepts any length; pad to 512 like cpio(1) does.
  while (out_.size() % 512 != 0) out_.push_back('\0');
  return std::move(out_);
}

Result<std::vector<CpioEntry>> parse_cpio(std::string_view archive) {
  std::vector<CpioEntry> entries;
  size_t pos = 0;
  auto field = [&](size_t header, int index, uint32_t& value) -> bool {
    std::string hex(archive.substr(header + 6 + 8 * static_cast<size_t>(index), 8));
    char* end = nullptr;
    unsigned long v = std::strtoul(hex.c_str(), &end, 16);
    if (end != hex.c_str() + 8) return false;
    value = static_cast<uint32_t>(v);
    return true;
  };
  auto align4 = [](size_t v) { return (v + 3) & ~size_t{3}; };
  while (true) {
    if (pos + 110 > archive.size()) return invalid_argument("initrd", "cpio archive truncated");
    if (archive.substr(pos, 6) != "070701") return invalid_argument("initrd", "bad cpio magic");
    uint32_t mode = 0, filesize = 0, namesize = 0, rmaj = 0, rmin = 0;
    if (!field(pos, 1, mode) || !field(pos, 6, filesize) || !field(pos, 11, namesize) ||
        !field(pos, 9, rmaj) || !field(pos, 10, rmin) || namesize == 0)
      return invalid_argument("initrd", "bad cpio header");
    size_t name_at = pos + 110;
    if (name_at + namesize > archive.size())
      return invalid_argument("initrd", "cpio name truncated");
    std::string name(archive.substr(name_at, namesize - 1));
    size_t data_at = align4(name_at + namesize);
    if (data_at + filesize > archive.size())
      return invalid_argument("initrd", "cpio data truncated");
    if (name == "TRAILER!!!") break;
    entries.push_back({name, mode, rmaj, rmin, std::string(archive.substr(data_at, filesize))});
    pos = align4(data_at + filesize);
  }
  return entries;
}

}  // namespace armhive
