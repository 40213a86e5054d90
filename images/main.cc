// armhive-image: build image recipes into a catalogue; list, inspect and verify its images.
//   armhive-image build images/recipes/tiny.toml --catalog DIR [--cache DIR] [--layers DIR]
//                 [--force]
//   armhive-image list --catalog DIR
//   armhive-image inspect NAME --catalog DIR [--json]
//   armhive-image verify NAME --catalog DIR
// --catalog defaults to $ARMHIVE_IMAGE_CATALOG, then /var/lib/armhive/images; --cache to
// $ARMHIVE_DEB_CACHE, then /var/cache/armhive/debs; --layers to $ARMHIVE_LAYER_STORE, then
// /var/cache/armhive/layers.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "base/process_runner.h"
#include "daemon/images/catalog.h"
#include "images/builder/builder.h"
#include "images/builder/deb_cache.h"
#include "images/builder/package_index.h"
#include "images/builder/recipe.h"

namespace {

using armhive::Status;

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : fallback;
}

int fail(const Status& s) {
  std::fprintf(stderr, "armhive-image: %s\n", s.to_string().c_str());
  return s.code() == armhive::ErrorCode::kNotFound
             ? 3
             : (s.code() == armhive::ErrorCode::kUnprocessable ? 4 : 1);
}

std::string human(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1u << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  }
  return buf;
}

int cmd_build(const std::string& recipe_path, const std::string& catalog, const std::string& cache,
              const std::string& layers, bool force, bool keep_work,
              const std::vector<std::string>& archives) {
  auto chain = armhive::load_recipe_chain(recipe_path);
  if (!chain.is_ok()) return fail(chain.status());
  armhive::Recipe& recipe = chain->back();
  for (const std::string& a : archives) {
    // An archive belongs to the layer that names it.
    armhive::Status s = armhive::invalid_argument(
        "archive", "no layer of " + recipe.name + " has the archive in " + a);
    for (armhive::Recipe& layer : *chain) {
      s = armhive::set_archive_source(layer, a);
      if (s.is_ok()) break;
    }
    if (!s.is_ok()) return fail(s);
  }
  armhive::SubprocessRunner runner;
  armhive::AptPackageIndex index(runner);
  armhive::ImageBuilder builder(runner, index);
  armhive::BuildOptions options{
      .catalog_dir = catalog,
      .cache_dir = cache,
      .layer_dir = layers,
      .force = force,
      .keep_work = keep_work,
      .progress = [started = std::chrono::steady_clock::now()](std::string_view line) {
        double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        std::printf("[build %6.1fs] %.*s\n", s, static_cast<int>(line.size()), line.data());
        std::fflush(stdout);
      }};
  std::string from;
  for (size_t i = 0; i + 1 < chain->size(); ++i) from += (*chain)[i].name + " <- ";
  std::printf("[build] recipe %s (%s, %ssha256 %s)\n", recipe.file_name.c_str(),
              std::string(armhive::recipe_kind_name(recipe.kind)).c_str(),
              from.empty() ? "" : ("layers " + from + recipe.name + ", ").c_str(),
              recipe.sha256.c_str());
  auto result = builder.build(*chain, options);
  if (!result.is_ok()) return fail(result.status().annotate("build " + recipe.name));
  for (const armhive::LayerOutcome& l : result->layers) {
    std::printf("  layer %-16s %s  %s\n", l.name.c_str(), l.key.substr(0, 12).c_str(),
                l.reused ? "kept" : "built");
  }
  std::printf("%s %s -> %s\n",
              result->up_to_date ? "up to date:" : "built:", result->image.name.c_str(),
              result->image.disk.path.c_str());
  return 0;
}

armhive::Result<armhive::ImageCatalog> open_catalog(const std::string& dir) {
  return armhive::ImageCatalog::open(dir);
}

int cmd_list(const std::string& catalog) {
  auto cat = open_catalog(catalog);
  if (!cat.is_ok()) return fail(cat.status());
  std::printf("%-16s %-10s %-8s %-7s %10s  %s\n", "NAME", "VERSION", "ARCH", "BOOT", "SIZE",
              "BUILT");
  for (const auto& img : cat->list()) {
    uint64_t size = img.disk.bytes + img.kernel.bytes + img.initrd.bytes;
    std::string built = img.manifest.value("built_at", "");
    std::printf("%-16s %-10s %-8s %-7s %10s  %s\n", img.name.c_str(), img.version.c_str(),
                img.arch.c_str(), img.boot.c_str(), human(size).c_str(), built.c_str());
  }
  return 0;
}

