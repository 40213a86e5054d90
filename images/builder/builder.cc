#include "images/builder/builder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <tuple>

#include "images/builder/build_lock.h"
#include "images/builder/deb_cache.h"
#include "images/builder/initramfs.h"
#include "images/builder/layered_build.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

bool up_to_date(const Image& existing, const Recipe& recipe, const ResolvedPackages& resolved) {
  const auto& m = existing.manifest;
  if (!m.contains("recipe_sha256") || m["recipe_sha256"] != recipe.sha256) return false;
  if (!m.contains("packages") || !m["packages"].is_array()) return false;
  std::set<std::tuple<std::string, std::string, std::string>> have;
  for (const auto& p : m["packages"]) {
    if (!p.is_object() || !p.contains("name") || !p.contains("version") || !p.contains("arch"))
      return false;
    have.emplace(p["name"].get<std::string>(), p["version"].get<std::string>(),
                 p["arch"].get<std::string>());
  }
  auto has = [&](const PackageInfo& p) { return have.contains({p.name, p.version, p.arch}); };
  if (!has(resolved.kernel)) return false;
  for (const auto& p : resolved.packages)
    if (!has(p)) return false;
  return true;
}

}  // namespace

Result<BuildResult> ImageBuilder::build(const std::vector<Recipe>& chain,
                                        const BuildOptions& options) {
  if (chain.empty()) return invalid_argument("recipe", "no recipe to build");
  if (!chain.front().from.empty()) {
    return invalid_argument("from", "recipe " + chain.front().name + " derives from " +
                                        chain.front().from +
                                        ", which is not loaded (load_recipe_chain)");
  }
  const Recipe& recipe = chain.back();
  auto waiting = [&options](std::string_view line) {
    if (options.progress) options.progress(line);
  };
  ARMHIVE_ASSIGN_OR_RETURN(BuildLock catalog_lock,
                           BuildLock::acquire(fs::absolute(options.catalog_dir), waiting));
  if (recipe.kind == RecipeKind::kMmdebstrap) {
    ARMHIVE_ASSIGN_OR_RETURN(
        BuildLock layers_lock,
        BuildLock::acquire(options.layer_dir.empty() ? kDefaultLayerDir : options.layer_dir,
                           waiting));
    LayeredBuild layered(runner_, index_, options);
    return layered.build(chain);
  }
  if (chain.size() != 1) {
    return invalid_argument("from", "only mmdebstrap recipes can be layered; " +
                                        chain.front().name + " is a debs recipe");
  }
  return build_debs(recipe, options);
}

