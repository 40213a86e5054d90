#include "images/builder/layer_store.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>

#include "base/sha256.h"
#include "base/utc_time.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

std::string dir_name(const std::string& name, const std::string& key) {
  return name + "-" + key.substr(0, 16);
}

}  // namespace

std::string layer_key(const LayerInputs& inputs) {
  std::vector<std::string> packages = inputs.packages;
  std::sort(packages.begin(), packages.end());
  Sha256 hash;
  // Each part framed by its length, so no two different inputs hash the same text.
  auto part = [&hash](std::string_view tag, std::string_view value) {
    hash.update(tag);
    hash.update(std::to_string(value.size()));
    hash.update(std::string_view(":", 1));
    hash.update(value);
  };
  part("armhive-layer-v1", "");
  part("recipe", inputs.recipe_sha256);
  part("parent", inputs.parent_key);
  part("index", inputs.index_digest);
  for (const std::string& p : packages) part("package", p);
  return hash.hex_digest();
}

std::vector<LayerStore::Entry> LayerStore::entries() const {
  std::vector<Entry> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (!e.is_directory(ec) || e.path().filename().string().front() == '.') continue;
    std::ifstream in(e.path() / "layer.json");
    if (!in) continue;
    nlohmann::json info = nlohmann::json::parse(in, nullptr, false);
    if (info.is_discarded() || !info.is_object() || !info.contains("name") ||
        !info.contains("key") || !info["name"].is_string() || !info["key"].is_string()) {
      continue;
    }
    Entry entry{.name = info["name"].get<std::string>(),
                .key = info["key"].get<std::string>(),
                .parent = info.value("parent", std::string()),
                .dir = e.path(),
                .info = info};
    if (!fs::exists(entry.tar(), ec)) continue;
    out.push_back(std::move(entry));
  }
  return out;
}

Result<std::optional<LayerStore::Entry>> LayerStore::find(const std::string& name,
                                                          const std::string& key,
                                                          const std::string& parent) const {
  for (Entry& e : entries()) {
    if (e.key != key) continue;
    if (e.name != name || e.parent != parent) {
      return invalid_argument("from", "layer key " + key.substr(0, 16) + " of " + name +
                                          " is already held by layer " + e.name + " in " +
                                          e.dir.string() + "; remove that directory");
    }
    return std::optional<Entry>(std::move(e));
  }
  return std::optional<Entry>();
}

Result<LayerStore::Entry> LayerStore::put(const std::string& name, const std::string& key,
                                          const std::string& parent, const fs::path& tar,
                                          nlohmann::json info) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return unavailable("cannot create the layer store: " + ec.message(), dir_.string());
  const fs::path final_dir = dir_ / dir_name(name, key);
  const fs::path stage = dir_ / ("." + dir_name(name, key) + "-" + std::to_string(::getpid()));
  fs::remove_all(stage, ec);
  fs::create_directories(stage, ec);
  if (ec) return unavailable("cannot create " + stage.string() + ": " + ec.message());
  fs::rename(tar, stage / "rootfs.tar", ec);
  if (ec) {  // another filesystem
    ec.clear();
    fs::copy_file(tar, stage / "rootfs.tar", ec);
    if (ec) {
      fs::remove_all(stage, ec);
      return unavailable("cannot keep the layer's root filesystem: " + ec.message(),
                         stage.string());
    }
  }
  info["name"] = name;
  info["key"] = key;
  info["parent"] = parent;
  info["bytes"] = static_cast<uint64_t>(fs::file_size(stage / "rootfs.tar", ec));
  info["kept_at"] = utc_now();
  info["kept_ns"] = static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  {
    std::ofstream out(stage / "layer.json", std::ios::trunc);
    out << info.dump(2) << "\n";
    if (!out) {
      fs::remove_all(stage, ec);
      return unavailable("cannot write layer.json", stage.string());
    }
  }
  fs::remove_all(final_dir, ec);
  fs::rename(stage, final_dir, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove_all(stage, ignored);
    return unavailable("cannot publish the layer: " + ec.message(), final_dir.string());
  }
  return Entry{.name = name, .key = key, .parent = parent, .dir = final_dir, .info = info};
}

std::vector<fs::path> LayerStore::prune(const std::string& name, const std::string& key,
                                        size_t keep) {
  std::vector<Entry> all = entries();
  std::vector<Entry> mine;
  for (const Entry& e : all)
    if (e.name == name) mine.push_back(e);
  std::sort(mine.begin(), mine.end(), [](const Entry& a, const Entry& b) {
    return a.info.value("kept_ns", int64_t{0}) > b.info.value("kept_ns", int64_t{0});
  });
  std::vector<fs::path> removed;
  std::set<std::string> gone;
  for (size_t i = keep; i < mine.size(); ++i) {
    if (mine[i].key != key) gone.insert(mine[i].key);
  }
  for (const Entry& e : all) {
    if (gone.count(e.key) == 0) continue;
    bool is_parent = false;
    for (const Entry& other : all)
      is_parent = is_parent || (other.parent == e.key && gone.count(other.key) == 0);
    if (is_parent) continue;
    std::error_code ec;
    fs::remove_all(e.dir, ec);
    if (!ec) removed.push_back(e.dir);
  }
  return removed;
}

}  // namespace armhive
