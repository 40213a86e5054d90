#include "images/builder/layered_build.h"

#include <unistd.h>

#include <chrono>
#include <set>

#include "base/sha256.h"
#include "images/builder/deb_cache.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string short_key(const std::string& key) { return key.substr(0, 12); }

// Sets up the chroot and runs "$@" in it. Runs under `unshare --mount --propagation private`,
// so every mount disappears with the process. $1 the root, $2 the .deb cache, the rest the
// command; no input is ever part of the script text.
constexpr const char* kChrootScript = R"(set -e
root=$1; cache=$2; shift 2
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/run"
mount -t tmpfs tmpfs "$root/tmp"
mkdir -p "$root/var/cache/apt/archives"
mount --bind "$cache" "$root/var/cache/apt/archives"
exec chroot "$root" "$@"
)";

// Options every apt-get in a layer gets: the mirror stand-in's Release files may be past their
// Valid-Until (a snapshot), and the cache mounted in belongs to root.
const std::vector<std::string>& apt_options() {
  static const std::vector<std::string> kOptions = {
      "-o", "Acquire::Check-Valid-Until=false", "-o", "Acquire::Check-Date=false",
      "-o", "APT::Sandbox::User=root",          "-q"};
  return kOptions;
}

size_t count_debs(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".deb") ++n;
  return n;
}

std::string pin(const PackageInfo& p) {
  return p.name + " " + p.version + " " + p.arch + " " + p.sha256;
}

// Moves `path` aside while a chroot step runs and puts it back after (a file, a symlink or
// nothing), so the guest's own resolv.conf (systemd-resolved's stub link) survives the host's
// standing in for it.
class Aside {
 public:
  Aside(fs::path path) : path_(std::move(path)), saved_(path_.string() + ".armhive-build") {
    std::error_code ec;
    had_ = fs::exists(fs::symlink_status(path_, ec));
    if (had_) fs::rename(path_, saved_, ec);
  }
  ~Aside() {
    std::error_code ec;
    fs::remove(path_, ec);
    if (had_) fs::rename(saved_, path_, ec);
  }
  Aside(const Aside&) = delete;
  Aside& operator=(const Aside&) = delete;

 private:
  fs::path path_, saved_;
  bool had_ = false;
};

}  // namespace

LayeredBuild::LayeredBuild(ProcessRunner& runner, PackageIndex& index, const BuildOptions& options)
    : runner_(runner),
      index_(index),
      options_(options),
      say_([&options](std::string_view line) {
        if (options.progress) options.progress(line);
      }),
      cache_dir_(options.cache_dir.empty() ? DebCache::kDefaultDir : options.cache_dir),
      store_(options.layer_dir.empty() ? kDefaultLayerDir : options.layer_dir) {}

Result<std::vector<std::string>> LayeredBuild::keys(const std::vector<Recipe>& chain,
                                                    ResolvedPackages& base) {
  std::vector<std::string> keys;
  for (size_t i = 0; i < chain.size(); ++i) {
    const Recipe& r = chain[i];
    LayerInputs in{.recipe_sha256 = r.sha256, .parent_key = i == 0 ? "" : keys.back()};
    if (i == 0) {
      ARMHIVE_ASSIGN_OR_RETURN(base, resolve_packages(r, index_));
      ARMHIVE_ASSIGN_OR_RETURN(in.index_digest, index_.release_digest(r.suite));
      in.packages.push_back(pin(base.kernel));
      // resolve_packages has looked up the base's listed packages already (mmdebstrap
      // resolves the rest): no second apt-cache call.
      for (const PackageInfo& p : base.packages) in.packages.push_back(pin(p));
    } else if (!r.packages.empty()) {
      ARMHIVE_ASSIGN_OR_RETURN(auto found, index_.show_many(r.packages, r.arch));
      for (const std::string& name : r.packages) {
        auto it = found.find(name);
        if (it == found.end()) {
          return Status(ErrorCode::kInvalidArgument,
                        "recipe " + r.name + ": package \"" + name + "\" is unknown to apt", "",
                        "packages");
        }
        in.packages.push_back(pin(it->second));
      }
    }
    keys.push_back(layer_key(in));
  }
  return keys;
}

