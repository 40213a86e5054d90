#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "base/process_runner.h"
#include "base/result.h"
#include "images/builder/builder.h"
#include "images/builder/layer_store.h"
#include "images/builder/package_index.h"
#include "images/builder/recipe.h"

namespace armhive {

// Builds an mmdebstrap image layer by layer (ImageBuilder::build calls it for those recipes):
//
//   base   mmdebstrap of the suite with the base recipe's packages and kernel, then its files,
//          archives and commands
//   each derived layer   the parent's root filesystem, then `apt-get install` of its packages
//          in a chroot (maintainer scripts under qemu-user-static, as mmdebstrap runs them),
//          then its files, archives and commands
//
// Every layer's root filesystem is kept in a LayerStore under its content key (layer_key: the
// recipe, the parent's key, the pinned .debs and, for a base, the package index's state). A
// build starts from the deepest layer already kept, so an unchanged image costs a catalogue
// check, and a change to a derived recipe rebuilds only that layer and the ones above it.
// The manifest records the chain ("layers": [{name, key, recipe_sha256}], base first).
//
// Chroot steps run in a private mount namespace (`unshare --mount`) with /proc, /sys, /dev and
// the .deb cache mounted into the tree only for that process; no service starts in the chroot
// (policy-rc.d); the host's resolv.conf stands in for the guest's while apt runs. Synchronous;
// one build per object; root only.
class LayeredBuild {
 public:
  LayeredBuild(ProcessRunner& runner, PackageIndex& index, const BuildOptions& options);

  // `chain` as load_recipe_chain returns it (base first; every recipe mmdebstrap).
  Result<BuildResult> build(const std::vector<Recipe>& chain);

 private:
  // The content key of every layer, base first; checks every package each layer names exists.
  Result<std::vector<std::string>> keys(const std::vector<Recipe>& chain, ResolvedPackages& base);
  Status bootstrap(const Recipe& base, const ResolvedPackages& resolved,
                   const std::filesystem::path& rootfs);
  Status install_packages(const Recipe& layer, const std::filesystem::path& rootfs);
  Status run_commands(const Recipe& layer, const std::filesystem::path& rootfs);
  // argv run by chroot inside `rootfs` with a clean environment, in a private mount namespace.
  Status in_chroot(const std::filesystem::path& rootfs, std::vector<std::string> argv,
                   std::chrono::minutes timeout, const std::string& what);
  Status unpack(const LayerStore::Entry& layer, const std::filesystem::path& rootfs);
  Result<LayerStore::Entry> keep(const Recipe& layer, const std::string& key,
                                 const std::string& parent, const std::filesystem::path& rootfs,
                                 const std::filesystem::path& work);

  ProcessRunner& runner_;
  PackageIndex& index_;
  const BuildOptions& options_;
  Say say_;
  std::string cache_dir_;
  LayerStore store_;
};

}  // namespace armhive
