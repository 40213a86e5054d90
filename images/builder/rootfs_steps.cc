#include "images/builder/rootfs_steps.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "base/sha256.h"
#include "base/utc_time.h"
#include "images/builder/archive.h"
#include "images/builder/corpus.h"
#include "images/builder/disk_builder.h"

namespace armhive {

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
Result<fs::path> in_root(const fs::path& root, std::string_view guest_path) {
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

Result<std::string> resolve_in_root(const std::string& root, std::string_view guest_path) {
  ARMHIVE_ASSIGN_OR_RETURN(fs::path p, in_root(root, guest_path));
  return p.string();
}

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

Result<std::unique_ptr<ScratchDir>> ScratchDir::make(const fs::path& catalog,
                                                     const std::string& name, bool keep,
                                                     const std::vector<std::string>& extra) {
  std::error_code ec;
  const fs::path dir = catalog / (".build-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir, ec);
  std::unique_ptr<ScratchDir> scratch(new ScratchDir(dir, keep));
  std::vector<std::string> subdirs = {"rootfs", "out"};
  subdirs.insert(subdirs.end(), extra.begin(), extra.end());
  for (const std::string& d : subdirs) {
    fs::create_directories(dir / d, ec);
    if (ec) return unavailable("cannot create " + (dir / d).string() + ": " + ec.message());
  }
  return scratch;
}

ScratchDir::~ScratchDir() noexcept {
  std::error_code ignored;
  if (!keep_) fs::remove_all(dir_, ignored);
}

Status install_files(ProcessRunner& runner, const Recipe& recipe, const fs::path& rootfs,
                     const fs::path& work, const fs::path& out, std::vector<fs::path>& host_tools,
                     const Say& say) {
  std::error_code ec;
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
            run_checked(runner,
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
    ARMHIVE_RETURN_IF_ERROR(unpack_archive(runner, a, p));
  }
  return Status::ok();
}

Result<Image> assemble_image(ProcessRunner& runner, const Recipe& recipe, ImageParts parts,
                             const fs::path& catalog, const Say& say) {
  std::error_code ec;
  const fs::path& rootfs = parts.rootfs;
  const fs::path& work = parts.work;
  const fs::path& out = parts.out;
  std::string corpus_sha;
  fs::path host_corpus;
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

  // The disk.
  fs::path tar = work / "rootfs.tar";
  std::vector<std::string> tar_argv = {"tar", "--numeric-owner", "-C", rootfs.string(),
                                       "-cf", tar.string()};
  if (parts.root_owns_all) {
    // Every file of a .deb-assembled tree belongs to root (dpkg-deb -x as root keeps the
    // package's owners, which are root for the tiny set).
    tar_argv.insert(tar_argv.begin() + 1, {"--owner=0", "--group=0"});
  }
  tar_argv.push_back(".");
  ARMHIVE_RETURN_IF_ERROR(run_checked(runner, {.argv = tar_argv}, "tar of the root filesystem"));
  say("root filesystem: " + std::to_string(fs::file_size(tar, ec) >> 20) + " MiB");
  fs::path disk = out / "disk.qcow2";
  ARMHIVE_RETURN_IF_ERROR(build_ext4_disk(
      {.output = disk.string(), .size_mib = recipe.disk_size_mib, .rootfs_tar = tar.string()},
      say));
  fs::remove(tar, ec);

  // Kernel and initrd for direct kernel boot.
  ARMHIVE_ASSIGN_OR_RETURN(std::string kernel, read_file(parts.kernel_path));
  fs::path kernel_out = out / "vmlinuz";
  if (recipe.compress_kernel) {
    ARMHIVE_RETURN_IF_ERROR(write_gzip(kernel_out, kernel));
  } else {
    ARMHIVE_RETURN_IF_ERROR(write_file(kernel_out, kernel, 0644));
  }
  fs::path initrd_out = out / "initrd.img";
  if (parts.gzip_initrd) {
    ARMHIVE_RETURN_IF_ERROR(write_gzip(initrd_out, parts.initrd_data));
  } else {
    ARMHIVE_RETURN_IF_ERROR(write_file(initrd_out, parts.initrd_data, 0644));
  }

  // The manifest.
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
  for (const fs::path& t : parts.host_tools) {
    if (files.contains(t.filename().string()))
      return invalid_argument("files.path",
                              "a compiled file may not be named " + t.filename().string());
    ARMHIVE_ASSIGN_OR_RETURN(files[t.filename().string()], file_entry(t));
    ::chmod(t.c_str(), 0444);
  }
  std::vector<PackageInfo>& recorded = parts.packages;
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
      {"kernel_release", parts.kernel_release},
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
  for (const auto& [key, value] : parts.extra.items()) manifest[key] = value;
  ARMHIVE_RETURN_IF_ERROR(write_file(out / "manifest.json", manifest.dump(2) + "\n", 0444));
  for (const auto& p : {disk, kernel_out, initrd_out}) ::chmod(p.c_str(), 0444);

  // Publish: swap the new directory in, then drop the old one. Running VMs keep their open
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
  return parse_manifest(manifest, final_dir.string());
}

}  // namespace armhive
