#include "daemon/bench/mtu_journal.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

namespace armhive {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view kPrefix = "mtu-journal-";
constexpr std::string_view kSuffix = ".json";

// A journal names links and MTUs only: anything else in it is not ours to pass to `ip`.
Result<std::vector<MtuStep>> read_journal(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return unavailable("cannot read", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  try {
    json j = json::parse(text.str());
    std::vector<MtuStep> links;
    for (const json& l : j.at("links")) {
      MtuStep s;
      s.link = l.at("link").get<std::string>();
      s.to = l.at("mtu").get<int>();
      if (s.link.empty() || s.link.size() > 15 || s.link.front() == '-' ||
          s.link.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   "0123456789._-") != std::string::npos ||
          s.to < 68 || s.to > 65535) {
        return invalid_argument("links", "not an interface name and MTU");
      }
      links.push_back(std::move(s));
    }
    return links;
  } catch (const json::exception& e) {
    return invalid_argument("links", std::string("not an MTU journal: ") + e.what());
  }
}

}  // namespace

std::string mtu_journal_path(const std::string& runs_dir, const std::string& run_id) {
  return (fs::path(runs_dir) / (std::string(kPrefix) + run_id + std::string(kSuffix))).string();
}

Status write_mtu_journal(const std::string& path, const std::vector<MtuStep>& steps) {
  json links = json::array();
  for (const MtuStep& s : steps) links.push_back({{"link", s.link}, {"mtu", s.from}});
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json{{"links", links}}.dump() << "\n";
    out.flush();
    if (!out) return unavailable("cannot write the MTU journal", tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return unavailable("cannot write the MTU journal: " + ec.message(), path);
  return Status::ok();
}

void remove_mtu_journal(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
}

std::vector<MtuStep> restore_mtu_journals(ProcessRunner& processes, const std::string& runs_dir,
                                          std::chrono::milliseconds timeout,
                                          std::vector<std::string>& errors) {
  std::vector<std::pair<fs::file_time_type, fs::path>> journals;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(runs_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0 || name.size() < kSuffix.size() ||
        name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
      continue;
    }
    std::error_code tec;
    journals.emplace_back(fs::last_write_time(e.path(), tec), e.path());
  }
  std::sort(journals.begin(), journals.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<MtuStep> restored;
  for (const auto& [when, path] : journals) {
    auto links = read_journal(path);
    if (!links.is_ok()) {
      errors.push_back(path.string() + ": " + links.status().message());
      continue;
    }
    for (const MtuStep& l : *links) {
      auto r =
          processes.run({.argv = {"ip", "link", "set", "dev", l.link, "mtu", std::to_string(l.to)},
                         .timeout = timeout});
      if (r.is_ok() && r->ok()) {
        restored.push_back(l);
      } else {
        errors.push_back("restoring the MTU of " + l.link + " to " + std::to_string(l.to) + ": " +
                         (r.is_ok() ? r->err : r.status().message()));
      }
    }
    remove_mtu_journal(path.string());
  }
  return restored;
}

}  // namespace armhive
