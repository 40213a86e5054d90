#include "daemon/engine/catalog_image_source.h"

#include "daemon/images/catalog.h"

namespace armhive {

CatalogImageSource::CatalogImageSource(std::string dir, std::chrono::milliseconds rescan)
    : dir_(std::move(dir)), rescan_(rescan) {}

Result<BootImage> CatalogImageSource::resolve(const std::string& name) {
  const auto now = std::chrono::steady_clock::now();
  {
    MutexLock lock(mu_);
    if (auto ok = verified_.find(name); ok != verified_.end()) return ok->second;
    auto bad = failed_.find(name);
    if (bad != failed_.end() && now - bad->second.second < rescan_) return bad->second.first;
  }
  // Verified without mu_: hashing an image's files takes seconds for a Debian disk, and other
  // names' look-ups must not wait for it. Two callers may verify the same image at once; both
  // record the same answer.
  Result<BootImage> found = load(name);
  MutexLock lock(mu_);
  if (found.is_ok()) {
    verified_[name] = *found;
    failed_.erase(name);
  } else {
    failed_[name] = {found.status(), now};
  }
  return found;
}

Result<BootImage> CatalogImageSource::load(const std::string& name) const {
  ARMHIVE_ASSIGN_OR_RETURN(auto catalog, ImageCatalog::open(dir_));
  ARMHIVE_ASSIGN_OR_RETURN(auto image, catalog.find(name));
  ARMHIVE_RETURN_IF_ERROR(catalog.verify(image));
  if (image.boot != "kernel") {
    return Status(ErrorCode::kUnprocessable,
                  "image boots with '" + image.boot + "'; pools boot kernel images", name);
  }
  return BootImage{image.name,
                   image.version,
                   image.disk.path,
                   image.kernel.path,
                   image.initrd.path,
                   image.cmdline,
                   image.login_user.empty() ? "root" : image.login_user,
                   image.corpus_path,
                   image.corpus_bytes,
                   image.corpus_seed,
                   image.corpus_sha256,
                   image.host_corpus.path,
                   image.host_stream.path,
                   image.arch};
}

}  // namespace armhive
