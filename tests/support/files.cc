#include "tests/support/files.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace armhive {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> files_containing(const std::filesystem::path& dir,
                                          const std::string& needle,
                                          const std::filesystem::path& except) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code fec;
    if (!it->is_regular_file(fec) || it->path() == except) continue;
    if (it->file_size(fec) > (uint64_t{64} << 20)) continue;
    if (read_file(it->path()).find(needle) != std::string::npos) out.push_back(it->path().string());
  }
  return out;
}

}  // namespace armhive
