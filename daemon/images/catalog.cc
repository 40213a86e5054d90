#include "daemon/images/catalog.h"

#include <filesystem>
#include <fstream>

#include "base/sha256.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

Status unprocessable(std::string message, std::string context) {
  return Status(ErrorCode::kUnprocessable, std::move(message), std::move(context));
}

Result<ImageFile> parse_file(const nlohmann::json& files, const char* key,
                             const std::string& image_dir, bool required) {
  ImageFile f;
  if (!files.contains(key)) {
    if (required) return unprocessable(std::string("manifest has no files.") + key, image_dir);
    return f;
  }
  const auto& j = files.at(key);
  if (!j.is_object() || !j.contains("path") || !j["path"].is_string() || !j.contains("sha256") ||
      !j["sha256"].is_string() || !j.contains("bytes") || !j["bytes"].is_number_unsigned())
    return unprocessable(std::string("manifest files.") + key + " needs path, sha256 and bytes",
                         image_dir);
  std::string rel = j["path"].get<std::string>();
  fs::path p(rel);
  if (rel.empty() || p.is_absolute() || rel.find("..") != std::string::npos ||
      rel.find('/') != std::string::npos)
    return unprocessable(std::string("manifest files.") + key +
                             ".path must be a file name inside the image directory",
                         image_dir);
  f.path = (fs::path(image_dir) / p).string();
  f.sha256 = j["sha256"].get<std::string>();
  f.bytes = j["bytes"].get<uint64_t>();
  return f;
}

}  // namespace

Result<Image> parse_manifest(const nlohmann::json& m, const std::string& image_dir) {
  if (!m.is_object()) return unprocessable("manifest is not a JSON object", image_dir);
  Image img;
  auto str = [&](const char* key, std::string& out, bool required) -> Status {
    if (!m.contains(key)) {
      return required ? unprocessable(std::string("manifest has no \"") + key + "\"", image_dir)
                      : Status::ok();
    }
    if (!m[key].is_string())
      return unprocessable(std::string("manifest \"") + key + "\" must be a string", image_dir);
    out = m[key].get<std::string>();
    return Status::ok();
  };
  ARMHIVE_RETURN_IF_ERROR(str("name", img.name, true));
  ARMHIVE_RETURN_IF_ERROR(str("version", img.version, true));
  ARMHIVE_RETURN_IF_ERROR(str("arch", img.arch, true));
  ARMHIVE_RETURN_IF_ERROR(str("boot", img.boot, true));
  ARMHIVE_RETURN_IF_ERROR(str("cmdline", img.cmdline, false));
  ARMHIVE_RETURN_IF_ERROR(str("login_user", img.login_user, false));
  if (img.boot != "kernel" && img.boot != "uefi")
    return unprocessable("manifest \"boot\" must be \"kernel\" or \"uefi\"", image_dir);
  if (!m.contains("files") || !m["files"].is_object())
    return unprocessable("manifest has no \"files\" object", image_dir);
  bool direct = img.boot == "kernel";
  ARMHIVE_ASSIGN_OR_RETURN(img.disk, parse_file(m["files"], "disk", image_dir, true));
  ARMHIVE_ASSIGN_OR_RETURN(img.kernel, parse_file(m["files"], "kernel", image_dir, direct));
  ARMHIVE_ASSIGN_OR_RETURN(img.initrd, parse_file(m["files"], "initrd", image_dir, direct));
  ARMHIVE_ASSIGN_OR_RETURN(img.host_corpus, parse_file(m["files"], "corpus", image_dir, false));
  ARMHIVE_ASSIGN_OR_RETURN(img.host_stream,
                           parse_file(m["files"], "armhive-stream", image_dir, false));
  if (m.contains("corpus") && !m["corpus"].is_null()) {
    const auto& c = m["corpus"];
    if (!c.is_object() || !c.contains("path") || !c["path"].is_string() || !c.contains("bytes") ||
        !c["bytes"].is_number_unsigned() || !c.contains("seed") ||
        !c["seed"].is_number_unsigned() || !c.contains("sha256") || !c["sha256"].is_string())
      return unprocessable("manifest \"corpus\" needs path, bytes, seed and sha256", image_dir);
    img.corpus_path = c["path"].get<std::string>();
    img.corpus_bytes = c["bytes"].get<uint64_t>();
    img.corpus_seed = c["seed"].get<uint64_t>();
    img.corpus_sha256 = c["sha256"].get<std::string>();
  }
  img.manifest = m;
  return img;
}

