#include "daemon/virt/storage.h"

#include <libvirt/virterror.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "daemon/virt/error.h"
#include "daemon/virt/xml.h"

namespace armhive {

using detail::XmlDoc;
using detail::XmlWriter;

namespace {

Result<std::string> pool_xml(std::string_view name, std::string_view path) {
  XmlWriter w;
  w.start("pool").attr("type", "dir");
  w.element("name", name);
  w.start("target").element("path", path).end();
  w.end();
  return w.finish();
}

Status start_if_inactive(virStoragePoolPtr pool, std::string_view name) {
  int active = virStoragePoolIsActive(pool);
  if (active < 0) return libvirt_error("check storage pool", name);
  if (active == 0 && virStoragePoolCreate(pool, 0) < 0) {
    return libvirt_error("start storage pool", name);
  }
  return Status::ok();
}

// The pool's volumes after a refresh (files made outside libvirt are seen), each owned.
Result<std::vector<StorageVolHandle>> refreshed_volumes(virStoragePoolPtr pool) {
  if (virStoragePoolRefresh(pool, 0) < 0) virResetLastError();
  virStorageVolPtr* raw = nullptr;
  int n = virStoragePoolListAllVolumes(pool, &raw, 0);
  if (n < 0) return libvirt_error("list volumes", "overlay pool");
  std::vector<StorageVolHandle> vols;
  vols.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) vols.emplace_back(raw[i]);
  std::free(raw);
  return vols;
}

}  // namespace

Result<StoragePoolHandle> ensure_dir_pool(const Connection& connection, std::string_view name,
                                          std::string_view path) {
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection.get());
  std::string n(name);
  std::error_code ec;
  for (int attempt = 0; attempt < 2; ++attempt) {
    StoragePoolHandle pool(virStoragePoolLookupByName(conn.get(), n.c_str()));
    if (pool) {
      LibvirtString xml(virStoragePoolGetXMLDesc(pool.get(), 0));
      if (!xml) return libvirt_error("describe storage pool", n);
      ARMHIVE_ASSIGN_OR_RETURN(XmlDoc doc, XmlDoc::parse(xml.get()));
      std::string existing = doc.str("string(/pool/target/path)");
      if (std::filesystem::weakly_canonical(existing, ec) !=
          std::filesystem::weakly_canonical(std::string(path), ec)) {
        std::string msg = "storage pool " + n;
        msg += " exists on " + existing;
        msg += ", not ";
        msg += path;
        return conflict(std::move(msg), n);
      }
      ARMHIVE_RETURN_IF_ERROR(start_if_inactive(pool.get(), n));
      return pool;
    }
    virResetLastError();
    ARMHIVE_ASSIGN_OR_RETURN(std::string xml, pool_xml(name, path));
    // libvirt makes the directory (WITH_BUILD; an existing one is kept), on the host it runs
    // on: for a remote host (qemu+tls://, qemu+ssh://) the path is on that host, not here.
    StoragePoolHandle created(
        virStoragePoolCreateXML(conn.get(), xml.c_str(), VIR_STORAGE_POOL_CREATE_WITH_BUILD));
    if (created) return created;
    Status s = libvirt_error("create storage pool", n);
    if (s.code() == ErrorCode::kInvalidArgument &&
        s.message().find("unsupported flags") != std::string::npos) {
      // A driver that cannot build pools (the in-process test:/// driver) runs in this
      // process, so its directory is local: make it here and create the pool without building.
      std::filesystem::create_directories(std::string(path), ec);
      if (ec) {
        return unavailable("cannot create storage directory: " + ec.message(), std::string(path));
      }
      created.reset(virStoragePoolCreateXML(conn.get(), xml.c_str(), 0));
      if (created) return created;
      s = libvirt_error("create storage pool", n);
    }
    // Someone else created it in between: look it up again.
    if (attempt == 0 && (s.code() == ErrorCode::kConflict || s.code() == ErrorCode::kInternal))
      continue;
    return s;
  }
  return internal_error("storage pool " + n + " could neither be found nor created", n);
}