Status LayeredBuild::in_chroot(const fs::path& rootfs, std::vector<std::string> argv,
                               std::chrono::minutes timeout, const std::string& what) {
  std::vector<std::string> full = {"unshare",
                                   "--mount",
                                   "--propagation",
                                   "private",
                                   "--",
                                   "/bin/sh",
                                   "-c",
                                   kChrootScript,
                                   "sh",
                                   rootfs.string(),
                                   cache_dir_,
                                   "/usr/bin/env",
                                   "-i",
                                   "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                                   "HOME=/root",
                                   "LC_ALL=C",
                                   "DEBIAN_FRONTEND=noninteractive"};
  full.insert(full.end(), argv.begin(), argv.end());
  return run_checked(runner_, {.argv = std::move(full), .timeout = timeout}, what);
}

Status LayeredBuild::bootstrap(const Recipe& base, const ResolvedPackages& resolved,
                               const fs::path& rootfs) {
  // mmdebstrap resolves, downloads and configures (maintainer scripts run under
  // qemu-user-static). The .deb cache is shared with it through sync-in/sync-out hooks.
  if (cache_dir_.find_first_of(" \t\n'\"\\$`") != std::string::npos)
    return invalid_argument("cache", "the cache path must not contain spaces or quotes");
  std::error_code ec;
  fs::create_directories(cache_dir_, ec);
  std::string include = resolved.kernel.name;
  for (const auto& p : base.packages) include += "," + p;
  say_("running mmdebstrap (" + base.suite + ", " + base.variant +
       "); this takes 10+ minutes under emulation");
  ARMHIVE_RETURN_IF_ERROR(run_checked(
      runner_,
      {.argv = {"mmdebstrap", "--arch=" + base.arch, "--variant=" + base.variant, "--mode=root",
                "--aptopt=Acquire::Check-Valid-Until \"false\"", "--include=" + include,
                "--setup-hook=mkdir -p \"$1\"/var/cache/apt/archives/",
                "--setup-hook=sync-in " + cache_dir_ + " /var/cache/apt/archives/",
                "--customize-hook=sync-out /var/cache/apt/archives " + cache_dir_,
                "--skip=download/empty", base.suite, rootfs.string()},
       .timeout = std::chrono::minutes(90)},
      "mmdebstrap"));
  // --skip=download/empty kept the .debs (for sync-out); they do not belong in the image.
  for (const auto& e : fs::directory_iterator(rootfs / "var/cache/apt/archives", ec))
    if (e.path().extension() == ".deb") fs::remove(e.path(), ec);
  return Status::ok();
}

Status LayeredBuild::install_packages(const Recipe& layer, const fs::path& rootfs) {
  if (layer.packages.empty()) return Status::ok();
  std::error_code ec;
  fs::create_directories(cache_dir_, ec);
  // No service of a package starts in the chroot.
  const fs::path policy = rootfs / "usr/sbin/policy-rc.d";
  Aside policy_aside(policy);
  ARMHIVE_RETURN_IF_ERROR(write_file(policy, "#!/bin/sh\nexit 101\n", 0755));
  Aside resolv_aside(rootfs / "etc/resolv.conf");
  ARMHIVE_ASSIGN_OR_RETURN(std::string resolv, read_file("/etc/resolv.conf"));
  ARMHIVE_RETURN_IF_ERROR(write_file(rootfs / "etc/resolv.conf", resolv, 0644));

  say_("layer " + layer.name + ": apt-get update in the chroot");
  std::vector<std::string> update = {"apt-get"};
  update.insert(update.end(), apt_options().begin(), apt_options().end());
  update.push_back("update");
  ARMHIVE_RETURN_IF_ERROR(
      in_chroot(rootfs, update, std::chrono::minutes(15), "apt-get update for " + layer.name));

  std::string names;
  for (const auto& p : layer.packages) names += (names.empty() ? "" : " ") + p;
  say_("layer " + layer.name + ": installing " + std::to_string(layer.packages.size()) +
       " packages and their dependencies (" + names + "); maintainer scripts run emulated");
  std::vector<std::string> install = {"apt-get"};
  install.insert(install.end(), apt_options().begin(), apt_options().end());
  for (const char* a : {"install", "-y", "--no-install-recommends"}) install.emplace_back(a);
  // The names were checked as Debian package names ([a-z0-9] first): never an option.
  install.insert(install.end(), layer.packages.begin(), layer.packages.end());
  ARMHIVE_RETURN_IF_ERROR(
      in_chroot(rootfs, install, std::chrono::minutes(90), "apt-get install for " + layer.name));
  // As mmdebstrap leaves a base: no package lists in the image (a job runs apt-get update).
  for (const auto& e : fs::directory_iterator(rootfs / "var/lib/apt/lists", ec))
    if (e.is_regular_file(ec)) fs::remove(e.path(), ec);
  return Status::ok();
}

