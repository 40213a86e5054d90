#pragma once

#include <string>
#include <vector>

#include "base/result.h"

namespace armhive {

// Kernel modules as shipped in a linux-image .deb (no modules.dep: depmod runs in the
// package's postinst, which we never run). Dependencies come from each module's .modinfo
// `depends=` entry.
struct ModuleSet {
  std::vector<std::string> names;  // load order: every module after its dependencies
  std::vector<std::string> paths;  // matching .ko files
};

// Resolves `wanted` (names with '-' or '_') under `modules_dir` (/lib/modules/<release> of an
// unpacked kernel package) into a load order including dependencies. kInvalidArgument
// (field "initramfs.modules") names a module the kernel does not ship; a built-in module
// (listed in modules.builtin) is skipped.
Result<ModuleSet> resolve_modules(const std::string& modules_dir,
                                  const std::vector<std::string>& wanted);

// The `depends=` list of a module file's .modinfo (empty if none).
Result<std::vector<std::string>> module_dependencies(const std::string& ko_path);

struct InitramfsSpec {
  std::string busybox;      // path of a static busybox binary (aarch64)
  std::string init_script;  // contents of /init
  ModuleSet modules;
};

// Builds the initramfs as a newc cpio archive (uncompressed): /init, /bin/busybox with applet
// symlinks, /lib/modules/<name>.ko and /etc/modules (one name per line, in load order).
Result<std::string> build_initramfs(const InitramfsSpec& spec);

// The busybox applets the builder links in /bin and /sbin of images made from .debs
// (busybox-static ships only /bin/busybox; its postinst would make the links).
const std::vector<std::string>& busybox_bin_applets();
const std::vector<std::string>& busybox_sbin_applets();

}  // namespace armhive
