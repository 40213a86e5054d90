#pragma once

#include <string>

#include "base/process_runner.h"
#include "base/result.h"
#include "images/builder/package_index.h"

namespace armhive {

// A directory of downloaded .debs keyed by name, version and architecture (apt's own file
// names: NAME_VERSION_ARCH.deb with ':' written as "%3a"). A cached file is used as is, so a
// second build downloads nothing and works offline. Downloads go to a private partial
// directory first and are renamed into place, so a crash never leaves a truncated .deb under
// its final name. Borrows the runner; one build (thread) per cache at a time.
class DebCache {
 public:
  static constexpr const char* kDefaultDir = "/var/cache/armhive/debs";

  DebCache(std::string dir, ProcessRunner& runner) : dir_(std::move(dir)), runner_(runner) {}

  const std::string& dir() const { return dir_; }
  std::string path_for(const PackageInfo& package) const;

  // The cached .deb's path, downloading it with `apt-get download NAME:ARCH=VERSION` if needed.
  // `downloaded` (optional) is set to whether a download happened.
  Result<std::string> fetch(const PackageInfo& package, bool* downloaded = nullptr);

 private:
  std::string dir_;
  ProcessRunner& runner_;
};

}  // namespace armhive
