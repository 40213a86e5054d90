#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive {

// An image recipe: one small TOML file per image in images/recipes/ (see images/README.md for
// the format). Parsing validates everything that can be checked without apt; package names
// are checked against apt's cache by the resolver (package_resolver.h). Plain values.

enum class RecipeKind {
  kDebs,        // assembled from .debs with `dpkg-deb -x`, no maintainer scripts
  kMmdebstrap,  // a full Debian system from mmdebstrap (qemu-user-static on x86)
};

// One file, directory or symlink the builder puts into the root filesystem.
struct RecipeFile {
  // kCompiled: `content` is C source the builder compiles for the guest (static, see
  // builder.h) and installs at `path`.
  enum class Type { kFile, kDirectory, kSymlink, kCompiled };
  Type type = Type::kFile;
  std::string path;     // absolute path in the guest
  std::string content;  // file contents (from `content` or read from `source`), or link target
  std::string source;   // recipe-relative source path (`source` or `compile`), empty for inline
  uint32_t mode = 0644;
};

// A tarball the operator supplies (e.g. GitHub's actions-runner-linux-arm64-*.tar.gz, which
// cannot be fetched here), unpacked into the root filesystem at `path`. Its sha256 is pinned in
// the recipe; the tarball's location is `source` (absolute, or relative to the recipe) unless
// the command line names it (`armhive-image build --archive NAME=PATH`).
struct RecipeArchive {
  std::string name;    // [a-z0-9][a-z0-9.-]*: what --archive NAME=PATH refers to
  std::string path;    // absolute guest directory it is unpacked into
  std::string source;  // the tarball on the build host; may be empty until --archive sets it
  std::string sha256;  // pinned: 64 lowercase hex digits
};

struct Recipe {
  std::string name;  // [a-z0-9][a-z0-9.-]*: the catalogue directory name
  std::string version;
  // The recipe this one derives from (its file is `<from>.toml` beside this one), or empty. A
  // derived recipe inherits kind, arch, suite, variant, kernel and boot (it may not set them),
  // and cmdline, login_user, disk_size_mib and corpus unless it sets them; `packages`, `files`,
  // `archives` and `commands` are what its layer adds on top of its parent's root filesystem.
  std::string from;
  std::string arch;  // Debian architecture; only "arm64" is accepted
  RecipeKind kind = RecipeKind::kDebs;
  std::string suite = "bookworm";
  std::string variant = "minbase";    // mmdebstrap --variant
  std::vector<std::string> packages;  // Debian package names without architecture
  // Dependencies deliberately left out of a kDebs closure (only needed by maintainer scripts).
  std::vector<std::string> exclude;
  std::string kernel;                // kernel package, usually the linux-image-arm64 meta package
  std::vector<std::string> modules;  // kDebs: modules loaded by the initramfs, in this order
  std::string initramfs_init;        // kDebs: contents of the initramfs /init
  std::string boot = "kernel";       // "kernel" (direct kernel boot) or "uefi"
  std::string cmdline;
  std::string login_user = "root";
  uint64_t disk_size_mib = 512;
  std::vector<std::string> prune;  // kDebs: guest paths removed from the assembled tree
  std::vector<RecipeFile> files;
  std::vector<RecipeArchive> archives;  // unpacked after the files (below them, beside them)
  // mmdebstrap recipes: shell commands run in the layer's root filesystem (chroot, /bin/sh -c)
  // after its packages, files and archives, in this order; each must succeed.
  std::vector<std::string> commands;
  bool compress_kernel = false;  // store the kernel gzip-compressed (QEMU inflates it)
  std::string corpus_path;       // empty: no benchmark corpus
  uint64_t corpus_bytes = 0;
  uint64_t corpus_seed = 0;

  std::string source_path;  // the recipe file, "" when parsed from text
  std::string file_name;    // its base name, e.g. "tiny.toml"
  std::string sha256;       // hash of the recipe text and every source file it reads
  // Which of the inheritable keys (cmdline, login_user, disk_size_mib, corpus) the text set.
  std::vector<std::string> given;
};

// Parses recipe text. `base_dir` resolves `source = "..."` of [[files]] (they are read and
// hashed here); empty forbids sources. Errors are kInvalidArgument with `field` set to the key.
Result<Recipe> parse_recipe(std::string_view text, const std::string& base_dir);

// Reads and parses a recipe file (sources relative to its directory).
Result<Recipe> load_recipe(const std::string& path);

// Loads the recipe at `path` and, through `from`, every recipe it derives from: base first, the
// image's recipe last, each derived one completed with what it inherits. kInvalidArgument
// naming `from` for an unknown parent, a cycle, a chain deeper than 8, or a parent that is not
// an mmdebstrap recipe.
Result<std::vector<Recipe>> load_recipe_chain(const std::string& path);

std::string_view recipe_kind_name(RecipeKind kind);

// Sets the source of archive `name` from `armhive-image build --archive NAME=PATH`;
// kInvalidArgument naming `archive` when the recipe has no such archive.
Status set_archive_source(Recipe& recipe, const std::string& name_eq_path);

}  // namespace armhive
