// `armhive cp SRC DST`: files and directories into and out of a leased VM through the API's
// streamed file endpoints (PUT/GET /v1/leases/{id}/files). One side is LEASE:/PATH. Files are
// streamed, never read whole; a directory travels as a tar stream in a temporary file, so its
// size is known up front (made with the system tar; a guest's is unpacked in-process, every
// member checked first: cli/tar_extract.h). Checksums end to end: the
// CLI's sha256 of what it sends or receives is compared with the server's and the guest's.
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "api/json.h"
#include "base/process_runner.h"
#include "cli/command_group.h"
#include "cli/output.h"
#include "cli/tar_extract.h"
#include "cli/transfer_progress.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

constexpr size_t kReadPiece = 256 * 1024;
constexpr std::chrono::hours kTarTimeout{1};

struct Remote {
  std::string lease;
  std::string path;
};

// "LEASE:/abs/path" (a lease id of [A-Za-z0-9._-] and an absolute guest path); nullopt for a
// local path (which may contain ':' anywhere but right after such a prefix).
std::optional<Remote> parse_remote(const std::string& arg) {
  size_t colon = arg.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= arg.size() ||
      arg[colon + 1] != '/') {
    return std::nullopt;
  }
  std::string id = arg.substr(0, colon);
  if (id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
      std::string::npos) {
    return std::nullopt;
  }
  return Remote{id, arg.substr(colon + 1)};
}

// SHA-256 over pieces (OpenSSL EVP), as the server and guest compute it.
class Digest {
 public:
  Digest() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~Digest() { EVP_MD_CTX_free(ctx_); }
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;
  void update(std::string_view d) { EVP_DigestUpdate(ctx_, d.data(), d.size()); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_, md, &n);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < n; ++i) {
      out += kHex[md[i] >> 4];
      out += kHex[md[i] & 15];
    }
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

Result<std::string> sha256_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return unavailable("cannot read " + path);
  Digest d;
  std::string buf(kReadPiece, '\0');
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    d.update(std::string_view(buf.data(), static_cast<size_t>(in.gcount())));
  }
  if (in.bad()) return unavailable("cannot read " + path);
  return d.hex();
}

