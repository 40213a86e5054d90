#pragma once

#include <filesystem>
#include <string>

namespace armhive {

// Helpers shared by the tests.

// The environment variable's value, or `fallback` when it is unset or empty.
std::string env_or(const char* name, const std::string& fallback);
// The whole file, or "" when it cannot be read.
std::string read_file(const std::filesystem::path& path);

}  // namespace armhive
