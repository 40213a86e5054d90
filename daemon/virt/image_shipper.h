#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/virt/connection.h"

namespace armhive {

// Ships image files (base disks, kernels, initrds) into a libvirt host's storage pool through
// libvirt's own volume streams, so a remote host (qemu+ssh://, qemu+tls://) needs no scp, rsync
// or shared file system. Free functions; each call blocks on libvirt for as long as the bytes
// take to move, may run on any thread and holds no lock. See README.md, "Shipping images".

// Every volume this module makes starts with this; remove_unused() touches nothing else.
inline constexpr std::string_view kShippedVolumePrefix = "armhive-img-";

// The volume name for a file with that content: "armhive-img-<first 16 hex of sha256>-<base>",
// where <base> is the file name with every byte outside [A-Za-z0-9._-] replaced by '_', leading
// dots dropped and cut to 64 bytes ("file" if nothing is left). The content, not the path,
// identifies the volume: a rebuilt image gets a new volume, the same bytes shipped twice find
// the one already there. kInvalidArgument (field "sha256") unless `sha256_hex` is 64 hex digits
// (either case; the name uses lowercase).
Result<std::string> shipped_volume_name(std::string_view local_path, std::string_view sha256_hex);

struct ShippedVolume {
  std::string name;  // the volume's name in the pool
  std::string path;  // its path on the host (virStorageVolGetPath): what a domain XML names
  uint64_t bytes = 0;
  bool uploaded = false;  // false: a volume with these bytes was already there
};

// Called after each piece is sent with the bytes sent so far and the total. Runs on the calling
// thread inside libvirt's stream callback: it must not throw and should return quickly.
using ShipProgress = std::function<void(uint64_t sent, uint64_t total)>;

// Makes `pool` hold a raw volume whose bytes are exactly those of `local_path`, which the
// catalogue says hash to `sha256_hex`.
// - If the volume named by shipped_volume_name() exists with the file's size and its bytes,
//   downloaded back, hash to `sha256_hex`, nothing is sent (uploaded = false). One that exists
//   but does not (a transfer cut short by a crash) is deleted and shipped again.
// - Otherwise the volume is created (format raw, so libvirt never reinterprets the bytes),
//   the file streamed into it, and it is downloaded back and hashed: on a mismatch it is
//   deleted and the error (kInternal) names the volume, the expected and the host's sha256.
// Any failure leaves no volume of that name behind (best effort if libvirt itself is gone).
// kNotFound if the pool or the file does not exist; libvirt errors as libvirt_error() maps them.
// Cost: the file is read once, and the host's copy is read back in full over the connection
// on every call, also when nothing is uploaded.
// Not safe against a concurrent ship of the same file into the same pool (the second call can
// take the first's volume, still being written, for a stale one and delete it): the caller
// ships each (host, image) from one place at a time.
Result<ShippedVolume> ship_file(const Connection& connection, std::string_view pool,
                                const std::string& local_path, std::string_view sha256_hex,
                                const ShipProgress& progress = {});

// Deletes every volume of `pool` whose name starts with kShippedVolumePrefix and is not in
// `keep_volume_names`; volumes without the prefix are never touched. Tries them all and
// returns the first failure; a volume gone meanwhile is not one. libvirt does not know that
// an overlay's backing file is in use, so `keep_volume_names` must name every volume a domain
// or an overlay may still need.
// `removed`, when given, receives the names of the volumes deleted.
Status remove_unused(const Connection& connection, std::string_view pool,
                     const std::set<std::string>& keep_volume_names,
                     std::vector<std::string>* removed = nullptr);

}  // namespace armhive