int cmd_inspect(const std::string& name, const std::string& catalog, bool json) {
  auto cat = open_catalog(catalog);
  if (!cat.is_ok()) return fail(cat.status());
  auto img = cat->find(name);
  if (!img.is_ok()) return fail(img.status());
  if (json) {
    std::cout << img->manifest.dump(2) << "\n";
    return 0;
  }
  std::printf(
      "name:       %s\nversion:    %s\narch:       %s\nboot:       %s\ncmdline:    %s\n"
      "login user: %s\nbuilt at:   %s\nrecipe:     %s (sha256 %s)\n",
      img->name.c_str(), img->version.c_str(), img->arch.c_str(), img->boot.c_str(),
      img->cmdline.c_str(), img->login_user.c_str(), img->manifest.value("built_at", "").c_str(),
      img->manifest.value("recipe", "").c_str(), img->manifest.value("recipe_sha256", "").c_str());
  for (const auto& [role, f] : {std::pair{"disk", &img->disk}, std::pair{"kernel", &img->kernel},
                                std::pair{"initrd", &img->initrd}}) {
    if (f->path.empty()) continue;
    std::printf("%-11s %s  %s  sha256 %s\n", (std::string(role) + ":").c_str(), f->path.c_str(),
                human(f->bytes).c_str(), f->sha256.c_str());
  }
  if (!img->corpus_path.empty())
    std::printf("corpus:     %s  %llu bytes  seed %llu  sha256 %s\n", img->corpus_path.c_str(),
                static_cast<unsigned long long>(img->corpus_bytes),
                static_cast<unsigned long long>(img->corpus_seed), img->corpus_sha256.c_str());
  // The chain of layers it was built from, base first (mmdebstrap images).
  const auto layers = img->manifest.value("layers", nlohmann::json::array());
  for (size_t i = 0; i < layers.size(); ++i) {
    if (!layers[i].is_object()) continue;
    std::printf("%-11s %-16s key %s\n", i == 0 ? "layers:" : "",
                layers[i].value("name", "").c_str(), layers[i].value("key", "").c_str());
  }
  const auto& pkgs = img->manifest.value("packages", nlohmann::json::array());
  std::printf("packages:   %zu\n", pkgs.size());
  for (const auto& p : pkgs)
    std::printf("  %-32s %-32s %s\n", p.value("name", "").c_str(), p.value("version", "").c_str(),
                p.value("arch", "").c_str());
  return 0;
}

int cmd_verify(const std::string& name, const std::string& catalog) {
  auto cat = open_catalog(catalog);
  if (!cat.is_ok()) return fail(cat.status());
  auto img = cat->find(name);
  if (!img.is_ok()) return fail(img.status());
  Status s = cat->verify(*img);
  if (!s.is_ok()) return fail(s);
  std::printf("ok: %s (%s) verified: every file matches its sha256\n", img->name.c_str(),
              img->version.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"armhive-image: build and catalogue armhive guest images"};
  app.require_subcommand(1);
  std::string catalog = env_or("ARMHIVE_IMAGE_CATALOG", "/var/lib/armhive/images");
  std::string cache = env_or("ARMHIVE_DEB_CACHE", armhive::DebCache::kDefaultDir);
  std::string layers = env_or("ARMHIVE_LAYER_STORE", armhive::kDefaultLayerDir);
  std::string recipe, name;
  bool force = false, keep_work = false, json = false;
  std::vector<std::string> archives;  // --archive NAME=PATH

  auto* build = app.add_subcommand("build", "build a recipe into the catalogue");
  build->add_option("recipe", recipe, "recipe file (images/recipes/NAME.toml)")->required();
  build->add_option("--catalog", catalog, "image catalogue directory")->capture_default_str();
  build->add_option("--cache", cache, "downloaded .deb cache")->capture_default_str();
  build
      ->add_option("--layers", layers, "kept root filesystems of mmdebstrap layers, by content key")
      ->capture_default_str();
  build->add_flag("--force", force,
                  "rebuild even if the catalogue is up to date (every layer, none kept)");
  build->add_flag("--keep-work", keep_work, "keep the scratch directory (debugging)");
  build->add_option("--archive", archives,
                    "NAME=PATH: the tarball of the recipe's [[archives]] NAME (its sha256 is "
                    "pinned in the recipe)");

  auto* list = app.add_subcommand("list", "list catalogued images");
  list->add_option("--catalog", catalog, "image catalogue directory")->capture_default_str();

  auto* inspect = app.add_subcommand("inspect", "show an image's manifest");
  inspect->add_option("name", name, "image name")->required();
  inspect->add_option("--catalog", catalog, "image catalogue directory")->capture_default_str();
  inspect->add_flag("--json", json, "print the manifest as JSON");

  auto* verify = app.add_subcommand("verify", "check an image's files against its manifest");
  verify->add_option("name", name, "image name")->required();
  verify->add_option("--catalog", catalog, "image catalogue directory")->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  if (*build) return cmd_build(recipe, catalog, cache, layers, force, keep_work, archives);
  if (*list) return cmd_list(catalog);
  if (*inspect) return cmd_inspect(name, catalog, json);
  if (*verify) return cmd_verify(name, catalog);
  return 2;
}
