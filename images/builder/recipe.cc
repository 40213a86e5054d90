#include "images/builder/recipe.h"

#include <toml++/toml.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "daemon/images/sha256.h"

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

// Reads an optional string key; kInvalidArgument if present with another type.
Status get_string(const toml::table& t, std::string_view key, std::string& out,
                  std::string_view prefix = {}) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::ok();
  auto v = n->value<std::string>();
  if (!v || !n->is_string())
    return invalid_argument(std::string(prefix) + std::string(key), "must be a string");
  out = *v;
  return Status::ok();
}

Status get_uint(const toml::table& t, std::string_view key, uint64_t& out,
                std::string_view prefix = {}) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::ok();
  auto v = n->value<int64_t>();
  if (!n->is_integer() || !v || *v < 0)
    return invalid_argument(std::string(prefix) + std::string(key),
                            "must be a non-negative integer");
  out = static_cast<uint64_t>(*v);
  return Status::ok();
}

Status get_strings(const toml::table& t, std::string_view key, std::vector<std::string>& out,
                   std::string_view prefix = {}) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::ok();
  const toml::array* arr = n->as_array();
  std::string field = std::string(prefix) + std::string(key);
  if (arr == nullptr) return invalid_argument(field, "must be an array of strings");
  for (const auto& e : *arr) {
    auto v = e.value<std::string>();
    if (!e.is_string() || !v) return invalid_argument(field, "must be an array of strings");
    out.push_back(*v);
  }
  return Status::ok();
}

