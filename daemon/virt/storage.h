#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/virt/connection.h"
#include "daemon/virt/handles.h"

namespace armhive {

// A transient `dir` storage pool holding VM overlays. Free functions; every call blocks on
// libvirt, may run on any thread and holds no lock.

// Looks the pool up by name and starts it if it is defined but inactive; otherwise creates it
// transient (virStoragePoolCreateXML) on `path`, libvirt creating the directory on the host it
// runs on (for a remote connection the path is the remote host's). A concurrent creator
// winning the race is fine. kConflict if a pool of that name exists on another path.
Result<StoragePoolHandle> ensure_dir_pool(const Connection& connection, std::string_view name,
                                          std::string_view path);

// Creates `<pool>/<volume_name>`, a qcow2 (compat 1.1) overlay on the qcow2 `base` with the
// given virtual size (libvirt's volume XML requires one; see qcow2_virtual_size()). Returns the
// overlay's path. kConflict if it exists.
Result<std::string> create_overlay(virStoragePoolPtr pool, std::string_view volume_name,
                                   std::string_view base, uint64_t capacity_bytes);

// The virtual size in bytes recorded in a qcow2 image's header. kNotFound if the file is
// missing, kInvalidArgument if it is not qcow2.
Result<uint64_t> qcow2_virtual_size(const std::string& path);

// The capacity in bytes (for a qcow2 file its virtual size) of the volume at `path` on the
// connection's host, which must be a file of one of that host's active storage pools, as
// shipped images are (image_shipper.h). kNotFound if no pool holds it.
Result<uint64_t> volume_capacity(const Connection& connection, const std::string& path);

// The names of the pool's volumes, after refreshing it so that files made outside libvirt are
// seen. Works the same on a remote host: nothing reads the local disk.
Result<std::vector<std::string>> list_volume_names(virStoragePoolPtr pool);

// The backing files of the pool's volumes (each overlay's <backingStore><path>), after
// refreshing it: what an image's garbage collection must keep. Any volume whose description
// cannot be read (other than one deleted meanwhile) fails the whole call, so the caller never
// acts on a partial answer.
Result<std::set<std::string>> backing_paths(virStoragePoolPtr pool);

// Deletes the volume if it exists (refreshing the pool first so files made outside libvirt are
// seen). Missing is not an error.
Status delete_volume(virStoragePoolPtr pool, std::string_view volume_name);

}  // namespace armhive
