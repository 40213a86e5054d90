#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/process_runner.h"
#include "base/result.h"
#include "images/builder/recipe.h"

namespace armhive {

// One binary package as apt's cache describes it (the candidate version).
struct PackageInfo {
  std::string name;
  std::string version;
  std::string arch;         // "arm64" or "all"
  std::string depends;      // raw Depends field
  std::string pre_depends;  // raw Pre-Depends field
  std::string provides;     // raw Provides field
  uint64_t size = 0;        // .deb size in bytes
  std::string sha256;       // the .deb's, as the index gives it ("" if it does not)
};

// Where package metadata comes from. The real one asks apt's cache; tests inject a fake.
// Implementations need not be thread-safe: one build uses one index from one thread.
class PackageIndex {
 public:
  virtual ~PackageIndex() = default;
  // The candidate version of `name` for `arch` (falling back to an Architecture: all package).
  // kNotFound when apt knows no such (non-virtual) package.
  virtual Result<PackageInfo> show(std::string_view name, std::string_view arch) = 0;
  // Several at once (apt-cache is slow to start): the found ones, keyed by name; absent names
  // are simply missing. The default asks show() for each.
  virtual Result<std::map<std::string, PackageInfo>> show_many(
      const std::vector<std::string>& names, std::string_view arch);
  // A digest of the index state of `suite` (what an mmdebstrap of it would install), for the
  // content keys of image layers. The default, for indexes that do not change: "".
  virtual Result<std::string> release_digest(std::string_view suite) {
    (void)suite;
    return std::string();
  }
};

// `apt-cache show --no-all-versions NAME:ARCH` through a ProcessRunner. Runs `apt-get update`
// once first if the package lists for `arch` are missing. Borrows the runner.
class AptPackageIndex final : public PackageIndex {
 public:
  explicit AptPackageIndex(ProcessRunner& runner, std::string lists_dir = "/var/lib/apt/lists")
      : runner_(runner), lists_dir_(std::move(lists_dir)) {}
  Result<PackageInfo> show(std::string_view name, std::string_view arch) override;
  Result<std::map<std::string, PackageInfo>> show_many(const std::vector<std::string>& names,
                                                       std::string_view arch) override;
  // The sha256 of the suite's InRelease/Release files in apt's lists directory (as of the last
  // `apt-get update`); kUnavailable when there is none.
  Result<std::string> release_digest(std::string_view suite) override;

 private:
  Status ensure_lists(std::string_view arch);
  ProcessRunner& runner_;
  std::string lists_dir_;
  bool lists_checked_ = false;
  std::map<std::string, PackageInfo, std::less<>> memo_;
};

// Parses deb822 control stanzas (apt-cache show output); the first stanza per package wins.
std::vector<PackageInfo> parse_control_stanzas(std::string_view text);

// One alternative of a dependency field: "libc6 (>= 2.34)" -> "libc6" (version constraints,
// architecture qualifiers and restrictions dropped: apt's candidate is taken).
// Returns groups (comma-separated) of alternatives ('|'-separated).
std::vector<std::vector<std::string>> parse_dependency_field(std::string_view field);

struct ResolvedPackages {
  std::vector<PackageInfo> packages;  // what goes into the root filesystem, sorted by name
  PackageInfo kernel;                 // the versioned linux-image-* package
  std::string kernel_release;         // e.g. "6.1.0-57-arm64" (/lib/modules/<release>)
};

// Resolves a recipe against the index. For kDebs recipes: the dependency closure of `packages`
// (Depends and Pre-Depends; first installable alternative; `exclude` cut off). For kMmdebstrap
// recipes: only checks every listed package exists (mmdebstrap resolves). In both, the kernel
// meta package is followed through its Depends to the versioned linux-image-* package.
// kInvalidArgument (field "packages" or "kernel") names an unknown package.
Result<ResolvedPackages> resolve_packages(const Recipe& recipe, PackageIndex& index);

}  // namespace armhive
