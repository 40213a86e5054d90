#include "tests/support/response_recorder.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace armhive {

void record_response(const std::string& method, const std::string& path, int status,
                     const std::string& content_type, const std::string& reply_body) {
  const char* dir = std::getenv("ARMHIVE_API_RESPONSES_DIR");
  if (dir == nullptr || *dir == '\0') return;
  static std::atomic<int> counter{0};
  std::filesystem::create_directories(dir);
  nlohmann::json body;
  if (content_type.find("json") != std::string::npos) {
    if (content_type.find("ndjson") != std::string::npos) {
      body = nlohmann::json::array();
      size_t pos = 0;
      while (pos < reply_body.size()) {
        size_t nl = reply_body.find('\n', pos);
        std::string line = reply_body.substr(pos, nl - pos);
        if (!line.empty()) body.push_back(nlohmann::json::parse(line, nullptr, false));
        if (nl == std::string::npos) break;
        pos = nl + 1;
      }
    } else {
      body = nlohmann::json::parse(reply_body, nullptr, false);
    }
  } else {
    body = reply_body.substr(0, 4096);
  }
  std::string q = path.substr(0, path.find('?'));
  nlohmann::json j = {{"method", method},
                      {"path", q},
                      {"status", status},
                      {"content_type", content_type},
                      {"body", body}};
  char name[64];
  std::snprintf(name, sizeof name, "/%d-%06d.json", static_cast<int>(getpid()), ++counter);
  std::ofstream(std::string(dir) + name)
      << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace armhive