Result<BuildResult> ImageBuilder::build_debs(const Recipe& recipe, const BuildOptions& options) {
  Say say = [&options](std::string_view line) {
    if (options.progress) options.progress(line);
  };
  auto started = std::chrono::steady_clock::now();
  BuildResult result;
  std::error_code ec;
  fs::path catalog = fs::absolute(options.catalog_dir);
  fs::create_directories(catalog, ec);
  if (ec) return unavailable("cannot create the catalogue: " + ec.message(), catalog.string());

  say("resolving " + std::to_string(recipe.packages.size()) + " packages for " + recipe.arch);
  ARMHIVE_ASSIGN_OR_RETURN(ResolvedPackages resolved, resolve_packages(recipe, index_));
  say("resolved " + std::to_string(resolved.packages.size()) + " packages; kernel " +
      resolved.kernel.name + " " + resolved.kernel.version);

  if (!options.force) {
    auto cat = ImageCatalog::open(catalog.string());
    if (cat.is_ok()) {
      auto existing = cat->find(recipe.name);
      if (existing.is_ok() && up_to_date(*existing, recipe, resolved) &&
          cat->verify(*existing).is_ok()) {
        say("image " + recipe.name + " is up to date (same recipe and package versions)");
        result.image = *existing;
        result.up_to_date = true;
        return result;
      }
    }
  }

  ARMHIVE_ASSIGN_OR_RETURN(std::unique_ptr<ScratchDir> scratch,
                           ScratchDir::make(catalog, recipe.name, options.keep_work, {"kernel"}));
  const fs::path work = scratch->dir();
  const fs::path rootfs = scratch->rootfs();
  const fs::path kernel_dir = work / "kernel";
  const fs::path out = scratch->out();

  std::string kernel_path, initrd_data;
  std::vector<PackageInfo> recorded;
  DebCache cache(options.cache_dir.empty() ? DebCache::kDefaultDir : options.cache_dir, runner_);

  // 1. Fetch (cached by name, version and architecture).
  std::vector<std::pair<PackageInfo, std::string>> debs;
  std::vector<PackageInfo> all = resolved.packages;
  all.push_back(resolved.kernel);
  for (const auto& p : all) {
    bool downloaded = false;
    ARMHIVE_ASSIGN_OR_RETURN(std::string path, cache.fetch(p, &downloaded));
    if (downloaded) {
      ++result.downloaded;
      say("downloaded " + p.name + " " + p.version);
    }
    debs.emplace_back(p, path);
  }
  say("packages: " + std::to_string(all.size()) + " (" + std::to_string(result.downloaded) +
      " downloaded, " + std::to_string(all.size() - static_cast<size_t>(result.downloaded)) +
      " from the cache " + cache.dir() + ")");

  // 2. Unpack without maintainer scripts.
  say("unpacking " + std::to_string(resolved.packages.size()) + " packages (dpkg-deb -x)");
  for (const auto& [p, path] : debs) {
    fs::path dest = p.name == resolved.kernel.name ? kernel_dir : rootfs;
    ARMHIVE_RETURN_IF_ERROR(run_checked(runner_, {.argv = {"dpkg-deb", "-x", path, dest.string()}},
                                        "dpkg-deb -x " + p.name));
  }
  for (const auto& prune : recipe.prune) {
    ARMHIVE_ASSIGN_OR_RETURN(fs::path p, in_root(rootfs, prune));
    if (p != rootfs) fs::remove_all(p, ec);
  }

  // 3. The skeleton dpkg's postinsts would have made, and busybox's applet links.
  for (const char* d : {"dev", "proc", "sys", "run", "tmp", "etc", "var/log", "var/tmp", "mnt",
                        "home", "usr/local/sbin", "usr/local/bin"})
    fs::create_directories(rootfs / d, ec);
  fs::create_directories(rootfs / "root", ec);
  ::chmod((rootfs / "root").c_str(), 0700);
  ::chmod((rootfs / "tmp").c_str(), 01777);
  ::chmod((rootfs / "var/tmp").c_str(), 01777);
  if (!fs::exists(rootfs / "var/run", ec)) fs::create_symlink("/run", rootfs / "var/run", ec);
  if (fs::exists(rootfs / "bin/busybox", ec)) {
    for (const auto& a : busybox_bin_applets())
      if (!fs::exists(fs::symlink_status(rootfs / "bin" / a, ec)))
        fs::create_symlink("busybox", rootfs / "bin" / a, ec);
    fs::create_directories(rootfs / "sbin", ec);
    for (const auto& a : busybox_sbin_applets())
      if (!fs::exists(fs::symlink_status(rootfs / "sbin" / a, ec)))
        fs::create_symlink("../bin/busybox", rootfs / "sbin" / a, ec);
  }

  // 4. Initramfs: busybox, the modules the recipe names (with dependencies), the init script.
  fs::path modules_dir = kernel_dir / "lib/modules" / resolved.kernel_release;
  ARMHIVE_ASSIGN_OR_RETURN(ModuleSet modules,
                           resolve_modules(modules_dir.string(), recipe.modules));
  say("initramfs modules: " + [&] {
    std::string s;
    for (const auto& n : modules.names) s += (s.empty() ? "" : " ") + n;
    return s;
  }());
  fs::path busybox = rootfs / "bin/busybox";
  if (!fs::exists(busybox, ec))
    return invalid_argument("packages", "a \"debs\" recipe needs busybox-static (no /bin/busybox)");
  ARMHIVE_ASSIGN_OR_RETURN(initrd_data, build_initramfs({.busybox = busybox.string(),
                                                         .init_script = recipe.initramfs_init,
                                                         .modules = std::move(modules)}));
  kernel_path = (kernel_dir / "boot" / ("vmlinuz-" + resolved.kernel_release)).string();
  recorded = all;

  std::vector<fs::path> host_tools;
  ARMHIVE_RETURN_IF_ERROR(install_files(runner_, recipe, rootfs, work, out, host_tools, say));
  ARMHIVE_ASSIGN_OR_RETURN(result.image, assemble_image(runner_, recipe,
                                                        {.rootfs = rootfs,
                                                         .work = work,
                                                         .out = out,
                                                         .kernel_path = kernel_path,
                                                         .initrd_data = std::move(initrd_data),
                                                         .gzip_initrd = true,
                                                         .root_owns_all = true,
                                                         .kernel_release = resolved.kernel_release,
                                                         .packages = std::move(recorded),
                                                         .host_tools = std::move(host_tools)},
                                                        catalog, say));
  auto secs =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started);
  say(built_summary(result.image, secs));
  return result;
}

std::string built_summary(const Image& image, std::chrono::seconds took) {
  uint64_t total = image.disk.bytes + image.kernel.bytes + image.initrd.bytes;
  return "built " + image.name + " in " + std::to_string(took.count()) + " s: disk " +
         std::to_string(image.disk.bytes >> 20) + " MiB, kernel " +
         std::to_string(image.kernel.bytes >> 20) + " MiB, initrd " +
         std::to_string(image.initrd.bytes >> 10) + " KiB, total " + std::to_string(total >> 20) +
         " MiB";
}

}  // namespace armhive
