#include "images/builder/disk_builder.h"

#include <guestfs.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

namespace armhive {
namespace {

struct GuestfsCloser {
  void operator()(guestfs_h* g) const noexcept {
    if (g != nullptr) guestfs_close(g);
  }
};
using GuestfsHandle = std::unique_ptr<guestfs_h, GuestfsCloser>;

Status guestfs_failure(guestfs_h* g, std::string_view op, const std::string& context) {
  const char* msg = guestfs_last_error(g);
  return unavailable("libguestfs " + std::string(op) + ": " + (msg != nullptr ? msg : "failed"),
                     context);
}

}  // namespace

Status build_ext4_disk(const DiskSpec& spec,
                       const std::function<void(std::string_view)>& progress) {
  auto say = [&](std::string_view s) {
    if (progress) progress(s);
  };
  // Process-wide settings, applied once before the first handle (setenv is not thread-safe;
  // callers build one image at a time).
  ::setenv("LIBGUESTFS_BACKEND", "direct", /*overwrite=*/0);
  ::setenv("LIBGUESTFS_BACKEND_SETTINGS", "force_tcg", /*overwrite=*/0);

  std::error_code ec;
  if (std::filesystem::exists(spec.output, ec))
    return Status(ErrorCode::kConflict, "disk output already exists", spec.output);

  GuestfsHandle g(guestfs_create_flags(GUESTFS_CREATE_NO_ENVIRONMENT));
  if (!g) return unavailable("guestfs_create failed", spec.output);
  if (guestfs_parse_environment(g.get()) == -1)
    return guestfs_failure(g.get(), "parse_environment", spec.output);
  guestfs_set_error_handler(g.get(), nullptr, nullptr);  // errors are read with guestfs_last_error

  auto fail = [&](std::string_view op) {
    Status s = guestfs_failure(g.get(), op, spec.output);
    g.reset();
    std::error_code rm;
    std::filesystem::remove(spec.output, rm);
    return s;
  };

  int64_t size = static_cast<int64_t>(spec.size_mib) << 20;
  if (guestfs_disk_create(g.get(), spec.output.c_str(), "qcow2", size, GUESTFS_DISK_CREATE_COMPAT,
                          "1.1", -1) == -1)
    return fail("disk_create");
  if (guestfs_add_drive_opts(g.get(), spec.output.c_str(), GUESTFS_ADD_DRIVE_OPTS_FORMAT, "qcow2",
                             -1) == -1)
    return fail("add_drive");
  say("starting the libguestfs appliance (TCG)");
  if (guestfs_launch(g.get()) == -1) return fail("launch");
  say("creating ext4 filesystem");
  if (guestfs_mkfs_opts(g.get(), "ext4", "/dev/sda", GUESTFS_MKFS_OPTS_BLOCKSIZE, 4096, -1) == -1)
    return fail("mkfs ext4");
  if (guestfs_set_label(g.get(), "/dev/sda", spec.label.c_str()) == -1) return fail("set_label");
  if (guestfs_mount(g.get(), "/dev/sda", "/") == -1) return fail("mount");
  say("unpacking the root filesystem");
  if (guestfs_tar_in_opts(g.get(), spec.rootfs_tar.c_str(), "/", GUESTFS_TAR_IN_OPTS_XATTRS, 1,
                          -1) == -1)
    return fail("tar_in");
  if (guestfs_umount_all(g.get()) == -1) return fail("umount_all");
  if (guestfs_shutdown(g.get()) == -1) return fail("shutdown");
  return Status::ok();
}

}  // namespace armhive
