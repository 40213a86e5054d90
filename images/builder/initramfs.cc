#include "images/builder/initramfs.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "images/builder/cpio.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

std::string normalise(std::string name) {
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open file", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

const std::vector<std::string>& busybox_bin_applets() {
  static const std::vector<std::string> kApplets = {
      "sh",     "ash",    "cat",      "chmod",     "chown",    "cp",       "cut",    "date",
      "dd",     "df",     "dmesg",    "du",        "echo",     "env",      "expr",   "false",
      "find",   "free",   "grep",     "gzip",      "head",     "hostname", "id",     "kill",
      "ln",     "ls",     "mkdir",    "mknod",     "mount",    "mv",       "nc",     "ping",
      "printf", "ps",     "readlink", "rm",        "rmdir",    "sed",      "seq",    "sleep",
      "sort",   "stat",   "sync",     "tail",      "tar",      "tee",      "test",   "[",
      "top",    "touch",  "tr",       "true",      "umount",   "uname",    "usleep", "vi",
      "wc",     "which",  "xargs",    "awk",       "basename", "dirname",  "less",   "more",
      "uptime", "whoami", "md5sum",   "sha256sum", "zcat",     "gunzip",   "watch",  "nproc"};
  return kApplets;
}

const std::vector<std::string>& busybox_sbin_applets() {
  static const std::vector<std::string> kApplets = {
      "init",  "getty",  "halt",   "poweroff", "reboot", "ip",       "ifconfig",
      "route", "udhcpc", "insmod", "rmmod",    "lsmod",  "modprobe", "switch_root",
      "mdev",  "sysctl", "blkid",  "fsck",     "swapon", "swapoff"};
  return kApplets;
}

Result<std::vector<std::string>> module_dependencies(const std::string& ko_path) {
  ARMHIVE_ASSIGN_OR_RETURN(std::string data, read_file(ko_path));
  // .modinfo holds NUL-separated "key=value" strings; "depends=" appears once per module.
  static constexpr std::string_view kKey = "depends=";
  std::vector<std::string> deps;
  size_t pos = 0;
  while ((pos = data.find(kKey, pos)) != std::string::npos) {
    if (pos == 0 || data[pos - 1] != '\0') {
      pos += kKey.size();
      continue;
    }
    size_t start = pos + kKey.size();
    size_t end = data.find('\0', start);
    if (end == std::string::npos) break;
    std::string_view list(data.data() + start, end - start);
    while (!list.empty()) {
      size_t comma = list.find(',');
      std::string_view item = list.substr(0, comma);
      if (!item.empty()) deps.emplace_back(item);
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    break;
  }
  return deps;
}

Result<ModuleSet> resolve_modules(const std::string& modules_dir,
                                  const std::vector<std::string>& wanted) {
  std::map<std::string, std::string> files;  // normalised name -> path
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(modules_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() == ".ko") files.emplace(normalise(p.stem().string()), p.string());
  }
  if (ec) return unavailable("cannot list kernel modules: " + ec.message(), modules_dir);
  std::set<std::string> builtin;
  if (auto text = read_file((fs::path(modules_dir) / "modules.builtin").string()); text.is_ok()) {
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);) {
      fs::path p(line);
      if (p.extension() == ".ko") builtin.insert(normalise(p.stem().string()));
    }
  }

  ModuleSet out;
  std::set<std::string> done, visiting;
  std::function<Status(const std::string&)> visit = [&](const std::string& raw) -> Status {
    std::string name = normalise(raw);
    if (done.contains(name)) return Status::ok();
    if (visiting.contains(name))
      return internal_error("kernel module dependency cycle through " + name, modules_dir);
    auto f = files.find(name);
    if (f == files.end()) {
      if (builtin.contains(name)) {
        done.insert(name);
        return Status::ok();
      }
      return invalid_argument("initramfs.modules", "the kernel has no module \"" + raw +
                                                       "\" (neither loadable nor built in)");
    }
    visiting.insert(name);
    auto deps = module_dependencies(f->second);
    if (!deps.is_ok()) return deps.status();
    for (const auto& d : *deps) ARMHIVE_RETURN_IF_ERROR(visit(d));
    visiting.erase(name);
    done.insert(name);
    out.names.push_back(name);
    out.paths.push_back(f->second);
    return Status::ok();
  };
  for (const auto& w : wanted) ARMHIVE_RETURN_IF_ERROR(visit(w));
  return out;
}

Result<std::string> build_initramfs(const InitramfsSpec& spec) {
  ARMHIVE_ASSIGN_OR_RETURN(std::string busybox, read_file(spec.busybox));
  CpioWriter cpio;
  for (const char* dir :
       {"bin", "sbin", "dev", "etc", "lib", "lib/modules", "proc", "sys", "newroot", "run", "tmp"})
    cpio.add_directory(dir);
  cpio.add_char_device("dev/console", 5, 1, 0600);
  cpio.add_char_device("dev/null", 1, 3, 0666);
  cpio.add_file("bin/busybox", busybox, 0755);
  for (const auto& a : busybox_bin_applets()) cpio.add_symlink("bin/" + a, "busybox");
  for (const auto& a : busybox_sbin_applets()) cpio.add_symlink("sbin/" + a, "../bin/busybox");
  std::string order;
  for (size_t i = 0; i < spec.modules.names.size(); ++i) {
    ARMHIVE_ASSIGN_OR_RETURN(std::string ko, read_file(spec.modules.paths[i]));
    cpio.add_file("lib/modules/" + spec.modules.names[i] + ".ko", ko, 0644);
    order += spec.modules.names[i] + "\n";
  }
  cpio.add_file("etc/modules", order, 0644);
  cpio.add_file("init", spec.init_script, 0755);
  return cpio.finish();
}

}  // namespace armhive
