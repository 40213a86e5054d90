#include "images/builder/package_index.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "base/sha256.h"

namespace armhive {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(
        s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

}  // namespace

std::vector<PackageInfo> parse_control_stanzas(std::string_view text) {
  std::vector<PackageInfo> out;
  PackageInfo cur;
  std::string* last = nullptr;
  auto flush = [&] {
    if (!cur.name.empty()) out.push_back(std::move(cur));
    cur = PackageInfo{};
    last = nullptr;
  };
  for (std::string_view line : split(text, '\n')) {
    if (trim(line).empty()) {
      flush();
      continue;
    }
    if (line.front() == ' ' || line.front() == '\t') {  // continuation
      if (last != nullptr) {
        last->push_back(' ');
        last->append(trim(line));
      }
      continue;
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = line.substr(0, colon);
    std::string value(trim(line.substr(colon + 1)));
    last = nullptr;
    if (key == "Package") {
      cur.name = value;
    } else if (key == "Version") {
      cur.version = value;
    } else if (key == "Architecture") {
      cur.arch = value;
    } else if (key == "Depends") {
      cur.depends = value;
      last = &cur.depends;
    } else if (key == "Pre-Depends") {
      cur.pre_depends = value;
      last = &cur.pre_depends;
    } else if (key == "Provides") {
      cur.provides = value;
      last = &cur.provides;
    } else if (key == "Size") {
      cur.size = std::strtoull(value.c_str(), nullptr, 10);
    } else if (key == "SHA256") {
      cur.sha256 = value;
    }
  }
  flush();
  return out;
}

std::vector<std::vector<std::string>> parse_dependency_field(std::string_view field) {
  std::vector<std::vector<std::string>> groups;
  if (trim(field).empty()) return groups;
  for (std::string_view group : split(field, ',')) {
    std::vector<std::string> alts;
    for (std::string_view alt : split(group, '|')) {
      alt = trim(alt);
      size_t end = alt.find_first_of(" (:[<");
      std::string_view name = alt.substr(0, end);
      if (!name.empty()) alts.emplace_back(name);
    }
    if (!alts.empty()) groups.push_back(std::move(alts));
  }
  return groups;
}

Status AptPackageIndex::ensure_lists(std::string_view arch) {
  if (lists_checked_) return Status::ok();
  lists_checked_ = true;
  namespace fs = std::filesystem;
  std::string needle = "binary-" + std::string(arch) + "_Packages";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(lists_dir_, ec))
    if (e.path().filename().string().find(needle) != std::string::npos) return Status::ok();
  auto r = runner_.run({.argv = {"apt-get", "update", "-q"}, .timeout = std::chrono::minutes(10)});
  if (!r.is_ok()) return r.status().annotate("apt-get update");
  if (!r->ok())
    return unavailable("apt-get update failed (is " + std::string(arch) +
                       " a dpkg foreign architecture?): " + r->err);
  return Status::ok();
}

Result<std::map<std::string, PackageInfo>> PackageIndex::show_many(
    const std::vector<std::string>& names, std::string_view arch) {
  std::map<std::string, PackageInfo> out;
  for (const auto& n : names) {
    auto p = show(n, arch);
    if (p.is_ok()) {
      out.emplace(n, *p);
    } else if (p.status().code() != ErrorCode::kNotFound) {
      return p.status();
    }
  }
  return out;
}

Result<PackageInfo> AptPackageIndex::show(std::string_view name, std::string_view arch) {
  ARMHIVE_ASSIGN_OR_RETURN(auto found, show_many({std::string(name)}, arch));
  if (auto it = found.find(std::string(name)); it != found.end()) return it->second;
  return not_found(
      "no " + std::string(arch) + " package \"" + std::string(name) + "\" in apt's cache",
      std::string(name));
}

Result<std::map<std::string, PackageInfo>> AptPackageIndex::show_many(
    const std::vector<std::string>& names, std::string_view arch) {
  std::map<std::string, PackageInfo> out;
  std::vector<std::string> ask;
  for (const auto& n : names) {
    if (auto it = memo_.find(n + ":" + std::string(arch)); it != memo_.end()) {
      out.emplace(n, it->second);
    } else if (std::find(ask.begin(), ask.end(), n) == ask.end()) {
      ask.push_back(n);
    }
  }
  if (ask.empty()) return out;
  ARMHIVE_RETURN_IF_ERROR(ensure_lists(arch));
  // First NAME:ARCH, then plain NAME for the ones left (Architecture: all packages).
  for (int pass = 0; pass < 2 && !ask.empty(); ++pass) {
    std::vector<std::string> argv = {"apt-cache", "show", "--no-all-versions"};
    for (const auto& n : ask) argv.push_back(pass == 0 ? n + ":" + std::string(arch) : n);
    auto r = runner_.run({.argv = argv, .timeout = std::chrono::minutes(2)});
    if (!r.is_ok()) return r.status().annotate("apt-cache show");
    // apt-cache exits non-zero only when nothing at all matched (or on real errors, which
    // then also show as missing packages).
    for (auto& p : parse_control_stanzas(r->out)) {
      if (p.arch != arch && !(p.arch == "all" && pass == 1)) continue;
      if (std::find(ask.begin(), ask.end(), p.name) == ask.end()) continue;
      memo_.emplace(p.name + ":" + std::string(arch), p);
      out.emplace(p.name, p);
    }
    std::erase_if(ask, [&](const std::string& n) { return out.contains(n); });
  }
  return out;
}

Result<ResolvedPackages> resolve_packages(const Recipe& recipe, PackageIndex& index) {
  ResolvedPackages out;

  // Kernel: follow the meta package's linux-image-* dependency to the versioned package.
  auto kernel = index.show(recipe.kernel, recipe.arch);
  if (!kernel.is_ok()) {
    if (kernel.status().code() == ErrorCode::kNotFound)
      return invalid_argument("kernel", "unknown kernel package \"" + recipe.kernel + "\"");
    return kernel.status();
  }
  PackageInfo k = *kernel;
  for (int depth = 0; depth < 4; ++depth) {
    std::string next;
    for (const auto& group : parse_dependency_field(k.depends))
      for (const auto& alt : group)
        if (alt.starts_with("linux-image-") && next.empty()) next = alt;
    if (next.empty()) break;
    auto n = index.show(next, recipe.arch);
    if (!n.is_ok()) return n.status().annotate("kernel " + recipe.kernel);
    k = *n;
  }
  static constexpr std::string_view kPrefix = "linux-image-";
  if (!k.name.starts_with(kPrefix) || k.name.find("arm64") == std::string::npos ||
      k.name.find_first_of("0123456789") == std::string::npos)
    return invalid_argument(
        "kernel",
        "\"" + recipe.kernel + "\" does not lead to a versioned arm64 linux-image package");
  out.kernel = k;
  out.kernel_release = k.name.substr(kPrefix.size());

  std::set<std::string> excluded(recipe.exclude.begin(), recipe.exclude.end());
  std::map<std::string, PackageInfo> chosen;
  std::set<std::string> provided;
  std::vector<std::string> level;  // packages added in the last round

  auto add = [&](const PackageInfo& p) {
    if (chosen.contains(p.name)) return;
    chosen.emplace(p.name, p);
    for (const auto& group : parse_dependency_field(p.provides))
      for (const auto& alt : group) provided.insert(alt);
    level.push_back(p.name);
  };
  auto satisfied = [&](const std::vector<std::string>& group) {
    return std::any_of(group.begin(), group.end(), [&](const std::string& a) {
      return chosen.contains(a) || excluded.contains(a) || provided.contains(a);
    });
  };

  ARMHIVE_ASSIGN_OR_RETURN(auto listed, index.show_many(recipe.packages, recipe.arch));
  for (const auto& name : recipe.packages) {
    auto it = listed.find(name);
    if (it == listed.end())
      return invalid_argument("packages", "unknown package \"" + name + "\": apt has no " +
                                              recipe.arch + " package of that name");
    add(it->second);
  }

  // Breadth-first, one apt-cache call per round for every candidate alternative.
  while (recipe.kind == RecipeKind::kDebs && !level.empty()) {
    std::vector<std::pair<std::string, std::vector<std::string>>> open;  // (dependent, group)
    std::vector<std::string> wanted;
    for (const auto& name : level) {
      const PackageInfo& p = chosen.at(name);
      auto groups = parse_dependency_field(p.pre_depends);
      auto deps = parse_dependency_field(p.depends);
      groups.insert(groups.end(), deps.begin(), deps.end());
      for (auto& g : groups) {
        if (satisfied(g)) continue;
        for (const auto& a : g) wanted.push_back(a);
        open.emplace_back(name, std::move(g));
      }
    }
    level.clear();
    if (open.empty()) break;
    ARMHIVE_ASSIGN_OR_RETURN(auto found, index.show_many(wanted, recipe.arch));
    for (const auto& [dependent, group] : open) {
      if (satisfied(group)) continue;  // an earlier group of this round chose it
      bool done = false;
      for (const auto& alt : group) {
        if (auto it = found.find(alt); it != found.end()) {
          add(it->second);
          done = true;
          break;
        }
      }
      if (!done) {
        std::string alts;
        for (const auto& a : group) alts += (alts.empty() ? "" : " | ") + a;
        return invalid_argument("packages", "cannot resolve dependency \"" + alts + "\" of \"" +
                                                dependent + "\" (add a package or exclude it)");
      }
    }
  }
  for (auto& [name, p] : chosen) out.packages.push_back(std::move(p));
  return out;
}

}  // namespace armhive