Status check_keys(const toml::table& t, const std::set<std::string_view>& known,
                  std::string_view prefix) {
  for (const auto& [k, v] : t) {
    (void)v;
    if (!known.contains(k.str()))
      return invalid_argument(std::string(prefix) + std::string(k.str()), "unknown key");
  }
  return Status::ok();
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

std::string_view recipe_kind_name(RecipeKind kind) {
  return kind == RecipeKind::kDebs ? "debs" : "mmdebstrap";
}

Result<Recipe> parse_recipe(std::string_view text, const std::string& base_dir) {
  toml::table root;
  try {
    root = toml::parse(text);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << "TOML syntax error at line " << e.source().begin.line << ": " << e.description();
    return invalid_argument("recipe", msg.str());
  }
  ARMHIVE_RETURN_IF_ERROR(
      check_keys(root,
                 {"name", "version", "arch", "kind", "suite", "variant", "packages", "exclude",
                  "kernel", "boot", "cmdline", "login_user", "disk_size_mib", "prune",
                  "compress_kernel", "initramfs", "corpus", "files"},
                 ""));

  Recipe r;
  Sha256 hash;
  hash.update(text);

  ARMHIVE_RETURN_IF_ERROR(get_string(root, "name", r.name));
  if (!valid_name(r.name))
    return invalid_argument("name", "name must match [a-z0-9][a-z0-9.-]* (at most 63 characters)");
  ARMHIVE_RETURN_IF_ERROR(get_string(root, "version", r.version));
  if (r.version.empty()) return invalid_argument("version", "version is required");
  ARMHIVE_RETURN_IF_ERROR(get_string(root, "arch", r.arch));
  if (r.arch.empty()) return invalid_argument("arch", "arch is required (\"arm64\")");
  if (r.arch != "arm64")
    return invalid_argument("arch", "architecture \"" + r.arch +
                                        "\" is not supported: armhive guests are arm64 (aarch64)");
  std::string kind = "debs";
  ARMHIVE_RETURN_IF_ERROR(get_string(root, "kind", kind));
  if (kind == "debs") {
    r.kind = RecipeKind::kDebs;
  } else if (kind == "mmdebstrap") {
    r.kind = RecipeKind::kMmdebstrap;
  } else {
    return invalid_argument("kind",
                            "kind must be \"debs\" or \"mmdebstrap\", not \"" + kind + "\"");
  }
  ARMHIVE_RETURN_IF_ERROR(get_string(root, "suite", r.suite));
  if (!valid_package(r.suite)) return invalid_argument("suite", "invalid suite name");
  ARMHIVE_RETURN_IF_ERROR(get_string(root, "variant", r.variant));
  if (!valid_package(r.variant)) return invalid_argument("variant", "invalid variant");

  ARMHIVE_RETURN_IF_ERROR(get_strings(root, "packages", r.packages));
  if (r.packages.empty())
    return invalid_argument("packages", "packages must list at least one package");
  ARMHIVE_RETURN_IF_ERROR(get_strings(root, "exclude", r.exclude));
  for (const auto* list : {&r.packages, &r.exclude})
    for (const auto& p : *list)
      if (!valid_package(p))
        return invalid_argument(list == &r.packages ? "packages" : "exclude",
                                "\"" + p + "\" is not a valid Debian package name");

  ARMHIVE_RETURN_IF_ERROR(get_string(root, "kernel", r.kernel));
  if (r.kernel.empty())
    return invalid_argument("kernel", "kernel is required (e.g. \"linux-image-arm64\")");
  if (!valid_package(r.kernel))
    return invalid_argument("kernel", "\"" + r.kernel + "\" is not a valid Debian package name");

  ARMHIVE_RETURN_IF_ERROR(get_string(root, "boot", r.boot));
  if (r.boot != "kernel" && r.boot != "uefi")
    return invalid_argument("boot", "boot must be \"kernel\" or \"uefi\"");
  ARMHIVE_RETURN_IF_ERROR(get_string(root, "cmdline", r.cmdline));
  if (r.cmdline.find_first_of("\n\r\0", 0, 3) != std::string::npos)
    return invalid_argument("cmdline", "cmdline must be one line");
  ARMHIVE_RETURN_IF_ERROR(get_string(root, "login_user", r.login_user));
  if (!valid_name(r.login_user)) return invalid_argument("login_user", "invalid user name");
  ARMHIVE_RETURN_IF_ERROR(get_uint(root, "disk_size_mib", r.disk_size_mib));
  if (r.disk_size_mib < 64 || r.disk_size_mib > 1024 * 1024)
    return invalid_argument("disk_size_mib", "disk_size_mib must be between 64 and 1048576");
  ARMHIVE_RETURN_IF_ERROR(get_strings(root, "prune", r.prune));
  for (const auto& p : r.prune)
    if (!valid_guest_path(p) || p == "/")
      return invalid_argument("prune", "\"" + p + "\" is not an absolute guest path");
  if (const toml::node* n = root.get("compress_kernel")) {
    auto b = n->value<bool>();
    if (!n->is_boolean() || !b) return invalid_argument("compress_kernel", "must be true or false");
    r.compress_kernel = *b;
  }

  if (const toml::node* n = root.get("initramfs")) {
    const toml::table* t = n->as_table();
    if (t == nullptr) return invalid_argument("initramfs", "must be a table");
    ARMHIVE_RETURN_IF_ERROR(check_keys(*t, {"init", "modules"}, "initramfs."));
    std::string init_source;
    ARMHIVE_RETURN_IF_ERROR(get_string(*t, "init", init_source, "initramfs."));
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
    ARMHIVE_RETURN_IF_ERROR(get_strings(*t, "modules", r.modules, "initramfs."));
    for (const auto& m : r.modules)
      if (!valid_module(m))
        return invalid_argument("initramfs.modules", "\"" + m + "\" is not a module name");
  }
  if (r.kind == RecipeKind::kDebs && r.initramfs_init.empty())
    return invalid_argument("initramfs.init", "a \"debs\" recipe needs an initramfs init script");

  if (const toml::node* n = root.get("corpus")) {
    const toml::table* t = n->as_table();
    if (t == nullptr) return invalid_argument("corpus", "must be a table");
    ARMHIVE_RETURN_IF_ERROR(check_keys(*t, {"path", "bytes", "seed"}, "corpus."));
    ARMHIVE_RETURN_IF_ERROR(get_string(*t, "path", r.corpus_path, "corpus."));
    ARMHIVE_RETURN_IF_ERROR(get_uint(*t, "bytes", r.corpus_bytes, "corpus."));
    ARMHIVE_RETURN_IF_ERROR(get_uint(*t, "seed", r.corpus_seed, "corpus."));
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
      ARMHIVE_RETURN_IF_ERROR(check_keys(
          *t, {"path", "source", "compile", "content", "symlink", "directory", "mode"}, "files."));
      RecipeFile f;
      ARMHIVE_RETURN_IF_ERROR(get_string(*t, "path", f.path, "files."));
      if (!valid_guest_path(f.path))
        return invalid_argument("files.path", "\"" + f.path + "\" is not an absolute guest path");
      std::string content, link, compile;
      bool has_content = t->contains("content");
      ARMHIVE_RETURN_IF_ERROR(get_string(*t, "source", f.source, "files."));
      ARMHIVE_RETURN_IF_ERROR(get_string(*t, "compile", compile, "files."));
      ARMHIVE_RETURN_IF_ERROR(get_string(*t, "content", content, "files."));
      ARMHIVE_RETURN_IF_ERROR(get_string(*t, "symlink", link, "files."));
      bool is_dir = false;
      if (const toml::node* d = t->get("directory")) {
        auto b = d->value<bool>();
        if (!d->is_boolean() || !b) return invalid_argument("files.directory", "must be a boolean");
        is_dir = *b;
      }
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
  r.sha256 = hash.hex_digest();
  return r;
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
