#include "cli/tar_extract.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

namespace armhive {

namespace {

std::string join(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < parts.size(); ++i) {
    if (i > 0) out += '/';
    out += parts[i];
  }
  return out;
}

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string::npos) slash = path.size();
    out.push_back(path.substr(pos, slash - pos));
    pos = slash + 1;
  }
  return out;
}

// A descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }

 private:
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_;
};

std::string member_text(uint64_t index, const std::string& path) {
  return "tar member " + std::to_string(index) + " " + printable_member(path);
}

// What is at `name` in `dir`, without following a symlink; nullopt when nothing.
std::optional<mode_t> entry_type(int dir, const std::string& name) {
  struct stat st {};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  return st.st_mode & S_IFMT;
}

// Opens the directory path[0..n) below `root`, one component at a time with O_NOFOLLOW, making
// the missing ones (0755 under the umask): a symlink anywhere on the way is refused, never
// followed, whoever made it (an earlier download, the user).
Result<Fd> open_below(int root, const std::vector<std::string>& path, size_t n,
                      const std::string& member) {
  Fd cur(::fcntl(root, F_DUPFD_CLOEXEC, 0));
  if (cur.get() < 0) return unavailable(member + ": " + std::strerror(errno));
  for (size_t i = 0; i < n; ++i) {
    const char* c = path[i].c_str();
    int fd = ::openat(cur.get(), c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
      if (::mkdirat(cur.get(), c, 0755) != 0 && errno != EEXIST) {
        return unavailable(member + ": cannot create " + join(path, i + 1) + ": " +
                           std::strerror(errno));
      }
      fd = ::openat(cur.get(), c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
      const int err = errno;
      if (entry_type(cur.get(), path[i]) == S_IFLNK) {
        return conflict(member + ": " + join(path, i + 1) +
                        " is a symbolic link here; armhive cp never writes through one (remove "
                        "it, or copy into an empty directory)");
      }
      return conflict(member + ": " + join(path, i + 1) +
                      " is not a directory here: " + std::strerror(err));
    }
    cur = Fd(fd);
  }
  return cur;
}

// Makes room for a non-directory at `name`: an existing file or symlink goes (it is replaced,
// never written through); a directory stays and the member is refused.
Status clear_for_file(int dir, const std::string& name, const std::string& member) {
  auto type = entry_type(dir, name);
  if (!type) return Status::ok();
  if (*type == S_IFDIR) return conflict(member + ": a directory of that name exists here");
  if (::unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) {
    return unavailable(member + ": cannot replace it: " + std::strerror(errno));
  }
  return Status::ok();
}

Status write_file(TarReader& reader, int dir, const std::string& name, const TarMember& m,
                  const std::string& member) {
  ARMHIVE_RETURN_IF_ERROR(clear_for_file(dir, name, member));
  // The owner's execute bit decides 0755 or 0644; the umask applies (tar --no-same-permissions).
  const mode_t mode = (m.mode & 0100) != 0 ? 0755 : 0644;
  Fd fd(::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (fd.get() < 0) return unavailable(member + ": cannot create it: " + std::strerror(errno));
  std::array<char, 64 * 1024> buf{};
  for (;;) {
    ARMHIVE_ASSIGN_OR_RETURN(size_t n, reader.read(buf.data(), buf.size()));
    if (n == 0) break;
    for (size_t off = 0; off < n;) {
      ssize_t w = ::write(fd.get(), buf.data() + off, n - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return unavailable(member + ": cannot write it: " + std::strerror(errno));
      off += static_cast<size_t>(w);
    }
  }
  const timespec times[2] = {{0, UTIME_OMIT}, {static_cast<time_t>(m.mtime), 0}};
  (void)::futimens(fd.get(), times);  // the archive's time, as tar keeps it; best effort
  return Status::ok();
}

}  // namespace

std::string printable_member(const std::string& path) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < path.size(); ++i) {
    if (i == 200) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(path[i]);
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

Result<TarPolicy::Checked> TarPolicy::check(const TarMember& m, uint64_t index) {
  auto refuse = [&](const std::string& why) {
    return invalid_argument("tar", member_text(index, m.path) + " from the guest: " + why);
  };
  if (m.path.find('\0') != std::string::npos || m.link_target.find('\0') != std::string::npos) {
    return refuse("a NUL byte in its path");
  }
  if (m.path.empty()) return refuse("an empty path");
  if (m.path[0] == '/') return refuse("an absolute path (members must stay inside the target)");
  Checked c;
  c.type = m.type;
  for (std::string& part : split(m.path)) {
    if (part.empty() || part == ".") continue;
    if (part == "..") return refuse("\"..\" in its path (it would leave the target directory)");
    c.path.push_back(std::move(part));
  }
  switch (m.type) {
    case TarType::kFile:
    case TarType::kDirectory:
    case TarType::kSymlink:
    case TarType::kHardLink:
      break;
    case TarType::kOther:
      return refuse(std::string("an entry of tar type '") +
                    (m.typeflag >= 0x21 && m.typeflag < 0x7f ? std::string(1, m.typeflag)
                                                             : std::string("?")) +
                    "'; only files, directories and links inside the target are unpacked");
    default:
      return refuse(std::string("a ") + to_string(m.type) +
                    "; only files, directories and links inside the target are unpacked");
  }
  if (c.path.empty()) {
    if (m.type == TarType::kDirectory) return c;  // "./": the target itself
    return refuse("a " + std::string(to_string(m.type)) + " in place of the target directory");
  }
  // Nothing is written below something the archive made a symlink or a file.
  for (size_t i = 1; i < c.path.size(); ++i) {
    auto it = seen_.find(join(c.path, i));
    if (it != seen_.end() && it->second != TarType::kDirectory) {
      return refuse("it lies below " + printable_member(it->first) + ", which the archive made a " +
                    to_string(it->second));
    }
  }
  const std::string full = join(c.path, c.path.size());
  if (auto it = seen_.find(full); it != seen_.end()) {
    const bool was_dir = it->second == TarType::kDirectory;
    if (was_dir != (m.type == TarType::kDirectory)) {
      return refuse(std::string("a ") + to_string(m.type) + " where the archive made a " +
                    to_string(it->second));
    }
  }
  if (m.type == TarType::kSymlink) {
    const std::string& t = m.link_target;
    if (t.empty()) return refuse("a symbolic link to nothing");
    if (t[0] == '/') {
      return refuse("a symbolic link to the absolute path " + printable_member(t) +
                    " (links must stay inside the target directory)");
    }
    // Resolved from the link's own directory, lexically; through no other link of the archive
    // (a link's ".." is its target's parent, not the lexical one).
    std::vector<std::string> at(c.path.begin(), c.path.end() - 1);
    std::vector<std::string> parts = split(t);
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string& part = parts[i];
      if (part.empty() || part == ".") continue;
      if (part == "..") {
        if (at.empty()) {
          return refuse("a symbolic link to " + printable_member(t) +
                        ", which leaves the target directory");
        }
        at.pop_back();
        continue;
      }
      at.push_back(part);
      auto it = seen_.find(join(at, at.size()));
      if (it != seen_.end() && it->second == TarType::kSymlink && i + 1 < parts.size()) {
        return refuse("a symbolic link to " + printable_member(t) + " through the archive's link " +
                      printable_member(it->first));
      }
    }
  }
  if (m.type == TarType::kHardLink) {
    const std::string& t = m.link_target;
    if (t.empty() || t[0] == '/') {
      return refuse("a hard link to " + printable_member(t) + " outside the target directory");
    }
    for (std::string& part : split(t)) {
      if (part.empty() || part == ".") continue;
      if (part == "..") return refuse("a hard link to " + printable_member(t) + " with \"..\"");
      c.link.push_back(std::move(part));
    }
    auto it = seen_.find(join(c.link, c.link.size()));
    if (c.link.empty() || it == seen_.end() || it->second != TarType::kFile) {
      return refuse("a hard link to " + printable_member(t) +
                    ", which is not a regular file earlier in the archive");
    }
  }
  seen_[full] = m.type == TarType::kHardLink ? TarType::kFile : m.type;
  return c;
}

Status check_tar_target(const std::string& target, const std::string& source) {
  struct stat st {};
  if (::lstat(target.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) return Status::ok();
  return conflict(source + " is a directory in the guest (it sent a tar stream), but " + target +
                  " is " + (S_ISLNK(st.st_mode) ? "a symbolic link" : "a file") +
                  " here: only a regular file from the guest replaces it (nothing was written)");
}

Status extract_tar(const std::string& archive, const std::string& target) {
  // Pass 1: every member checked; nothing written unless all pass.
  {
    std::ifstream in(archive, std::ios::binary);
    if (!in) return unavailable("cannot read " + archive);
    TarReader reader(in);
    TarPolicy policy;
    for (;;) {
      ARMHIVE_ASSIGN_OR_RETURN(std::optional<TarMember> m, reader.next());
      if (!m) break;
      ARMHIVE_RETURN_IF_ERROR(policy.check(*m, reader.members()).status());
    }
  }
  // Pass 2: the same members again (the same verdicts), written below the target.
  std::error_code ec;
  std::filesystem::create_directories(target, ec);
  if (ec) return unavailable("cannot create " + target + ": " + ec.message());
  std::ifstream in(archive, std::ios::binary);
  if (!in) return unavailable("cannot read " + archive);
  Fd root(::open(target.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) return unavailable("cannot open " + target + ": " + std::strerror(errno));
  TarReader reader(in);
  TarPolicy policy;
  for (;;) {
    ARMHIVE_ASSIGN_OR_RETURN(std::optional<TarMember> m, reader.next());
    if (!m) break;
    ARMHIVE_ASSIGN_OR_RETURN(TarPolicy::Checked c, policy.check(*m, reader.members()));
    if (c.path.empty()) continue;  // the target itself
    const std::string member = member_text(reader.members(), m->path);
    ARMHIVE_ASSIGN_OR_RETURN(Fd dir, open_below(root.get(), c.path, c.path.size() - 1, member));
    const std::string& name = c.path.back();
    switch (c.type) {
      case TarType::kDirectory: {
        if (::mkdirat(dir.get(), name.c_str(), 0755) != 0) {
          if (errno != EEXIST) {
            return unavailable(member + ": cannot create it: " + std::strerror(errno));
          }
          if (entry_type(dir.get(), name) != S_IFDIR) {
            return conflict(member +
                            ": a directory, but something else of that name (a file or "
                            "a symbolic link) exists here");
          }
        }
        break;
      }
      case TarType::kFile:
        ARMHIVE_RETURN_IF_ERROR(write_file(reader, dir.get(), name, *m, member));
        break;
      case TarType::kSymlink:
        ARMHIVE_RETURN_IF_ERROR(clear_for_file(dir.get(), name, member));
        if (::symlinkat(m->link_target.c_str(), dir.get(), name.c_str()) != 0) {
          return unavailable(member + ": cannot create it: " + std::strerror(errno));
        }
        break;
      case TarType::kHardLink: {
        ARMHIVE_ASSIGN_OR_RETURN(Fd from,
                                 open_below(root.get(), c.link, c.link.size() - 1, member));
        ARMHIVE_RETURN_IF_ERROR(clear_for_file(dir.get(), name, member));
        // No AT_SYMLINK_FOLLOW: a link to what is there now, never through a symlink.
        if (::linkat(from.get(), c.link.back().c_str(), dir.get(), name.c_str(), 0) != 0) {
          return unavailable(member + ": cannot link it: " + std::strerror(errno));
        }
        break;
      }
      default:
        return internal_error(member + ": unexpected type after the check");
    }
  }
  return Status::ok();
}

}  // namespace armhive
