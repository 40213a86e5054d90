#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive {

// The image catalogue: a directory with one subdirectory per image,
// `<catalog>/<name>/manifest.json` plus the (read-only, 0444) files the manifest names:
//
//   {"name", "version", "arch": "aarch64", "boot": "kernel"|"uefi", "cmdline", "login_user",
//    "files": {"disk": {"path": "disk.qcow2", "sha256", "bytes"}, "kernel": {...}, "initrd":
//    {...}, "corpus": {...}, "armhive-stream": {...}}, "corpus": {"path":
//    "/usr/share/armhive/corpus.bin", "bytes", "seed", "sha256"},
//    "packages": [{"name", "version", "arch"}], "built_at", "recipe": "tiny.toml", "recipe_sha256"}
//
// File paths in the manifest are relative to the image directory; Image holds them absolute.
// files.corpus and files.armhive-stream (optional: images built before them lack them) are the
// host-side copies of the guest's corpus and of the memory suite's static binary, built for
// the image's `arch`: benchmarks' host baselines run them on the host (daemon/bench).
// The daemon boots only images it found here and verified (sha256 of every file).
//
// Ownership and threads: ImageCatalog is a snapshot of the manifests taken by open(); it owns
// plain values and is safe to share between threads for reading (all methods are const).
// Re-open to see images built since.

struct ImageFile {
  std::string path;  // absolute
  std::string sha256;
  uint64_t bytes = 0;
};

struct Image {
  std::string name, version, arch, boot, cmdline, login_user;
  ImageFile disk, kernel, initrd;  // kernel/initrd empty for "uefi" boot
  ImageFile host_corpus;           // files.corpus: the corpus as a host file (empty: none)
  ImageFile host_stream;           // files.armhive-stream, an `arch` binary (empty: none)
  std::string corpus_path;         // in the guest; empty when the image has no corpus
  uint64_t corpus_bytes = 0;
  uint64_t corpus_seed = 0;
  std::string corpus_sha256;
  nlohmann::json manifest;  // the whole manifest, for `inspect --json` and the API
};

// The only guest architecture armhive runs (manifest "arch").
inline constexpr std::string_view kImageArch = "aarch64";

class ImageCatalog {
 public:
  // Reads every <dir>/*/manifest.json. kNotFound if `dir` does not exist. A manifest that does
  // not parse does not fail open(): find() of that name returns its error instead.
  static Result<ImageCatalog> open(std::string dir);

  // kNotFound naming the image (and the catalogue) if absent; kUnprocessable if its manifest
  // is malformed.
  Result<Image> find(std::string_view name) const;

  // Checks every file the manifest names exists with the recorded size and sha256, and that the
  // image is for aarch64. kUnprocessable naming the image and the file otherwise.
  Status verify(const Image& image) const;

  // Well-formed images, sorted by name.
  std::vector<Image> list() const;

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::map<std::string, Image, std::less<>> images_;
  std::map<std::string, Status, std::less<>> broken_;
};

// Parses one manifest; relative file paths are resolved against `image_dir`.
// kUnprocessable (with the offending key) when a required key is missing or mistyped.
Result<Image> parse_manifest(const nlohmann::json& manifest, const std::string& image_dir);

}  // namespace armhive