Status LayeredBuild::run_commands(const Recipe& layer, const fs::path& rootfs) {
  for (size_t i = 0; i < layer.commands.size(); ++i) {
    say_("layer " + layer.name + ": command " + std::to_string(i + 1) + " of " +
         std::to_string(layer.commands.size()));
    ARMHIVE_RETURN_IF_ERROR(
        in_chroot(rootfs, {"/bin/sh", "-c", layer.commands[i]}, std::chrono::minutes(30),
                  "recipe " + layer.name + ": commands[" + std::to_string(i) + "]"));
  }
  return Status::ok();
}

Status LayeredBuild::unpack(const LayerStore::Entry& layer, const fs::path& rootfs) {
  return run_checked(
      runner_,
      {.argv = {"tar", "--numeric-owner", "-xpf", layer.tar().string(), "-C", rootfs.string()},
       .timeout = std::chrono::minutes(30)},
      "unpacking kept layer " + layer.name);
}

Result<LayerStore::Entry> LayeredBuild::keep(const Recipe& layer, const std::string& key,
                                             const std::string& parent, const fs::path& rootfs,
                                             const fs::path& work) {
  fs::path tar = work / ("layer-" + layer.name + ".tar");
  ARMHIVE_RETURN_IF_ERROR(run_checked(
      runner_,
      {.argv = {"tar", "--numeric-owner", "-C", rootfs.string(), "-cf", tar.string(), "."},
       .timeout = std::chrono::minutes(30)},
      "tar of layer " + layer.name));
  return store_.put(layer.name, key, parent, tar,
                    {{"recipe", layer.file_name}, {"recipe_sha256", layer.sha256}});
}

