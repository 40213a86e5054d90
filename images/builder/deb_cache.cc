#include "images/builder/deb_cache.h"

#include <unistd.h>

#include <filesystem>

namespace armhive {

namespace fs = std::filesystem;

std::string DebCache::path_for(const PackageInfo& package) const {
  std::string version;
  for (char c : package.version) {
    if (c == ':') {
      version += "%3a";
    } else {
      version.push_back(c);
    }
  }
  return (fs::path(dir_) / (package.name + "_" + version + "_" + package.arch + ".deb")).string();
}

Result<std::string> DebCache::fetch(const PackageInfo& package, bool* downloaded) {
  if (downloaded != nullptr) *downloaded = false;
  std::string path = path_for(package);
  std::error_code ec;
  if (fs::is_regular_file(path, ec) && fs::file_size(path, ec) > 0) return path;

  fs::create_directories(dir_, ec);
  if (ec) return unavailable("cannot create the package cache: " + ec.message(), dir_);
  fs::path partial = fs::path(dir_) / (".partial-" + std::to_string(::getpid()));
  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  if (ec) return unavailable("cannot create " + partial.string() + ": " + ec.message(), dir_);

  std::string spec = package.arch == "all"
                         ? package.name + "=" + package.version
                         : package.name + ":" + package.arch + "=" + package.version;
  auto r =
      runner_.run({.argv = {"apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", spec},
                   .cwd = partial.string(),
                   .timeout = std::chrono::minutes(15)});
  if (!r.is_ok()) {
    fs::remove_all(partial, ec);
    return r.status().annotate("apt-get download " + spec);
  }
  if (!r->ok()) {
    fs::remove_all(partial, ec);
    return unavailable("apt-get download " + spec + " failed (offline and not cached?): " + r->err,
                       package.name);
  }
  fs::path got = partial / fs::path(path).filename();
  if (!fs::is_regular_file(got, ec)) {
    fs::remove_all(partial, ec);
    return internal_error("apt-get download did not produce " + got.filename().string(),
                          package.name);
  }
  fs::rename(got, path, ec);
  std::error_code ignored;
  fs::remove_all(partial, ignored);
  if (ec) return unavailable("cannot move the download into the cache: " + ec.message(), path);
  if (downloaded != nullptr) *downloaded = true;
  return path;
}

}  // namespace armhive
