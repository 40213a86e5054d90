#pragma once

#include <chrono>
#include <map>
#include <string>

#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/core/boot_image.h"

namespace armhive {

// Resolves pool image names through the on-disk image catalogue (daemon/images). Each image is
// verified (architecture, sha256 of every file) once; a name that is missing or fails
// verification is looked up again at most every `rescan` so an image built after start-up is
// picked up without a restart, and a repaired one is accepted.
//
// Threading: resolve() is thread-safe; mu_ guards the two maps only, never a file read. The
// first resolve() of an image hashes its files (a fraction of a second for the tiny image,
// seconds for a Debian disk): call it once per pool before the engine starts so that the
// engine, which calls it under its lock, never pays that cost.
class CatalogImageSource {
 public:
  explicit CatalogImageSource(std::string dir,
                              std::chrono::milliseconds rescan = std::chrono::seconds(5));
  Result<BootImage> resolve(const std::string& name) EXCLUDES(mu_);
  const std::string& dir() const { return dir_; }

 private:
  // Opens the catalogue, finds `name` and verifies its files: no state, no lock.
  Result<BootImage> load(const std::string& name) const;

  Mutex mu_;
  std::string dir_;
  std::chrono::milliseconds rescan_;
  std::map<std::string, BootImage> verified_ GUARDED_BY(mu_);
  std::map<std::string, std::pair<Status, std::chrono::steady_clock::time_point>> failed_
      GUARDED_BY(mu_);
};

}  // namespace armhive