Result<ImageCatalog> ImageCatalog::open(std::string dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return not_found("image catalogue does not exist", dir);
  ImageCatalog cat;
  cat.dir_ = fs::absolute(dir).lexically_normal().string();
  for (const auto& entry : fs::directory_iterator(cat.dir_, ec)) {
    if (!entry.is_directory(ec)) continue;
    std::string name = entry.path().filename().string();
    if (name.empty() || name.front() == '.') continue;  // builds in progress
    fs::path manifest_path = entry.path() / "manifest.json";
    if (!fs::exists(manifest_path, ec)) continue;
    std::ifstream in(manifest_path);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      cat.broken_.emplace(name, unprocessable("image \"" + name +
                                                  "\" has a manifest that is not "
                                                  "valid JSON",
                                              manifest_path.string()));
      continue;
    }
    auto img = parse_manifest(j, entry.path().string());
    if (!img.is_ok()) {
      cat.broken_.emplace(name, img.status().annotate("image \"" + name + "\""));
      continue;
    }
    if (img->name != name) {
      cat.broken_.emplace(name, unprocessable("image directory \"" + name +
                                                  "\" holds a manifest for \"" + img->name + "\"",
                                              manifest_path.string()));
      continue;
    }
    cat.images_.emplace(name, std::move(*img));
  }
  if (ec) return unavailable("cannot read the image catalogue: " + ec.message(), dir);
  return cat;
}

Result<Image> ImageCatalog::find(std::string_view name) const {
  if (auto it = images_.find(name); it != images_.end()) return it->second;
  if (auto it = broken_.find(name); it != broken_.end()) return it->second;
  return not_found("no image \"" + std::string(name) + "\" in the catalogue " + dir_,
                   std::string(name));
}

Status ImageCatalog::verify(const Image& image) const {
  const std::string what = "image \"" + image.name + "\"";
  if (image.arch != kImageArch)
    return unprocessable(
        what + " is for architecture \"" + image.arch + "\", not " + std::string(kImageArch),
        image.name);
  std::vector<std::pair<const char*, const ImageFile*>> files = {{"disk", &image.disk}};
  if (!image.kernel.path.empty()) files.emplace_back("kernel", &image.kernel);
  if (!image.initrd.path.empty()) files.emplace_back("initrd", &image.initrd);
  if (!image.host_corpus.path.empty()) files.emplace_back("corpus", &image.host_corpus);
  if (!image.host_stream.path.empty()) files.emplace_back("armhive-stream", &image.host_stream);
  if (image.boot == "kernel" && (image.kernel.path.empty() || image.initrd.path.empty()))
    return unprocessable(what + " boots a kernel but names no kernel or initrd", image.name);
  for (const auto& [role, f] : files) {
    std::error_code ec;
    if (!fs::is_regular_file(f->path, ec))
      return unprocessable(what + " is incomplete: its " + role + " file is missing", f->path);
    uint64_t size = fs::file_size(f->path, ec);
    if (ec || size != f->bytes)
      return unprocessable(what + " is corrupt: its " + role + " file has " + std::to_string(size) +
                               " bytes, the manifest says " + std::to_string(f->bytes),
                           f->path);
    auto sum = sha256_file(f->path);
    if (!sum.is_ok()) return sum.status().annotate(what + " " + role);
    if (*sum != f->sha256)
      return unprocessable(what + " is corrupt: sha256 of its " + role + " file is " + *sum +
                               ", the manifest says " + f->sha256,
                           f->path);
  }
  return Status::ok();
}

std::vector<Image> ImageCatalog::list() const {
  std::vector<Image> out;
  for (const auto& [name, img] : images_) out.push_back(img);
  return out;
}

}  // namespace armhive
