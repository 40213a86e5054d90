#include "daemon/virt/image_shipper.h"

#include <fcntl.h>
#include <libvirt/virterror.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "base/sha256.h"
#include "daemon/virt/error.h"
#include "daemon/virt/handles.h"
#include "daemon/virt/xml.h"

namespace armhive {

using detail::XmlWriter;

namespace {

constexpr size_t kMaxBaseLength = 64;

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

char to_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Owns a file descriptor; closes it in a noexcept destructor.
class Fd {
 public:
  explicit Fd(int fd) noexcept : fd_(fd) {}
  ~Fd() noexcept {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

// Deletes a volume this call created unless disarmed: whatever fails after creation, no
// half-written or unverified volume of a content name stays behind for a later call to trust.
class DeleteUnlessKept {
 public:
  explicit DeleteUnlessKept(virStorageVolPtr vol) noexcept : vol_(vol) {}
  ~DeleteUnlessKept() noexcept {
    if (vol_ != nullptr && virStorageVolDelete(vol_, 0) < 0) virResetLastError();
  }
  DeleteUnlessKept(const DeleteUnlessKept&) = delete;
  DeleteUnlessKept& operator=(const DeleteUnlessKept&) = delete;
  void keep() noexcept { vol_ = nullptr; }

 private:
  virStorageVolPtr vol_;
};

// State of the upload's source callback. The callback runs inside libvirt's C frames, so it
// reports failures here instead of throwing.
struct SendState {
  int fd = -1;
  uint64_t total = 0;
  uint64_t sent = 0;
  Sha256 sha;
  const ShipProgress* progress = nullptr;
  std::optional<Status> error;
  std::string path;
};

int send_source(virStreamPtr /*stream*/, char* data, size_t nbytes, void* opaque) noexcept {
  auto* s = static_cast<SendState*>(opaque);
  try {
    uint64_t left = s->total - s->sent;
    if (left == 0) return 0;
    size_t want = left < nbytes ? static_cast<size_t>(left) : nbytes;
    ssize_t n = 0;
    do {
      n = ::read(s->fd, data, want);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      s->error =
          unavailable(std::string("cannot read image file: ") + std::strerror(errno), s->path);
      return -1;
    }
    if (n == 0) {
      // The file shrank after it was measured: the volume would not hold what was asked.
      s->error = unavailable("image file ended before its size was sent", s->path);
      return -1;
    }
    s->sha.update(std::string_view(data, static_cast<size_t>(n)));
    s->sent += static_cast<uint64_t>(n);
    if (s->progress != nullptr && *s->progress) (*s->progress)(s->sent, s->total);
    return static_cast<int>(n);
  } catch (...) {
    s->error = internal_error("image upload callback failed", s->path);
    return -1;
  }
}

struct RecvState {
  uint64_t limit = 0;
  uint64_t received = 0;
  Sha256 sha;
  std::optional<Status> error;
  std::string volume;
};

int recv_sink(virStreamPtr /*stream*/, const char* data, size_t nbytes, void* opaque) noexcept {
  auto* s = static_cast<RecvState*>(opaque);
  try {
    s->received += nbytes;
    if (s->received > s->limit) {
      s->error = internal_error("volume is larger than its recorded capacity", s->volume);
      return -1;
    }
    s->sha.update(std::string_view(data, nbytes));
    return static_cast<int>(nbytes);
  } catch (...) {
    s->error = internal_error("image download callback failed", s->volume);
    return -1;
  }
}

// Ends a stream whose transfer completed; aborts it if libvirt refuses to finish it.
Status finish_stream(virStreamPtr stream, const char* what, const std::string& name) {
  if (virStreamFinish(stream) >= 0) return Status::ok();
  Status s = libvirt_error(what, name);
  if (virStreamAbort(stream) < 0) virResetLastError();
  return s;
}

// The sha256 of the volume's bytes as the host reads them back, and how many there were.
// The download is bounded by `capacity` so a volume cannot make us read without end.
Result<std::pair<std::string, uint64_t>> host_sha256(virConnectPtr conn, virStorageVolPtr vol,
                                                     const std::string& name, uint64_t capacity) {
  StreamHandle stream(virStreamNew(conn, 0));
  if (!stream) return libvirt_error("create download stream", name);
  if (virStorageVolDownload(vol, stream.get(), 0, 0, 0) < 0) {
    return libvirt_error("download volume", name);
  }
  RecvState state;
  state.limit = capacity;
  state.volume = name;
  // On failure virStreamRecvAll has already aborted the stream.
  if (virStreamRecvAll(stream.get(), recv_sink, &state) < 0) {
    Status s = libvirt_error("download volume", name);
    return state.error ? *state.error : s;
  }
  ARMHIVE_RETURN_IF_ERROR(finish_stream(stream.get(), "finish volume download", name));
  return std::make_pair(state.sha.hex_digest(), state.received);
}

Status upload(virConnectPtr conn, virStorageVolPtr vol, const std::string& name,
              const std::string& local_path, uint64_t size, const ShipProgress& progress,
              std::string& local_sha) {
  Fd fd(::open(local_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return unavailable(std::string("cannot open image file: ") + std::strerror(errno), local_path);
  }
  StreamHandle stream(virStreamNew(conn, 0));
  if (!stream) return libvirt_error("create upload stream", name);
  if (virStorageVolUpload(vol, stream.get(), 0, size, 0) < 0) {
    return libvirt_error("upload volume", name);
  }
  SendState state;
  state.fd = fd.get();
  state.total = size;
  state.progress = &progress;
  state.path = local_path;
  // On failure virStreamSendAll has already aborted the stream.
  if (virStreamSendAll(stream.get(), send_source, &state) < 0) {
    Status s = libvirt_error("upload volume", name);
    return state.error ? *state.error : s;
  }
  ARMHIVE_RETURN_IF_ERROR(finish_stream(stream.get(), "finish volume upload", name));
  local_sha = state.sha.hex_digest();
  return Status::ok();
}

Result<std::string> volume_path(virStorageVolPtr vol, const std::string& name) {
  LibvirtString path(virStorageVolGetPath(vol));
  if (!path) return libvirt_error("get volume path", name);
  return path.str();
}

Result<StoragePoolHandle> lookup_pool(virConnectPtr conn, std::string_view pool) {
  std::string p(pool);
  StoragePoolHandle handle(virStoragePoolLookupByName(conn, p.c_str()));
  if (!handle) return libvirt_error("look up storage pool", p);
  // So volumes made or removed outside libvirt since the pool started are seen.
  if (virStoragePoolRefresh(handle.get(), 0) < 0) virResetLastError();
  return handle;
}

Result<std::string> volume_xml(const std::string& name, uint64_t bytes) {
  XmlWriter w;
  w.start("volume").attr("type", "file");
  w.element("name", name);
  w.start("capacity").attr("unit", "bytes").text(std::to_string(bytes)).end();
  // Sparse: the upload writes every byte anyway, so pre-allocating would write them twice.
  w.start("allocation").attr("unit", "bytes").text("0").end();
  w.start("target");
  w.start("format").attr("type", "raw").end();
  w.end();
  w.end();
  return w.finish();
}

}  // namespace

Result<std::string> shipped_volume_name(std::string_view local_path, std::string_view sha256_hex) {
  if (sha256_hex.size() != 64) {
    return invalid_argument("sha256", "sha256 must be 64 hex digits");
  }
  std::string hex;
  for (char c : sha256_hex) {
    if (!is_hex(c)) return invalid_argument("sha256", "sha256 must be 64 hex digits");
    hex += to_lower(c);
  }
  std::string_view file = local_path;
  if (size_t slash = file.find_last_of('/'); slash != std::string_view::npos) {
    file.remove_prefix(slash + 1);
  }
  std::string base;
  for (char c : file) {
    if (base.empty() && c == '.') continue;  // no hidden files, no "." or ".."
    base += is_name_char(c) ? c : '_';
    if (base.size() == kMaxBaseLength) break;
  }
  if (base.empty()) base = "file";
  std::string name(kShippedVolumePrefix);
  name += hex.substr(0, 16);
  name += '-';
  name += base;
  return name;
}

Result<ShippedVolume> ship_file(const Connection& connection, std::string_view pool,
                                const std::string& local_path, std::string_view sha256_hex,
                                const ShipProgress& progress) {
  ARMHIVE_ASSIGN_OR_RETURN(std::string name, shipped_volume_name(local_path, sha256_hex));
  std::string expected;
  for (char c : sha256_hex) expected += to_lower(c);

  struct stat st {};
  if (::stat(local_path.c_str(), &st) != 0) {
    if (errno == ENOENT) return not_found("image file not found", local_path);
    return unavailable(std::string("cannot stat image file: ") + std::strerror(errno), local_path);
  }
  if (!S_ISREG(st.st_mode)) {
    return Status(ErrorCode::kInvalidArgument, "image file is not a regular file", local_path,
                  "path");
  }
  const auto size = static_cast<uint64_t>(st.st_size);

  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection.get());
  ARMHIVE_ASSIGN_OR_RETURN(StoragePoolHandle p, lookup_pool(conn.get(), pool));

  StorageVolHandle existing(virStorageVolLookupByName(p.get(), name.c_str()));
  if (existing) {
    virStorageVolInfo info{};
    if (virStorageVolGetInfo(existing.get(), &info) < 0) {
      return libvirt_error("describe volume", name);
    }
    bool same = false;
    if (info.capacity == size) {
      auto got = host_sha256(conn.get(), existing.get(), name, size);
      // A download that fails says nothing about the bytes: report it, delete nothing.
      if (!got.is_ok()) return got.status();
      same = got->first == expected && got->second == size;
    }
    if (same) {
      ARMHIVE_ASSIGN_OR_RETURN(std::string path, volume_path(existing.get(), name));
      return ShippedVolume{name, std::move(path), size, false};
    }
    // A content name whose content is not that: a transfer cut short. Ship it again.
    if (virStorageVolDelete(existing.get(), 0) < 0) {
      return libvirt_error("delete unverified volume", name);
    }
  } else {
    Status s = libvirt_error("look up volume", name);
    if (s.code() != ErrorCode::kNotFound) return s;
  }

  ARMHIVE_ASSIGN_OR_RETURN(std::string xml, volume_xml(name, size));
  StorageVolHandle vol(virStorageVolCreateXML(p.get(), xml.c_str(), 0));
  if (!vol) return libvirt_error("create volume", name);
  DeleteUnlessKept cleanup(vol.get());

  std::string local_sha;
  ARMHIVE_RETURN_IF_ERROR(
      upload(conn.get(), vol.get(), name, local_path, size, progress, local_sha));
  ARMHIVE_ASSIGN_OR_RETURN(auto got, host_sha256(conn.get(), vol.get(), name, size));
  if (got.first != expected || got.second != size) {
    std::string msg = "volume " + name;
    msg += " does not hold the image: expected sha256 " + expected;
    msg += ", the host's copy has " + got.first;
    msg += " (" + std::to_string(got.second) + " of " + std::to_string(size) + " bytes)";
    if (local_sha != expected) msg += "; the local file sent had " + local_sha;
    return internal_error(std::move(msg), name);
  }
  ARMHIVE_ASSIGN_OR_RETURN(std::string path, volume_path(vol.get(), name));
  cleanup.keep();
  return ShippedVolume{name, std::move(path), size, true};
}

Status remove_unused(const Connection& connection, std::string_view pool,
                     const std::set<std::string>& keep_volume_names,
                     std::vector<std::string>* removed) {
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection.get());
  ARMHIVE_ASSIGN_OR_RETURN(StoragePoolHandle p, lookup_pool(conn.get(), pool));
  virStorageVolPtr* raw = nullptr;
  int n = virStoragePoolListAllVolumes(p.get(), &raw, 0);
  if (n < 0) return libvirt_error("list volumes", std::string(pool));
  std::vector<StorageVolHandle> vols;
  vols.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) vols.emplace_back(raw[i]);
  std::free(raw);

  Status first;
  for (const StorageVolHandle& vol : vols) {
    const char* cname = virStorageVolGetName(vol.get());
    if (cname == nullptr) {
      virResetLastError();
      continue;
    }
    std::string name(cname);
    if (name.rfind(kShippedVolumePrefix, 0) != 0 || keep_volume_names.count(name) != 0) continue;
    if (virStorageVolDelete(vol.get(), 0) < 0) {
      Status s = libvirt_error("delete unused volume", name);
      if (s.code() != ErrorCode::kNotFound && first.is_ok()) first = s;
      continue;
    }
    if (removed != nullptr) removed->push_back(name);
  }
  return first;
}

}  // namespace armhive
