#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace armhive::bench_test {

inline std::string fixture_path(const std::string& name) {
  return std::string(ARMHIVE_FIXTURES_DIR) + "/bench/" + name;
}

inline std::string read_fixture(const std::string& name) {
  std::ifstream in(fixture_path(name), std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace armhive::bench_test
