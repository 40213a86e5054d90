#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace armhive {

// Helpers shared by the tests.

// The environment variable's value, or `fallback` when it is unset or empty.
std::string env_or(const char* name, const std::string& fallback);
// The whole file, or "" when it cannot be read.
std::string read_file(const std::filesystem::path& path);
// Regular files under `dir` (recursively, at most 64 MiB each, `except` skipped) that contain
// `needle`: the secret scan of the e2e suite.
std::vector<std::string> files_containing(const std::filesystem::path& dir,
                                          const std::string& needle,
                                          const std::filesystem::path& except = {});

}  // namespace armhive
