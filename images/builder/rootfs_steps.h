#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/process_runner.h"
#include "base/result.h"
#include "daemon/images/catalog.h"
#include "images/builder/package_index.h"
#include "images/builder/recipe.h"

namespace armhive {

// The steps every build shares once a root filesystem is unpacked in a scratch directory: the
// recipe's files and archives on top of it, and the image it becomes (disk, kernel, initrd,
// manifest, published into the catalogue). The one-shot build (builder.cc) and the layered
// build (layered_build.cc) call them; nothing here knows which. Synchronous; one build per
// scratch directory.

using Say = std::function<void(std::string_view)>;

// Compiles a recipe's `[[files]] compile = "x.c"` entries: `-O2 -static -pthread ... -lm` for
// the guest (arm64 is the only recipe architecture). From Debian's gcc-aarch64-linux-gnu.
inline constexpr std::string_view kGuestCompiler = "aarch64-linux-gnu-gcc";

// Where guest path `guest_path` of a root filesystem unpacked at `root` lives on the host,
// following symlinks among its parent directories inside the root (chroot semantics: an
// absolute link target is taken relative to `root`); the last component is not followed.
// Used for every file a build writes or prunes.
Result<std::filesystem::path> in_root(const std::filesystem::path& root,
                                      std::string_view guest_path);
// The same as a string (for tests).
Result<std::string> resolve_in_root(const std::string& root, std::string_view guest_path);

// Files of the scratch tree. write_file replaces a symlink or file at `path` (never follows).
Status write_file(const std::filesystem::path& path, std::string_view data, uint32_t mode);
Result<std::string> read_file(const std::filesystem::path& path);
// gzip with a fixed header (no name, mtime 0) so equal input gives equal output.
Status write_gzip(const std::filesystem::path& path, std::string_view data);

// Runs `req`; kUnavailable naming `what` with the tool's last 2,000 bytes of stderr when it
// fails or times out.
Status run_checked(ProcessRunner& runner, ProcessRequest req, std::string_view what);

// Packages recorded in dpkg's status file of a root filesystem, sorted by name.
std::vector<PackageInfo> installed_packages(const std::filesystem::path& status_file);

// A recipe layer's [[files]] then [[archives]] into `rootfs` (paths resolved inside the root,
// resolve_in_root). Compiled files are also copied into `out` (the image directory being
// assembled) and listed in `host_tools` for the manifest; their sources go to `work`.
Status install_files(ProcessRunner& runner, const Recipe& recipe,
                     const std::filesystem::path& rootfs, const std::filesystem::path& work,
                     const std::filesystem::path& out,
                     std::vector<std::filesystem::path>& host_tools, const Say& say);

// A build's scratch directory `<catalog>/.build-NAME-PID` with `rootfs/`, `out/` and any
// `extra` subdirectories, made afresh; removed with everything in it when the object goes,
// unless `keep` (armhive-image build --keep-work).
class ScratchDir {
 public:
  static Result<std::unique_ptr<ScratchDir>> make(const std::filesystem::path& catalog,
                                                  const std::string& name, bool keep,
                                                  const std::vector<std::string>& extra = {});
  ~ScratchDir() noexcept;
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path rootfs() const { return dir_ / "rootfs"; }
  std::filesystem::path out() const { return dir_ / "out"; }

 private:
  ScratchDir(std::filesystem::path dir, bool keep) : dir_(std::move(dir)), keep_(keep) {}
  std::filesystem::path dir_;
  bool keep_;
};

// What the assembled image is made of besides the root filesystem.
struct ImageParts {
  std::filesystem::path rootfs;  // the finished tree (the corpus is added here)
  std::filesystem::path work;    // scratch directory (the tar goes here)
  std::filesystem::path out;     // the image directory being assembled, inside the catalogue
  std::string kernel_path;       // the kernel image file to copy (vmlinuz-<release>)
  std::string initrd_data;       // the initrd's bytes
  bool gzip_initrd = false;      // store the initrd gzip-compressed (a raw cpio from the builder)
  bool root_owns_all = false;    // tar with --owner=0 --group=0 (a .deb-assembled tree)
  std::string kernel_release;
  std::vector<PackageInfo> packages;                // recorded in the manifest
  std::vector<std::filesystem::path> host_tools;    // from install_files
  nlohmann::json extra = nlohmann::json::object();  // further manifest keys (e.g. "layers")
};

// Corpus, disk, kernel, initrd and manifest into parts.out, then publishes it as
// `<catalog>/<recipe.name>` (a rename; a previous build of the name is replaced only once the
// new one is complete). `recipe` gives the manifest's name, boot, cmdline and corpus.
Result<Image> assemble_image(ProcessRunner& runner, const Recipe& recipe, ImageParts parts,
                             const std::filesystem::path& catalog, const Say& say);

}  // namespace armhive
