#include "images/builder/recipe.h"

#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/sha256.h"
#include "base/toml_reader.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  auto ok_first = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!ok_first(s.front())) return false;
  for (char c : s)
    if (!ok_first(c) && c != '-' && c != '.') return false;
  return true;
}

// Debian package names: [a-z0-9][a-z0-9+.-]+ (policy 5.6.1).
bool valid_package(std::string_view s) {
  if (s.size() < 2) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front())) return false;
  for (char c : s)
    if (!alnum(c) && c != '+' && c != '-' && c != '.') return false;
  return true;
}

bool valid_guest_path(std::string_view p) {
  if (p.empty() || p.front() != '/' || p.size() > 4096) return false;
  for (const auto& part : fs::path(std::string(p)))
    if (part == "..") return false;
  return p.find('\0') == std::string_view::npos;
}

bool valid_module(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open file", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<uint32_t> parse_mode(const toml::node* n, const std::string& field, uint32_t fallback) {
  if (n == nullptr) return fallback;
  if (auto s = n->value<std::string>(); n->is_string() && s) {
    if (s->empty() || s->size() > 4 || s->find_first_not_of("01234567") != std::string::npos)
      return invalid_argument(field, "must be an octal string such as \"0755\"");
    return static_cast<uint32_t>(std::stoul(*s, nullptr, 8));
  }
  return invalid_argument(field, "must be an octal string such as \"0755\"");
}

}  // namespace

Result<std::vector<Recipe>> load_recipe_chain(const std::string& path) {
  constexpr size_t kMaxDepth = 8;
  std::vector<Recipe> chain;  // leaf first while loading
  ARMHIVE_ASSIGN_OR_RETURN(Recipe leaf, load_recipe(path));
  chain.push_back(std::move(leaf));
  while (!chain.back().from.empty()) {
    const Recipe& child = chain.back();
    for (const Recipe& seen : chain) {
      if (seen.name == child.from) {
        std::string cycle;
        for (const Recipe& r : chain) cycle += r.name + " -> ";
        return invalid_argument("from",
                                "recipes derive from each other in a cycle: " + cycle + child.from);
      }
    }
    if (chain.size() >= kMaxDepth)
      return invalid_argument("from", "more than " + std::to_string(kMaxDepth) +
                                          " layers of recipes (from " + chain.front().name + ")");
    fs::path parent_path = fs::path(child.source_path).parent_path() / (child.from + ".toml");
    std::error_code ec;
    if (!fs::exists(parent_path, ec)) {
      return invalid_argument("from", "recipe " + child.name + " derives from unknown image \"" +
                                          child.from + "\": there is no " + parent_path.string());
    }
    auto parent = load_recipe(parent_path.string());
    if (!parent.is_ok()) return parent.status().annotate("from " + child.name);
    if (parent->name != child.from) {
      return invalid_argument("from", parent_path.string() + " names itself \"" + parent->name +
                                          "\", not \"" + child.from + "\"");
    }
    chain.push_back(std::move(parent).value());
  }
  std::reverse(chain.begin(), chain.end());
  if (chain.size() > 1 && chain.front().kind != RecipeKind::kMmdebstrap) {
    return invalid_argument("from", chain[1].name + " derives from " + chain.front().name +
                                        ", a debs recipe: only mmdebstrap recipes can be layered");
  }
  for (size_t i = 1; i < chain.size(); ++i) {
    const Recipe& parent = chain[i - 1];
    Recipe& r = chain[i];
    auto given = [&r](std::string_view key) {
      return std::find(r.given.begin(), r.given.end(), key) != r.given.end();
    };
    r.kind = parent.kind;
    r.arch = parent.arch;
    r.suite = parent.suite;
    r.variant = parent.variant;
    r.kernel = parent.kernel;
    r.boot = parent.boot;
    r.compress_kernel = parent.compress_kernel;
    if (!given("cmdline")) r.cmdline = parent.cmdline;
    if (!given("login_user")) r.login_user = parent.login_user;
    if (!given("disk_size_mib")) r.disk_size_mib = parent.disk_size_mib;
    if (!given("corpus")) {
      r.corpus_path = parent.corpus_path;
      r.corpus_bytes = parent.corpus_bytes;
      r.corpus_seed = parent.corpus_seed;
    }
  }
  return chain;
}

std::string_view recipe_kind_name(RecipeKind kind) {
  return kind == RecipeKind::kDebs ? "debs" : "mmdebstrap";
}

