#include "images/builder/builder.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/sha256.h"
#include "base/utc_time.h"
#include "images/builder/archive.h"
#include "images/builder/corpus.h"
#include "images/builder/deb_cache.h"
#include "images/builder/disk_builder.h"
#include "images/builder/initramfs.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

Status write_file(const fs::path& path, std::string_view data, uint32_t mode) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (fs::is_symlink(path, ec) || fs::exists(path, ec)) fs::remove(path, ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return unavailable("cannot write file", path.string());
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return unavailable("short write", path.string());
  if (::chmod(path.c_str(), mode) != 0) return unavailable("chmod failed", path.string());
  return Status::ok();
}

Result<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open file", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// gzip with a fixed header (no name, mtime 0) so equal input gives equal output.
Status write_gzip(const fs::path& path, std::string_view data) {
  gzFile f = gzopen(path.c_str(), "wb9");
  if (f == nullptr) return unavailable("cannot create gzip file", path.string());
  size_t off = 0;
  while (off < data.size()) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(data.size() - off, 1u << 24));
    if (gzwrite(f, data.data() + off, chunk) != static_cast<int>(chunk)) {
      gzclose(f);
      return unavailable("gzip write failed", path.string());
    }
    off += chunk;
  }
  if (gzclose(f) != Z_OK) return unavailable("gzip close failed", path.string());
  return Status::ok();
}

// Guest path "/etc/x" -> <root>/etc/x with chroot semantics: symlinks among the parent
// directories are followed inside the root (an absolute target such as /run means <root>/run),
// so writing through a package's `/var/run -> /run` never touches the host. The last component
// is not followed (callers replace it).
Result<fs::path> in_root_impl(const fs::path& root, std::string_view guest_path) {
  std::vector<std::string> todo;
  for (const auto& part : fs::path(std::string(guest_path)).relative_path())
    todo.push_back(part.string());
  std::reverse(todo.begin(), todo.end());  // a stack: next component at the back
  std::vector<std::string> done;
  int links = 0;
  while (!todo.empty()) {
    std::string part = todo.back();
    todo.pop_back();
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!done.empty()) done.pop_back();
      continue;
    }
    fs::path host = root;
    for (const auto& d : done) host /= d;
    host /= part;
    std::error_code ec;
    if (!todo.empty() && fs::is_symlink(host, ec)) {
      if (++links > 40)
        return invalid_argument("files.path", "too many symlinks in " + std::string(guest_path));
      fs::path target = fs::read_symlink(host, ec);
      if (ec) return unavailable("cannot read symlink " + host.string());
      if (target.is_absolute()) done.clear();
      std::vector<std::string> parts;
      for (const auto& t : target.relative_path()) parts.push_back(t.string());
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_back(*it);
      continue;
    }
    done.push_back(part);
  }
  fs::path out = root;
  for (const auto& d : done) out /= d;
  return out;
}

Result<fs::path> in_root(const fs::path& root, std::string_view guest_path) {
  return in_root_impl(root, guest_path);
}

class Step {
 public:
  explicit Step(const BuildOptions& o) : o_(o) {}
  void operator()(std::string_view line) const {
    if (o_.progress) o_.progress(line);
  }

 private:
  const BuildOptions& o_;
};

}  // namespace

