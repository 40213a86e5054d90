#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/process_runner.h"
#include "base/result.h"
#include "daemon/images/catalog.h"
#include "images/builder/package_index.h"
#include "images/builder/recipe.h"
#include "images/builder/rootfs_steps.h"

namespace armhive {

struct BuildOptions {
  std::string catalog_dir;  // created if missing
  std::string cache_dir;    // .deb cache; empty: DebCache::kDefaultDir
  std::string layer_dir;    // kept root filesystems of mmdebstrap layers; empty: kDefaultLayerDir
  bool force = false;       // rebuild even when up to date
  bool keep_work = false;   // leave the scratch directory for debugging
  std::function<void(std::string_view)> progress;  // one line per step; may be empty
};

inline constexpr const char* kDefaultLayerDir = "/var/cache/armhive/layers";

// What became of one layer of a layered (mmdebstrap) build.
struct LayerOutcome {
  std::string name;     // the recipe's
  std::string key;      // its content key (layer_key.h)
  bool reused = false;  // taken from the layer store, not built
  double seconds = 0;   // spent on it (building, or unpacking a kept one)
};

struct BuildResult {
  Image image;
  bool up_to_date = false;  // the catalogue already held this image (recipe, packages, layers)
  int downloaded = 0;       // .debs fetched from the network (0 = all cached)
  std::vector<LayerOutcome> layers;  // layered builds: base first
};

// Builds one image into `<catalog>/<name>/` (see catalog.h for the layout) and replaces a
// previous build of the same name only once the new one is complete. Scratch space is
// `<catalog>/.build-<name>-<pid>` (same filesystem, so the final step is a rename).
//
// `chain` is what load_recipe_chain returns: the image's recipe last, the recipes it derives
// from (`from`) before it. "debs" recipes are built in one go; mmdebstrap recipes layer by
// layer, each layer's root filesystem kept under its content key (layered_build.h).
//
// Blocking, minutes on a cold cache, seconds when cached, and a fast no-op when the catalogue
// already holds the same image. Borrows the runner and the index; one build per builder at a
// time. Must run as root (dpkg-deb -x keeps ownership, mmdebstrap and chroot want root,
// tar_in restores owners).
class ImageBuilder {
 public:
  ImageBuilder(ProcessRunner& runner, PackageIndex& index) : runner_(runner), index_(index) {}

  Result<BuildResult> build(const std::vector<Recipe>& chain, const BuildOptions& options);
  // A recipe with no `from`.
  Result<BuildResult> build(const Recipe& recipe, const BuildOptions& options) {
    return build(std::vector<Recipe>{recipe}, options);
  }

 private:
  Result<BuildResult> build_debs(const Recipe& recipe, const BuildOptions& options);

  ProcessRunner& runner_;
  PackageIndex& index_;
};

// "built NAME in N s: disk … MiB, kernel … MiB, initrd … KiB, total … MiB".
std::string built_summary(const Image& image, std::chrono::seconds took);

}  // namespace armhive