namespace armhive {

Result<std::string> AptPackageIndex::release_digest(std::string_view suite) {
  namespace fs = std::filesystem;
  // The suite's (In)Release files name the sha256 of every Packages index, which names the
  // sha256 of every .deb: their digest stands for the whole state of the mirror apt last saw.
  std::vector<fs::path> files;
  std::error_code ec;
  const std::string in_release = "_dists_" + std::string(suite) + "_InRelease";
  const std::string release = "_dists_" + std::string(suite) + "_Release";
  for (const auto& e : fs::directory_iterator(lists_dir_, ec)) {
    const std::string n = e.path().filename().string();
    auto ends_with = [&n](const std::string& tail) {
      return n.size() >= tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0;
    };
    if (ends_with(in_release) || ends_with(release)) files.push_back(e.path());
  }
  if (files.empty()) {
    return unavailable(
        "apt has no Release file for suite " + std::string(suite) + " (run apt-get update)",
        lists_dir_);
  }
  std::sort(files.begin(), files.end());
  Sha256 hash;
  for (const fs::path& f : files) {
    ARMHIVE_ASSIGN_OR_RETURN(std::string sum, sha256_file(f.string()));
    hash.update(f.filename().string());
    hash.update(sum);
  }
  return hash.hex_digest();
}

}  // namespace armhive
