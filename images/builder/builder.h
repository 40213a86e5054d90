#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/process_runner.h"
#include "base/result.h"
#include "daemon/images/catalog.h"
#include "images/builder/package_index.h"
#include "images/builder/recipe.h"

namespace armhive {

struct BuildOptions {
  std::string catalog_dir;                         // created if missing
  std::string cache_dir;                           // .deb cache; empty: DebCache::kDefaultDir
  bool force = false;                              // rebuild even when up to date
  bool keep_work = false;                          // leave the scratch directory for debugging
  std::function<void(std::string_view)> progress;  // one line per step; may be empty
};

struct BuildResult {
  Image image;
  bool up_to_date = false;  // the catalogue already held this recipe hash and package set
  int downloaded = 0;       // .debs fetched from the network (0 = all cached)
};

// Builds one image from a recipe into `<catalog>/<name>/` (see catalog.h for the layout) and
// replaces a previous build of the same name only once the new one is complete. Scratch space
// is `<catalog>/.build-<name>-<pid>` (same filesystem, so the final step is a rename).
//
// Blocking, minutes for "debs" recipes on a cold cache, seconds when cached, and a fast no-op
// when the catalogue already holds the same recipe hash and package versions. Borrows the
// runner and the index; one build per builder at a time. Must run as root (dpkg-deb -x keeps
// ownership, mmdebstrap wants root, tar_in restores owners).
class ImageBuilder {
 public:
  ImageBuilder(ProcessRunner& runner, PackageIndex& index) : runner_(runner), index_(index) {}

  Result<BuildResult> build(const Recipe& recipe, const BuildOptions& options);

 private:
  ProcessRunner& runner_;
  PackageIndex& index_;
};

// Where guest path `guest_path` of a root filesystem unpacked at `root` lives on the host,
// following symlinks among its parent directories inside the root (chroot semantics: an
// absolute link target is taken relative to `root`); the last component is not followed.
// Used for every file the builder writes or prunes; exposed for tests.
Result<std::string> resolve_in_root(const std::string& root, std::string_view guest_path);

}  // namespace armhive