Result<BuildResult> LayeredBuild::build(const std::vector<Recipe>& chain) {
  const auto started = Clock::now();
  BuildResult result;
  const Recipe& image = chain.back();
  std::error_code ec;
  const fs::path catalog = fs::absolute(options_.catalog_dir);
  fs::create_directories(catalog, ec);
  if (ec) return unavailable("cannot create the catalogue: " + ec.message(), catalog.string());

  say_("resolving the packages of " + std::to_string(chain.size()) + " layer(s) for " + image.arch);
  ResolvedPackages base_packages;
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<std::string> keys, keys(chain, base_packages));
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < chain.size(); ++i) {
    layers.push_back(
        {{"name", chain[i].name}, {"key", keys[i]}, {"recipe_sha256", chain[i].sha256}});
    say_("layer " + chain[i].name + ": key " + short_key(keys[i]));
  }

  if (!options_.force) {
    auto cat = ImageCatalog::open(catalog.string());
    if (cat.is_ok()) {
      auto existing = cat->find(image.name);
      if (existing.is_ok() && existing->manifest.value("layers", nlohmann::json()) == layers &&
          cat->verify(*existing).is_ok()) {
        say_("image " + image.name + " is up to date (every layer's key unchanged)");
        result.image = *existing;
        result.up_to_date = true;
        for (size_t i = 0; i < chain.size(); ++i)
          result.layers.push_back({.name = chain[i].name, .key = keys[i], .reused = true});
        return result;
      }
    }
  }

  // The deepest layer kept (none with --force).
  int from_kept = -1;
  std::optional<LayerStore::Entry> kept;
  for (int i = static_cast<int>(chain.size()) - 1; i >= 0 && !options_.force; --i) {
    ARMHIVE_ASSIGN_OR_RETURN(
        auto found, store_.find(chain[static_cast<size_t>(i)].name, keys[static_cast<size_t>(i)],
                                i == 0 ? "" : keys[static_cast<size_t>(i) - 1]));
    if (found) {
      from_kept = i;
      kept = std::move(found);
      break;
    }
  }

  ARMHIVE_ASSIGN_OR_RETURN(std::unique_ptr<ScratchDir> scratch,
                           ScratchDir::make(catalog, image.name, options_.keep_work));
  const fs::path work = scratch->dir();
  const fs::path rootfs = scratch->rootfs();
  const fs::path out = scratch->out();

  const size_t debs_before = count_debs(cache_dir_);
  std::vector<fs::path> host_tools;
  for (size_t i = 0; i < chain.size(); ++i) {
    const Recipe& layer = chain[i];
    const auto t0 = Clock::now();
    if (static_cast<int>(i) < from_kept) {
      result.layers.push_back({.name = layer.name, .key = keys[i], .reused = true});
      continue;
    }
    if (static_cast<int>(i) == from_kept) {
      say_("layer " + layer.name + ": kept (" + short_key(keys[i]) + "), unpacking " +
           kept->tar().string());
      ARMHIVE_RETURN_IF_ERROR(unpack(*kept, rootfs));
      result.layers.push_back(
          {.name = layer.name, .key = keys[i], .reused = true, .seconds = seconds_since(t0)});
      continue;
    }
    say_("layer " + layer.name + ": building (" + short_key(keys[i]) + ")");
    if (i == 0) {
      ARMHIVE_RETURN_IF_ERROR(bootstrap(layer, base_packages, rootfs));
    } else {
      ARMHIVE_RETURN_IF_ERROR(install_packages(layer, rootfs));
    }
    ARMHIVE_RETURN_IF_ERROR(install_files(runner_, layer, rootfs, work, out, host_tools, say_));
    ARMHIVE_RETURN_IF_ERROR(run_commands(layer, rootfs));
    ARMHIVE_ASSIGN_OR_RETURN(LayerStore::Entry entry,
                             keep(layer, keys[i], i == 0 ? "" : keys[i - 1], rootfs, work));
    for (const fs::path& gone : store_.prune(layer.name, keys[i], 2))
      say_("layer store: removed " + gone.string());
    const double took = seconds_since(t0);
    say_("layer " + layer.name + ": built in " + std::to_string(static_cast<int>(took)) +
         " s, kept as " + entry.dir.string());
    result.layers.push_back({.name = layer.name, .key = keys[i], .seconds = took});
  }
  const size_t debs_after = count_debs(cache_dir_);
  result.downloaded = debs_after > debs_before ? static_cast<int>(debs_after - debs_before) : 0;

  // Compiled files of layers taken from the store: their host copies, from the tree.
  for (const Recipe& layer : chain) {
    for (const RecipeFile& f : layer.files) {
      if (f.type != RecipeFile::Type::kCompiled) continue;
      ARMHIVE_ASSIGN_OR_RETURN(fs::path p, in_root(rootfs, f.path));
      const fs::path copy = out / p.filename();
      if (fs::exists(copy, ec)) continue;
      fs::copy_file(p, copy, ec);
      if (ec) return unavailable("cannot copy " + f.path + " into the image: " + ec.message());
      host_tools.push_back(copy);
    }
  }

  const std::string release = base_packages.kernel_release;
  ARMHIVE_ASSIGN_OR_RETURN(std::string initrd,
                           read_file(rootfs / "boot" / ("initrd.img-" + release)));
  std::vector<PackageInfo> installed = installed_packages(rootfs / "var/lib/dpkg/status");
  nlohmann::json extra = {{"layers", layers}};
  ARMHIVE_ASSIGN_OR_RETURN(
      result.image,
      assemble_image(runner_, image,
                     {.rootfs = rootfs,
                      .work = work,
                      .out = out,
                      .kernel_path = (rootfs / "boot" / ("vmlinuz-" + release)).string(),
                      .initrd_data = std::move(initrd),
                      .kernel_release = release,
                      .packages = std::move(installed),
                      .host_tools = std::move(host_tools),
                      .extra = std::move(extra)},
                     catalog, say_));
  say_(built_summary(result.image,
                     std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started)));
  return result;
}

}  // namespace armhive
