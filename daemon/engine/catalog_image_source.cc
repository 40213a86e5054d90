#include "daemon/engine/catalog_image_source.h"

#include "daemon/images/catalog.h"

namespace armhive {

CatalogImageSource::CatalogImageSource(std::string dir, std::chrono::milliseconds rescan)
    : dir_(std::move(dir)), rescan_(rescan) {}

Result<BootImage> CatalogImageSource::resolve(const std::string& name) {
  std::lock_guard lock(mu_);
  auto ok = verified_.find(name);
  if (ok != verified_.end()) return ok->second;
  auto now = std::chrono::steady_clock::now();
  auto bad = failed_.find(name);
  if (bad != failed_.end() && now - bad->second.second < rescan_) return bad->second.first;

  auto fail = [&](Status s) -> Result<BootImage> {
    failed_[name] = {s, now};
    return s;
  };
  auto catalog = ImageCatalog::open(dir_);
  if (!catalog.is_ok()) return fail(catalog.status());
  auto image = catalog->find(name);
  if (!image.is_ok()) return fail(image.status());
  Status verified = catalog->verify(*image);
  if (!verified.is_ok()) return fail(verified);
  if (image->boot != "kernel") {
    return fail(Status(ErrorCode::kUnprocessable,
                       "image boots with '" + image->boot + "'; pools boot kernel images", name));
  }
  BootImage boot{image->name,
                 image->version,
                 image->disk.path,
                 image->kernel.path,
                 image->initrd.path,
                 image->cmdline,
                 image->login_user.empty() ? "root" : image->login_user,
                 image->corpus_path,
                 image->corpus_bytes,
                 image->corpus_seed,
                 image->corpus_sha256,
                 image->host_corpus.path,
                 image->host_stream.path,
                 image->arch};
  verified_[name] = boot;
  failed_.erase(name);
  return boot;
}

}  // namespace armhive
