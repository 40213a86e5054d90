#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/result.h"

namespace armhive {

// A bootable image as the engine needs it (resolved from the image catalogue by name). Plain
// data.
struct BootImage {
  std::string name;
  std::string version;
  std::string base_disk;
  std::string kernel;
  std::string initrd;
  std::string cmdline;
  std::string login_user = "root";
  // The image's deterministic compression corpus, for benchmarks (empty path: none).
  std::string corpus_path;
  uint64_t corpus_bytes = 0;
  uint64_t corpus_seed = 0;
  std::string corpus_sha256;
  // Host-side copies for benchmarks' host baselines (empty: the image has none): the corpus as
  // a host file, and the memory suite's static armhive-stream built for `arch`.
  std::string host_corpus_file;
  std::string host_stream_file;
  std::string arch = "aarch64";  // the image's (and its binaries') architecture
};

// Resolves a pool's image name. kNotFound / kUnprocessable make leases wait with that reason.
// May hash files on a first call: the engine never calls it with its lock held.
using ImageResolver = std::function<Result<BootImage>(const std::string& image)>;

}  // namespace armhive