Result<Recipe> parse_recipe(std::string_view text, const std::string& base_dir) {
  ARMHIVE_ASSIGN_OR_RETURN(toml::table root, parse_toml(text, "recipe", "recipe"));
  TomlReader top(root, "");
  ARMHIVE_RETURN_IF_ERROR(top.only({"name",       "version",       "from",    "arch",
                                    "kind",       "suite",         "variant", "packages",
                                    "exclude",    "kernel",        "boot",    "cmdline",
                                    "login_user", "disk_size_mib", "prune",   "compress_kernel",
                                    "initramfs",  "corpus",        "files",   "archives",
                                    "commands"}));

  Recipe r;
  Sha256 hash;
  hash.update(text);

  ARMHIVE_RETURN_IF_ERROR(top.str("name", r.name));
  if (!valid_name(r.name))
    return invalid_argument("name", "name must match [a-z0-9][a-z0-9.-]* (at most 63 characters)");
  ARMHIVE_RETURN_IF_ERROR(top.str("version", r.version));
  if (r.version.empty()) return invalid_argument("version", "version is required");
  ARMHIVE_RETURN_IF_ERROR(top.str("from", r.from));
  const bool layered = !r.from.empty();
  if (layered) {
    if (!valid_name(r.from))
      return invalid_argument("from", "from must name a recipe ([a-z0-9][a-z0-9.-]*)");
    if (r.from == r.name) return invalid_argument("from", "a recipe cannot derive from itself");
    for (const char* key : {"arch", "kind", "suite", "variant", "exclude", "kernel", "boot",
                            "prune", "compress_kernel", "initramfs"}) {
      if (root.contains(key))
        return invalid_argument(key, std::string(key) + " is inherited from " + r.from +
                                         " (from = \"" + r.from + "\"); set it in " + r.from +
                                         ".toml");
    }
    r.kind = RecipeKind::kMmdebstrap;  // checked against the parent by load_recipe_chain
  }
  for (const char* key : {"cmdline", "login_user", "disk_size_mib", "corpus"})
    if (root.contains(key)) r.given.emplace_back(key);

  if (!layered) {
    ARMHIVE_RETURN_IF_ERROR(top.str("arch", r.arch));
    if (r.arch.empty()) return invalid_argument("arch", "arch is required (\"arm64\")");
    if (r.arch != "arm64")
      return invalid_argument("arch", "architecture \"" + r.arch +
                                          "\" is not supported: armhive guests are arm64 "
                                          "(aarch64)");
    std::string kind = "debs";
    ARMHIVE_RETURN_IF_ERROR(top.str("kind", kind));
    if (kind == "debs") {
      r.kind = RecipeKind::kDebs;
    } else if (kind == "mmdebstrap") {
      r.kind = RecipeKind::kMmdebstrap;
    } else {
      return invalid_argument("kind",
                              "kind must be \"debs\" or \"mmdebstrap\", not \"" + kind + "\"");
    }
    ARMHIVE_RETURN_IF_ERROR(top.str("suite", r.suite));
    if (!valid_package(r.suite)) return invalid_argument("suite", "invalid suite name");
    ARMHIVE_RETURN_IF_ERROR(top.str("variant", r.variant));
    if (!valid_package(r.variant)) return invalid_argument("variant", "invalid variant");
  }

  ARMHIVE_RETURN_IF_ERROR(top.strings("packages", r.packages));
  if (r.packages.empty() && !layered)
    return invalid_argument("packages", "packages must list at least one package");
  ARMHIVE_RETURN_IF_ERROR(top.strings("exclude", r.exclude));
  for (const auto* list : {&r.packages, &r.exclude})
    for (const auto& p : *list)
      if (!valid_package(p))
        return invalid_argument(list == &r.packages ? "packages" : "exclude",
                                "\"" + p + "\" is not a valid Debian package name");

  if (!layered) {
    ARMHIVE_RETURN_IF_ERROR(top.str("kernel", r.kernel));
    if (r.kernel.empty())
      return invalid_argument("kernel", "kernel is required (e.g. \"linux-image-arm64\")");
    if (!valid_package(r.kernel))
      return invalid_argument("kernel", "\"" + r.kernel + "\" is not a valid Debian package name");
    ARMHIVE_RETURN_IF_ERROR(top.str("boot", r.boot));
    if (r.boot != "kernel" && r.boot != "uefi")
      return invalid_argument("boot", "boot must be \"kernel\" or \"uefi\"");
  }
  ARMHIVE_RETURN_IF_ERROR(top.str("cmdline", r.cmdline));
  if (r.cmdline.find_first_of("\n\r\0", 0, 3) != std::string::npos)
    return invalid_argument("cmdline", "cmdline must be one line");
  ARMHIVE_RETURN_IF_ERROR(top.str("login_user", r.login_user));
  if (!valid_name(r.login_user)) return invalid_argument("login_user", "invalid user name");
  ARMHIVE_RETURN_IF_ERROR(top.non_negative("disk_size_mib", r.disk_size_mib));
  if (r.disk_size_mib < 64 || r.disk_size_mib > 1024 * 1024)
    return invalid_argument("disk_size_mib", "disk_size_mib must be between 64 and 1048576");
  ARMHIVE_RETURN_IF_ERROR(top.strings("prune", r.prune));
  for (const auto& p : r.prune)
    if (!valid_guest_path(p) || p == "/")
      return invalid_argument("prune", "\"" + p + "\" is not an absolute guest path");
  ARMHIVE_RETURN_IF_ERROR(top.boolean("compress_kernel", r.compress_kernel));
  ARMHIVE_RETURN_IF_ERROR(top.strings("commands", r.commands));
  if (!r.commands.empty() && r.kind != RecipeKind::kMmdebstrap)
    return invalid_argument("commands",
                            "commands run in a chroot of a full system: only mmdebstrap recipes "
                            "(and those derived from one) may have them");
  for (const auto& cmd : r.commands) {
    if (cmd.empty() || cmd.size() > 65536 || cmd.find('\0') != std::string::npos)
      return invalid_argument("commands",
                              "each command must be non-empty shell text of at most "
                              "64 KiB");
  }

  if (const toml::node* n = root.get("initramfs")) {
    const toml::table* t = n->as_table();
    if (t == nullptr) return invalid_argument("initramfs", "must be a table");
    TomlReader sub(*t, "initramfs.");
    ARMHIVE_RETURN_IF_ERROR(sub.only({"init", "modules"}));
    std::string init_source;
    ARMHIVE_RETURN_IF_ERROR(sub.str("init", init_source));
    if (!init_source.empty()) {
      if (base_dir.empty() || fs::path(init_source).is_absolute() ||
          init_source.find("..") != std::string::npos)
        return invalid_argument("initramfs.init", "must be a path relative to the recipe");
      auto content = read_text((fs::path(base_dir) / init_source).string());
      if (!content.is_ok()) return content.status().with_field("initramfs.init");
      hash.update(init_source);
      hash.update(*content);
      r.initramfs_init = std::move(*content);
    }
    ARMHIVE_RETURN_IF_ERROR(sub.strings("modules", r.modules));
    for (const auto& m : r.modules)
      if (!valid_module(m))
        return invalid_argument("initramfs.modules", "\"" + m + "\" is not a module name");
  }
  if (!layered && r.kind == RecipeKind::kDebs && r.initramfs_init.empty())
    return invalid_argument("initramfs.init", "a \"debs\" recipe needs an initramfs init script");

  if (const toml::node* n = root.get("corpus")) {
    const toml::table* t = n->as_table();
    if (t == nullptr) return invalid_argument("corpus", "must be a table");
    TomlReader sub(*t, "corpus.");
    ARMHIVE_RETURN_IF_ERROR(sub.only({"path", "bytes", "seed"}));
    ARMHIVE_RETURN_IF_ERROR(sub.str("path", r.corpus_path));
    ARMHIVE_RETURN_IF_ERROR(sub.non_negative("bytes", r.corpus_bytes));
    ARMHIVE_RETURN_IF_ERROR(sub.non_negative("seed", r.corpus_seed));
    if (!valid_guest_path(r.corpus_path))
      return invalid_argument("corpus.path", "must be an absolute guest path");
    if (r.corpus_bytes == 0 || r.corpus_bytes > (256ull << 20))
      return invalid_argument("corpus.bytes", "must be between 1 and 268435456");
  }

  if (const toml::node* n = root.get("files")) {
    const toml::array* arr = n->as_array();
    if (arr == nullptr) return invalid_argument("files", "must be an array of tables ([[files]])");
    for (const auto& e : *arr) {
      const toml::table* t = e.as_table();
      if (t == nullptr) return invalid_argument("files", "must be an array of tables ([[files]])");
      TomlReader sub(*t, "files.");
      ARMHIVE_RETURN_IF_ERROR(
          sub.only({"path", "source", "compile", "content", "symlink", "directory", "mode"}));
      RecipeFile f;
      ARMHIVE_RETURN_IF_ERROR(sub.str("path", f.path));
      if (!valid_guest_path(f.path))
        return invalid_argument("files.path", "\"" + f.path + "\" is not an absolute guest path");
      std::string content, link, compile;
      bool has_content = t->contains("content");
      ARMHIVE_RETURN_IF_ERROR(sub.str("source", f.source));
      ARMHIVE_RETURN_IF_ERROR(sub.str("compile", compile));
      ARMHIVE_RETURN_IF_ERROR(sub.str("content", content));
      ARMHIVE_RETURN_IF_ERROR(sub.str("symlink", link));
      bool is_dir = false;
      ARMHIVE_RETURN_IF_ERROR(sub.boolean("directory", is_dir));
      int kinds = (f.source.empty() ? 0 : 1) + (has_content ? 1 : 0) + (link.empty() ? 0 : 1) +
                  (is_dir ? 1 : 0) + (compile.empty() ? 0 : 1);
      if (kinds != 1)
        return invalid_argument("files", f.path +
                                             ": give exactly one of source, compile, content, "
                                             "symlink or directory = true");
      if (!compile.empty()) {
        f.type = RecipeFile::Type::kCompiled;
        f.source = compile;
      }
      if (is_dir) {
        f.type = RecipeFile::Type::kDirectory;
        ARMHIVE_ASSIGN_OR_RETURN(f.mode, parse_mode(t->get("mode"), "files.mode", 0755));
      } else if (!link.empty()) {
        f.type = RecipeFile::Type::kSymlink;
        f.content = link;
        f.mode = 0777;
      } else {
        uint32_t default_mode = f.type == RecipeFile::Type::kCompiled ? 0755 : 0644;
        ARMHIVE_ASSIGN_OR_RETURN(f.mode, parse_mode(t->get("mode"), "files.mode", default_mode));
        if (!f.source.empty()) {
          if (base_dir.empty() || fs::path(f.source).is_absolute() ||
              f.source.find("..") != std::string::npos)
            return invalid_argument("files.source",
                                    f.path + ": source must be relative to the recipe");
          auto data = read_text((fs::path(base_dir) / f.source).string());
          if (!data.is_ok())
            return data.status().with_field(compile.empty() ? "files.source" : "files.compile");
          f.content = std::move(*data);
        } else {
          f.content = content;
        }
      }
      hash.update(f.path);
      if (f.type == RecipeFile::Type::kCompiled) hash.update(std::string_view("\0compile", 8));
      hash.update(std::string_view("\0", 1));
      hash.update(f.content);
      hash.update(std::to_string(f.mode));
      r.files.push_back(std::move(f));
    }
  }
  if (const toml::node* n = root.get("archives")) {
    const toml::array* arr = n->as_array();
    if (arr == nullptr) return invalid_argument("archives", "must be [[archives]] tables");
    for (const auto& e : *arr) {
      const toml::table* t = e.as_table();
      if (t == nullptr) return invalid_argument("archives", "must be [[archives]] tables");
      TomlReader sub(*t, "archives.");
      ARMHIVE_RETURN_IF_ERROR(sub.only({"name", "path", "source", "sha256"}));
      RecipeArchive a;
      ARMHIVE_RETURN_IF_ERROR(sub.str("name", a.name));
      ARMHIVE_RETURN_IF_ERROR(sub.str("path", a.path));
      ARMHIVE_RETURN_IF_ERROR(sub.str("source", a.source));
      ARMHIVE_RETURN_IF_ERROR(sub.str("sha256", a.sha256));
      if (!valid_name(a.name))
        return invalid_argument("archives.name", "must match [a-z0-9][a-z0-9.-]*");
      if (!valid_guest_path(a.path) || a.path == "/")
        return invalid_argument("archives.path",
                                "\"" + a.path + "\" is not an absolute guest directory");
      if (a.sha256.size() != 64 ||
          a.sha256.find_first_not_of("0123456789abcdef") != std::string::npos)
        return invalid_argument("archives.sha256",
                                a.name + ": pin the tarball's sha256 (64 lowercase hex digits)");
      if (!a.source.empty() && !fs::path(a.source).is_absolute()) {
        if (base_dir.empty() || a.source.find("..") != std::string::npos)
          return invalid_argument("archives.source",
                                  a.name + ": source must be absolute or relative to the recipe");
        a.source = (fs::path(base_dir) / a.source).string();
      }
      // The pin, not the location, is what the image depends on.
      hash.update(std::string_view("\0archive", 8));
      hash.update(a.name);
      hash.update(a.path);
      hash.update(a.sha256);
      r.archives.push_back(std::move(a));
    }
  }
  r.sha256 = hash.hex_digest();
  return r;
}

Status set_archive_source(Recipe& recipe, const std::string& name_eq_path) {
  size_t eq = name_eq_path.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == name_eq_path.size())
    return invalid_argument("archive", "must be NAME=PATH");
  const std::string name = name_eq_path.substr(0, eq);
  for (RecipeArchive& a : recipe.archives) {
    if (a.name != name) continue;
    a.source = fs::absolute(name_eq_path.substr(eq + 1)).string();
    return Status::ok();
  }
  return invalid_argument("archive", "recipe " + recipe.name + " has no archive '" + name + "'");
}

Result<Recipe> load_recipe(const std::string& path) {
  auto text = read_text(path);
  if (!text.is_ok()) return not_found("recipe not found", path);
  fs::path p = fs::absolute(path);
  auto recipe = parse_recipe(*text, p.parent_path().string());
  if (!recipe.is_ok()) return recipe.status().annotate("recipe " + p.filename().string());
  recipe->source_path = p.string();
  recipe->file_name = p.filename().string();
  return recipe;
}

}  // namespace armhive