Result<uint64_t> qcow2_virtual_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("base image not found", path);
  std::array<unsigned char, 32> h{};
  in.read(reinterpret_cast<char*>(h.data()), h.size());
  if (in.gcount() != static_cast<std::streamsize>(h.size()) || h[0] != 'Q' || h[1] != 'F' ||
      h[2] != 'I' || h[3] != 0xfb) {
    return Status(ErrorCode::kInvalidArgument, "base image is not qcow2", path, "base_disk");
  }
  uint64_t size = 0;
  for (int i = 24; i < 32; ++i) size = (size << 8) | h[i];  // big-endian at offset 24
  return size;
}

Result<uint64_t> volume_capacity(const Connection& connection, const std::string& path) {
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection.get());
  StorageVolHandle vol(virStorageVolLookupByPath(conn.get(), path.c_str()));
  if (!vol) {
    Status s = libvirt_error("look up volume", path);
    if (s.code() != ErrorCode::kNotFound) return s;
    return Status(ErrorCode::kNotFound,
                  "no storage pool of host " + connection.uri() + " holds the base image", path,
                  "base_disk");
  }
  virStorageVolInfo info{};
  if (virStorageVolGetInfo(vol.get(), &info) < 0) return libvirt_error("get volume info", path);
  return static_cast<uint64_t>(info.capacity);
}

Result<std::string> create_overlay(virStoragePoolPtr pool, std::string_view volume_name,
                                   std::string_view base, uint64_t capacity_bytes) {
  std::string vname(volume_name);
  XmlWriter w;
  w.start("volume").attr("type", "file");
  w.element("name", volume_name);
  w.start("capacity").attr("unit", "bytes").text(std::to_string(capacity_bytes)).end();
  w.start("target");
  w.start("format").attr("type", "qcow2").end();
  w.element("compat", "1.1");
  w.end();
  w.start("backingStore");
  w.element("path", base);
  w.start("format").attr("type", "qcow2").end();
  w.end();
  w.end();
  ARMHIVE_ASSIGN_OR_RETURN(std::string xml, w.finish());
  StorageVolHandle vol(virStorageVolCreateXML(pool, xml.c_str(), 0));
  if (!vol) {
    Status s = libvirt_error("create overlay", vname);
    if (s.message().find("already") != std::string::npos) {
      return Status(ErrorCode::kConflict, s.message(), vname);
    }
    return s;
  }
  LibvirtString path(virStorageVolGetPath(vol.get()));
  if (!path) return libvirt_error("get overlay path", vname);
  return path.str();
}

Result<std::vector<std::string>> list_volume_names(virStoragePoolPtr pool) {
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<StorageVolHandle> vols, refreshed_volumes(pool));
  std::vector<std::string> names;
  for (const StorageVolHandle& vol : vols) {
    // A volume deleted between the listing and here has no name: it is simply not listed.
    if (const char* name = virStorageVolGetName(vol.get())) {
      names.emplace_back(name);
    } else {
      virResetLastError();
    }
  }
  return names;
}

Result<std::set<std::string>> backing_paths(virStoragePoolPtr pool) {
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<StorageVolHandle> vols, refreshed_volumes(pool));
  std::set<std::string> out;
  for (const StorageVolHandle& vol : vols) {
    LibvirtString xml(virStorageVolGetXMLDesc(vol.get(), 0));
    if (!xml) {
      Status s = libvirt_error("describe volume", "overlay pool");
      if (s.code() == ErrorCode::kNotFound) continue;  // deleted since the listing
      return s;
    }
    ARMHIVE_ASSIGN_OR_RETURN(XmlDoc doc, XmlDoc::parse(xml.get()));
    std::string backing = doc.str("string(/volume/backingStore/path)");
    if (!backing.empty()) out.insert(std::move(backing));
  }
  return out;
}

Status delete_volume(virStoragePoolPtr pool, std::string_view volume_name) {
  std::string vname(volume_name);
  if (virStoragePoolRefresh(pool, 0) < 0) virResetLastError();
  StorageVolHandle vol(virStorageVolLookupByName(pool, vname.c_str()));
  if (!vol) {
    Status s = libvirt_error("look up overlay", vname);
    return s.code() == ErrorCode::kNotFound ? Status::ok() : s;
  }
  if (virStorageVolDelete(vol.get(), 0) < 0) {
    Status s = libvirt_error("delete overlay", vname);
    return s.code() == ErrorCode::kNotFound ? Status::ok() : s;
  }
  return Status::ok();
}

}  // namespace armhive