namespace {

Status run_checked(ProcessRunner& runner, ProcessRequest req, std::string_view what) {
  auto r = runner.run(req);
  if (!r.is_ok()) return r.status().annotate(what);
  if (!r->ok()) {
    std::string err = r->err.size() > 2000 ? r->err.substr(r->err.size() - 2000) : r->err;
    return unavailable(std::string(what) + " failed (exit " + std::to_string(r->exit_code) +
                       (r->timed_out ? ", timed out" : "") + "): " + err);
  }
  return Status::ok();
}

// Packages recorded in dpkg's status file (for mmdebstrap images).
std::vector<PackageInfo> installed_packages(const fs::path& status_file) {
  std::vector<PackageInfo> out;
  auto text = read_file(status_file);
  if (!text.is_ok()) return out;
  // parse_control_stanzas ignores Status; every stanza in a fresh mmdebstrap is installed.
  out = parse_control_stanzas(*text);
  std::sort(out.begin(), out.end(),
            [](const PackageInfo& a, const PackageInfo& b) { return a.name < b.name; });
  return out;
}

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

Result<std::string> resolve_in_root(const std::string& root, std::string_view guest_path) {
  ARMHIVE_ASSIGN_OR_RETURN(fs::path p, in_root_impl(root, guest_path));
  return p.string();
}

Result<BuildResult> ImageBuilder::build(const Recipe& recipe, const BuildOptions& options) {
  Step say(options);
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

  fs::path work = catalog / (".build-" + recipe.name + "-" + std::to_string(::getpid()));
  fs::remove_all(work, ec);
  fs::path rootfs = work / "rootfs";
  fs::path kernel_dir = work / "kernel";
  fs::path out = work / "out";
  for (const auto& d : {rootfs, kernel_dir, out}) {
    fs::create_directories(d, ec);
    if (ec) return unavailable("cannot create " + d.string() + ": " + ec.message());
  }
  struct Cleanup {
    fs::path dir;
    bool keep;
    ~Cleanup() {
      std::error_code ignored;
      if (!keep) fs::remove_all(dir, ignored);
    }
  } cleanup{work, options.keep_work};

  std::string kernel_path, initrd_data;
  std::vector<PackageInfo> recorded;
  DebCache cache(options.cache_dir.empty() ? DebCache::kDefaultDir : options.cache_dir, runner_);

  if (recipe.kind == RecipeKind::kDebs) {
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
      ARMHIVE_RETURN_IF_ERROR(run_checked(
          runner_, {.argv = {"dpkg-deb", "-x", path, dest.string()}}, "dpkg-deb -x " + p.name));
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
      return invalid_argument("packages",
                              "a \"debs\" recipe needs busybox-static (no /bin/busybox)");
    ARMHIVE_ASSIGN_OR_RETURN(initrd_data, build_initramfs({.busybox = busybox.string(),
                                                           .init_script = recipe.initramfs_init,
                                                           .modules = std::move(modules)}));
    kernel_path = (kernel_dir / "boot" / ("vmlinuz-" + resolved.kernel_release)).string();
    recorded = all;
  } else {
    // mmdebstrap resolves, downloads and configures (maintainer scripts run under
    // qemu-user-static). The .deb cache is shared with it through sync-in/sync-out hooks.
    std::string cache_dir = cache.dir();
    if (cache_dir.find_first_of(" \t\n'\"\\$`") != std::string::npos)
      return invalid_argument("cache", "the cache path must not contain spaces or quotes");
    fs::create_directories(cache_dir, ec);
    std::string include = resolved.kernel.name;
    for (const auto& p : recipe.packages) include += "," + p;
    say("running mmdebstrap (" + recipe.suite + ", " + recipe.variant +
        "); this takes 10+ minutes under emulation");
    ARMHIVE_RETURN_IF_ERROR(
        run_checked(runner_,
                    {.argv = {"mmdebstrap", "--arch=" + recipe.arch, "--variant=" + recipe.variant,
                              "--mode=root", "--include=" + include,
                              "--setup-hook=mkdir -p \"$1\"/var/cache/apt/archives/",
                              "--setup-hook=sync-in " + cache_dir + " /var/cache/apt/archives/",
                              "--customize-hook=sync-out /var/cache/apt/archives " + cache_dir,
                              "--skip=download/empty", recipe.suite, rootfs.string()},
                     .timeout = std::chrono::minutes(90)},
                    "mmdebstrap"));
    // --skip=download/empty kept the .debs (for sync-out); they do not belong in the image.
    for (const auto& e : fs::directory_iterator(rootfs / "var/cache/apt/archives", ec))
      if (e.path().extension() == ".deb") fs::remove(e.path(), ec);
    kernel_path = (rootfs / "boot" / ("vmlinuz-" + resolved.kernel_release)).string();
    ARMHIVE_ASSIGN_OR_RETURN(
        initrd_data, read_file(rootfs / "boot" / ("initrd.img-" + resolved.kernel_release)));
    recorded = installed_packages(rootfs / "var/lib/dpkg/status");
  }

  // 5. Recipe files and the benchmark corpus.
  std::vector<fs::path> host_tools;  // copies of the compiled files in the image directory
  fs::path host_corpus;
  for (const auto& f : recipe.files) {
    ARMHIVE_ASSIGN_OR_RETURN(fs::path p, in_root(rootfs, f.path));
    if (p == rootfs) return invalid_argument("files.path", "cannot replace the root directory");
    fs::create_directories(p.parent_path(), ec);
    switch (f.type) {
      case RecipeFile::Type::kDirectory:
        fs::create_directories(p, ec);
        ::chmod(p.c_str(), f.mode);
        break;
      case RecipeFile::Type::kSymlink:
        fs::remove(p, ec);
        fs::create_symlink(f.content, p, ec);
        if (ec) return unavailable("cannot create symlink: " + ec.message(), f.path);
        break;
      case RecipeFile::Type::kFile:
        ARMHIVE_RETURN_IF_ERROR(write_file(p, f.content, f.mode));
        break;
      case RecipeFile::Type::kCompiled: {
        // Static, so the program needs nothing from the guest's libc (and runs unchanged on
        // an aarch64 host for the benchmarks' host baselines).
        fs::path src = work / fs::path(f.source).filename();
        ARMHIVE_RETURN_IF_ERROR(write_file(src, f.content, 0644));
        say("compiling " + f.source + " for the guest");
        ARMHIVE_RETURN_IF_ERROR(
            run_checked(runner_,
                        {.argv = {std::string(kGuestCompiler), "-O2", "-static", "-pthread", "-o",
                                  p.string(), src.string(), "-lm"},
                         .timeout = std::chrono::minutes(5)},
                        std::string(kGuestCompiler) + " " + f.source +
                            " (install gcc-aarch64-linux-gnu: scripts/install-deps)"));
        ::chmod(p.c_str(), f.mode);
        // A copy beside the disk: on a host of the image's architecture the same binary runs
        // natively for the benchmarks' host baselines (manifest files.<file name>).
        std::string name = p.filename().string();
        fs::path copy = out / name;
        fs::copy_file(p, copy, fs::copy_options::overwrite_existing, ec);
        if (ec) return unavailable("cannot copy " + name + " into the image: " + ec.message());
        host_tools.push_back(copy);
        break;
      }
    }
  }
  for (const auto& a : recipe.archives) {
    ARMHIVE_ASSIGN_OR_RETURN(fs::path p, in_root(rootfs, a.path));
    say("unpacking archive " + a.name + " into " + a.path);
    ARMHIVE_RETURN_IF_ERROR(unpack_archive(runner_, a, p));
  }
  std::string corpus_sha;
  if (!recipe.corpus_path.empty()) {
    say("generating the benchmark corpus (" + std::to_string(recipe.corpus_bytes) +
        " bytes, seed " + std::to_string(recipe.corpus_seed) + ")");
    std::string corpus = generate_corpus(recipe.corpus_seed, recipe.corpus_bytes);
    corpus_sha = sha256_hex(corpus);
    ARMHIVE_ASSIGN_OR_RETURN(fs::path corpus_file, in_root(rootfs, recipe.corpus_path));
    ARMHIVE_RETURN_IF_ERROR(write_file(corpus_file, corpus, 0444));
    // The same bytes on the host, for the compression suite's host baseline.
    host_corpus = out / "corpus.bin";
    ARMHIVE_RETURN_IF_ERROR(write_file(host_corpus, corpus, 0444));
  }

  // 6. The disk.
  fs::path tar = work / "rootfs.tar";
  std::vector<std::string> tar_argv = {"tar", "--numeric-owner", "-C", rootfs.string(),
                                       "-cf", tar.string()};
  if (recipe.kind == RecipeKind::kDebs) {
    // Every file of a .deb-assembled tree belongs to root (dpkg-deb -x as root keeps the
    // package's owners, which are root for the tiny set).
    tar_argv.insert(tar_argv.begin() + 1, {"--owner=0", "--group=0"});
  }
  tar_argv.push_back(".");
  ARMHIVE_RETURN_IF_ERROR(run_checked(runner_, {.argv = tar_argv}, "tar of the root filesystem"));
  say("root filesystem: " + std::to_string(fs::file_size(tar, ec) >> 20) + " MiB");
  fs::path disk = out / "disk.qcow2";
  ARMHIVE_RETURN_IF_ERROR(build_ext4_disk(
      {.output = disk.string(), .size_mib = recipe.disk_size_mib, .rootfs_tar = tar.string()},
      [&](std::string_view s) { say(s); }));
  fs::remove(tar, ec);

  // 7. Kernel and initrd for direct kernel boot.
  ARMHIVE_ASSIGN_OR_RETURN(std::string kernel, read_file(kernel_path));
  fs::path kernel_out = out / "vmlinuz";
  if (recipe.compress_kernel) {
    ARMHIVE_RETURN_IF_ERROR(write_gzip(kernel_out, kernel));
  } else {
    ARMHIVE_RETURN_IF_ERROR(write_file(kernel_out, kernel, 0644));
  }
  fs::path initrd_out = out / "initrd.img";
  if (recipe.kind == RecipeKind::kDebs) {
    ARMHIVE_RETURN_IF_ERROR(write_gzip(initrd_out, initrd_data));
  } else {
    ARMHIVE_RETURN_IF_ERROR(write_file(initrd_out, initrd_data, 0644));
  }

  // 8. Manifest.
  auto file_entry = [&](const fs::path& p) -> Result<nlohmann::json> {
    ARMHIVE_ASSIGN_OR_RETURN(std::string sum, sha256_file(p.string()));
    return nlohmann::json{{"path", p.filename().string()},
                          {"sha256", sum},
                          {"bytes", static_cast<uint64_t>(fs::file_size(p))}};
  };
  nlohmann::json files = nlohmann::json::object();
  ARMHIVE_ASSIGN_OR_RETURN(files["disk"], file_entry(disk));
  ARMHIVE_ASSIGN_OR_RETURN(files["kernel"], file_entry(kernel_out));
  ARMHIVE_ASSIGN_OR_RETURN(files["initrd"], file_entry(initrd_out));
  if (!host_corpus.empty()) {
    ARMHIVE_ASSIGN_OR_RETURN(files["corpus"], file_entry(host_corpus));
  }
  for (const fs::path& t : host_tools) {
    if (files.contains(t.filename().string()))
      return invalid_argument("files.path",
                              "a compiled file may not be named " + t.filename().string());
    ARMHIVE_ASSIGN_OR_RETURN(files[t.filename().string()], file_entry(t));
    ::chmod(t.c_str(), 0444);
  }
  nlohmann::json packages = nlohmann::json::array();
  std::sort(recorded.begin(), recorded.end(),
            [](const PackageInfo& a, const PackageInfo& b) { return a.name < b.name; });
  for (const auto& p : recorded)
    packages.push_back({{"name", p.name}, {"version", p.version}, {"arch", p.arch}});
  nlohmann::json manifest = {
      {"name", recipe.name},
      {"version", recipe.version},
      {"arch", std::string(kImageArch)},
      {"boot", recipe.boot},
      {"cmdline", recipe.cmdline},
      {"login_user", recipe.login_user},
      {"kernel_release", resolved.kernel_release},
      {"files", files},
      {"corpus", recipe.corpus_path.empty() ? nlohmann::json(nullptr)
                                            : nlohmann::json{{"path", recipe.corpus_path},
                                                             {"bytes", recipe.corpus_bytes},
                                                             {"seed", recipe.corpus_seed},
                                                             {"sha256", corpus_sha}}},
      {"packages", packages},
      {"built_at", utc_now()},
      {"recipe", recipe.file_name.empty() ? recipe.name + ".toml" : recipe.file_name},
      {"recipe_sha256", recipe.sha256},
  };
  ARMHIVE_RETURN_IF_ERROR(write_file(out / "manifest.json", manifest.dump(2) + "\n", 0444));
  for (const auto& p : {disk, kernel_out, initrd_out}) ::chmod(p.c_str(), 0444);

  // 9. Publish: swap the new directory in, then drop the old one. Running VMs keep their open
  // base file; the daemon must not create new overlays on a replaced image while this runs.
  fs::path final_dir = catalog / recipe.name;
  fs::path old_dir = catalog / (".old-" + recipe.name + "-" + std::to_string(::getpid()));
  bool had_old = fs::exists(final_dir, ec);
  if (had_old) {
    fs::rename(final_dir, old_dir, ec);
    if (ec)
      return unavailable("cannot move the previous image aside: " + ec.message(),
                         final_dir.string());
  }
  fs::rename(out, final_dir, ec);
  if (ec) {
    if (had_old) fs::rename(old_dir, final_dir, ec);
    return unavailable("cannot publish the image: " + ec.message(), final_dir.string());
  }
  if (had_old) fs::remove_all(old_dir, ec);

  ARMHIVE_ASSIGN_OR_RETURN(result.image, parse_manifest(manifest, final_dir.string()));
  auto secs =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started);
  uint64_t total = result.image.disk.bytes + result.image.kernel.bytes + result.image.initrd.bytes;
  say("built " + recipe.name + " in " + std::to_string(secs.count()) + " s: disk " +
      std::to_string(result.image.disk.bytes >> 20) + " MiB, kernel " +
      std::to_string(result.image.kernel.bytes >> 20) + " MiB, initrd " +
      std::to_string(result.image.initrd.bytes >> 10) + " KiB, total " +
      std::to_string(total >> 20) + " MiB");
  return result;
}

}  // namespace armhive
