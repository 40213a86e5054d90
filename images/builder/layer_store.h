#pragma once

#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace armhive {

// What a layer of a layered image is made from. Its content key is the sha256 of all of it, so
// two builds with equal inputs share one kept root filesystem, and any change of an input (the
// recipe's text or a file it reads, the parent layer, a package's .deb) gives a new key while
// the layers below keep theirs.
struct LayerInputs {
  std::string recipe_sha256;  // Recipe::sha256: its text and every file it reads
  std::string parent_key;     // "" for a base layer
  // "name version arch sha256" of every package the layer names (and the kernel, for a base),
  // as the package index gives them; order does not matter.
  std::vector<std::string> packages;
  // Base layers: the index state the bootstrap resolves against (PackageIndex::release_digest).
  std::string index_digest;
};

// 64 lowercase hex digits. Pure.
std::string layer_key(const LayerInputs& inputs);

// Root filesystems of image layers kept by content key, so an unchanged layer is unpacked in
// seconds instead of rebuilt in minutes:
//   <dir>/<name>-<first 16 hex digits of key>/rootfs.tar   (numeric owners, as built)
//   <dir>/<name>-<first 16 hex digits of key>/layer.json   {"name","key","parent",...}
// An entry appears whole or not at all (staged beside, then renamed). One build per store at a
// time; entries are only read by others.
class LayerStore {
 public:
  struct Entry {
    std::string name, key, parent;
    std::filesystem::path dir;
    nlohmann::json info;  // layer.json
    std::filesystem::path tar() const { return dir / "rootfs.tar"; }
  };

  explicit LayerStore(std::filesystem::path dir) : dir_(std::move(dir)) {}
  const std::filesystem::path& dir() const { return dir_; }

  // The entry kept for `key`, or nullopt. kInvalidArgument naming `from` when an entry holds
  // this key for another layer (another name or parent: the key would collide).
  Result<std::optional<Entry>> find(const std::string& name, const std::string& key,
                                    const std::string& parent) const;

  // Keeps `tar` (moved in, same filesystem, or copied) as the layer `name`/`key`. `info`
  // gains name, key, parent, bytes, kept_at and kept_ns (its order among kept layers).
  Result<Entry> put(const std::string& name, const std::string& key, const std::string& parent,
                    const std::filesystem::path& tar, nlohmann::json info);

  // Removes entries of `name` other than the `keep` most recently kept, except `key` and any
  // entry that a remaining entry names as its parent. Returns the removed directories.
  std::vector<std::filesystem::path> prune(const std::string& name, const std::string& key,
                                           size_t keep);

 private:
  std::vector<Entry> entries() const;
  std::filesystem::path dir_;
};

}  // namespace armhive