// A temporary file removed when it goes out of scope (unless kept).
class TempFile {
 public:
  static Result<TempFile> make(const std::string& pattern) {
    std::string name = pattern;
    int fd = mkstemps(name.data(), name.size() >= 4 && name.ends_with(".tar") ? 4 : 0);
    if (fd < 0) return unavailable("cannot create a temporary file " + pattern);
    ::close(fd);
    return TempFile(name);
  }
  TempFile(TempFile&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  TempFile& operator=(TempFile&&) = delete;
  ~TempFile() {
    std::error_code ec;
    if (!path_.empty()) fs::remove(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit TempFile(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

std::string temp_dir() {
  const char* t = std::getenv("TMPDIR");
  return t != nullptr && *t != '\0' ? t : "/tmp";
}

Status run_tar(const std::vector<std::string>& argv) {
  SubprocessRunner runner;
  auto r = runner.run({.argv = argv, .timeout = kTarTimeout});
  if (!r.is_ok()) return r.status().annotate("running tar");
  if (!r->ok()) return unavailable("tar failed: " + r->err.substr(0, 300));
  return Status::ok();
}

std::string base_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

class CpCommand final : public CommandGroup {
 public:
  void add_to(CLI::App& app) override {
    cp_ = app.add_subcommand(
        "cp", "copy a file or directory into or out of a leased VM (one side is LEASE:/PATH)");
    cp_->add_option("source", src_, "LOCAL or LEASE:/PATH")->required();
    cp_->add_option("dest", dst_, "LEASE:/PATH or LOCAL")->required();
    cp_->footer(
        "Directories travel as tar streams. The pool's [pools.files] limits apply (see "
        "`armhive pools --json`: files_max_bytes, files_path_prefix). sha256 is checked by the "
        "CLI, the server and the guest.");
  }
  bool parsed() const override { return cp_->parsed(); }

  int run(const CommandContext& ctx) override {
    auto from = parse_remote(src_), to = parse_remote(dst_);
    if (from.has_value() == to.has_value()) {
      return usage_error(invalid_argument(
          "source", from ? "only one side may be LEASE:/PATH (copy through this machine)"
                         : "one side must be LEASE:/PATH (an absolute path in the guest)"));
    }
    return to ? upload(*ctx.client, *to, ctx.json_out) : download(*ctx.client, *from, ctx.json_out);
  }

 private:
  // What the server would refuse, checked before a byte is sent: a server that refuses an
  // upload midway can only close the connection on it.
  Status preflight(Client& client, const Remote& to, uint64_t size) {
    ARMHIVE_ASSIGN_OR_RETURN(LeaseDto lease, client.get_lease(to.lease));
    if (lease.state != "ready") {
      return Status(ErrorCode::kConflict, "lease " + to.lease + " is " + lease.state +
                                              ": files move in and out of ready leases only");
    }
    ARMHIVE_ASSIGN_OR_RETURN(std::vector<PoolDto> pools, client.pools());
    for (const PoolDto& p : pools) {
      if (p.name != lease.pool) continue;
      if (p.files_max_bytes >= 0 && size > static_cast<uint64_t>(p.files_max_bytes)) {
        return Status(ErrorCode::kPayloadTooLarge,
                      src_ + " is " + std::to_string(size) + " bytes; pool '" + p.name +
                          "' allows at most " + std::to_string(p.files_max_bytes) +
                          " (files.max_bytes): nothing was sent",
                      {}, "files.max_bytes");
      }
      const std::string& pre = p.files_path_prefix;
      if (pre != "/" && to.path != pre && to.path.rfind(pre + "/", 0) != 0) {
        return Status(ErrorCode::kPermissionDenied,
                      "'" + to.path + "' is outside pool '" + p.name + "''s files.path_prefix '" +
                          pre + "': nothing was sent",
                      {}, "path");
      }
    }
    return Status::ok();
  }

  int upload(Client& client, const Remote& to, bool json_out) {
    std::error_code ec;
    auto st = fs::status(src_, ec);
    if (ec || !(fs::is_regular_file(st) || fs::is_directory(st))) {
      return usage_error(invalid_argument("source", src_ + " is not a readable file or directory"));
    }
    const bool tar = fs::is_directory(st);
    std::optional<TempFile> packed;
    std::string file = src_;
    if (tar) {
      auto t = TempFile::make(temp_dir() + "/armhive-cp-XXXXXX.tar");
      if (!t.is_ok()) return report(t.status());
      packed.emplace(std::move(*t));
      Status s = run_tar({"tar", "-cf", packed->path(), "-C", src_, "."});
      if (!s.is_ok()) return report(s);
      file = packed->path();
    }
    const uint64_t size = fs::file_size(file, ec);
    if (ec) return report(unavailable("cannot read " + file));
    if (Status s = preflight(client, to, size); !s.is_ok()) return report(s);
    auto local_sum = sha256_of(file);
    if (!local_sum.is_ok()) return report(local_sum.status());

    std::ifstream in(file, std::ios::binary);
    if (!in) return report(unavailable("cannot read " + file));
    TransferProgress progress(base_name(src_), size);
    std::string buf;
    auto r = client.put_file(to.lease, to.path, tar, size, *local_sum,
                             [&](uint64_t, size_t max) -> Result<std::string> {
                               buf.resize(std::min(max, kReadPiece));
                               in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
                               if (in.bad()) return unavailable("cannot read " + file);
                               buf.resize(static_cast<size_t>(in.gcount()));
                               progress.add(buf.size());
                               return buf;
                             });
    const double rate = progress.mib_per_second();
    progress.finish();
    if (!r.is_ok()) return report(r.status());
    if (r->sha256 != *local_sum || r->bytes != size) {
      return report(unavailable("the server stored " + std::to_string(r->bytes) +
                                " bytes with sha256 " + r->sha256 + "; sent " +
                                std::to_string(size) + " with sha256 " + *local_sum));
    }
    if (json_out) {
      print_json(to_json(*r));
    } else {
      std::printf("%s -> %s:%s  %s, %llu bytes, sha256 %s (verified), %.1f MiB/s\n", src_.c_str(),
                  to.lease.c_str(), r->path.c_str(), tar ? "directory" : "file",
                  static_cast<unsigned long long>(r->bytes), r->sha256.c_str(), rate);
    }
    return kExitOk;
  }

  int download(Client& client, const Remote& from, bool json_out) {
    std::error_code ec;
    std::string target = dst_;
    if (fs::is_directory(target, ec)) target = (fs::path(target) / base_name(from.path)).string();
    std::optional<TempFile> part;
    std::optional<std::ofstream> out;
    std::optional<TransferProgress> progress;
    std::optional<Digest> digest;
    std::string kind, guest_sum;
    uint64_t announced = 0, got = 0;
    Status s = client.get_file(
        from.lease, from.path,
        [&](const std::string& k, uint64_t size, const std::string& sum) -> Status {
          kind = k;
          if (kind == "tar") {
            ARMHIVE_RETURN_IF_ERROR(check_tar_target(target, from.lease + ":" + from.path));
          }
          if (kind != "tar" && kind != "file") {
            return invalid_argument("kind", "the server announced a transfer of kind '" + kind +
                                                "' (expected file or tar): nothing was written");
          }
          announced = size;
          guest_sum = sum;
          auto t = kind == "tar" ? TempFile::make(temp_dir() + "/armhive-cp-XXXXXX.tar")
                                 : TempFile::make(target + ".armhive-part-XXXXXX");
          if (!t.is_ok()) return t.status();
          part.emplace(std::move(*t));
          out.emplace(part->path(), std::ios::binary | std::ios::trunc);
          if (!*out) return unavailable("cannot write " + part->path());
          progress.emplace(base_name(from.path), size);
          digest.emplace();
          return Status::ok();
        },
        [&](std::string_view data) -> Status {
          out->write(data.data(), static_cast<std::streamsize>(data.size()));
          if (!*out) return unavailable("cannot write " + part->path());
          digest->update(data);
          got += data.size();
          progress->add(data.size());
          return Status::ok();
        });
    double rate = progress ? progress->mib_per_second() : 0;
    if (progress) progress->finish();
    if (!s.is_ok()) return report(s);
    out->close();
    if (!*out) return report(unavailable("cannot write " + part->path()));
    const std::string sum = digest->hex();
    if (got != announced || sum != guest_sum) {
      return report(unavailable("received " + std::to_string(got) + " bytes with sha256 " + sum +
                                "; the guest announced " + std::to_string(announced) +
                                " bytes with sha256 " + guest_sum + " (nothing was written)"));
    }
    if (kind == "tar") {
      // In-process, member by member (cli/tar_extract.h): the guest made this stream.
      Status t = extract_tar(part->path(), target);
      if (!t.is_ok()) return report(t);
    } else {
      fs::rename(part->path(), target, ec);
      if (ec) return report(unavailable("cannot write " + target + ": " + ec.message()));
    }
    if (json_out) {
      print_json(to_json(FileTransferDto{from.path, kind, got, sum}));
    } else {
      std::printf("%s:%s -> %s  %s, %llu bytes, sha256 %s (verified), %.1f MiB/s\n",
                  from.lease.c_str(), from.path.c_str(), target.c_str(),
                  kind == "tar" ? "directory" : "file", static_cast<unsigned long long>(got),
                  sum.c_str(), rate);
    }
    return kExitOk;
  }

  CLI::App* cp_ = nullptr;
  std::string src_, dst_;
};

}  // namespace

std::unique_ptr<CommandGroup> make_cp_command() { return std::make_unique<CpCommand>(); }

}  // namespace armhive
