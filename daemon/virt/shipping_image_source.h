#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <thread>

#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/core/boot_image.h"
#include "daemon/virt/connection.h"

namespace armhive {

// Resolves pool images for one remote host: the image as `local` resolves it on this machine
// (the catalogue), with its disk, kernel and initrd shipped into the host's storage pool
// (image_shipper.h) and its paths replaced by those volumes' paths on the host, which is what
// a domain on that host can name. A host that lacks an image is not offered for it until it
// has it: until every file is there, resolve() answers kUnavailable naming the image, the
// host and the bytes sent so far, and the pool's leases wait with that reason. A file that
// changed on this machine (size or modification time) is shipped again; a failed ship is
// tried again after `retry`.
//
// Ownership: borrows the host's Connection, which must outlive this object. Shipping runs on
// this object's own thread, one file at a time; the destructor stops it after the file in
// flight.
//
// Threading: resolve() may be called from any thread and never waits for libvirt or hashing
// (the files are hashed on the shipping thread); mu_ guards the state below and is never held
// across a libvirt call, `local` or a file hash.
class ShippingImageSource {
 public:
  ShippingImageSource(const Connection& host, std::string host_name, std::string pool,
                      std::string pool_dir, ImageResolver local,
                      std::chrono::milliseconds retry = std::chrono::seconds(30));
  ~ShippingImageSource() noexcept;
  ShippingImageSource(const ShippingImageSource&) = delete;
  ShippingImageSource& operator=(const ShippingImageSource&) = delete;

  Result<BootImage> resolve(const std::string& name) EXCLUDES(mu_);

 private:
  // One local file's copy on the host, for the file's current size and modification time.
  struct FileState {
    std::string stamp;      // size and mtime when queued: a different one ships again
    std::string host_path;  // set once shipped and verified
    uint64_t sent = 0, total = 0;
    Status failed;  // the last failure, kept until `retry` has passed
    std::chrono::steady_clock::time_point failed_at;
    bool queued = false;
  };

  void run() EXCLUDES(mu_);
  void ship(const std::string& path, const std::string& stamp) EXCLUDES(mu_);

  const Connection& host_;
  const std::string host_name_, pool_, pool_dir_;
  const ImageResolver local_;
  const std::chrono::milliseconds retry_;

  Mutex mu_;
  std::condition_variable_any wake_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::map<std::string, FileState> files_ GUARDED_BY(mu_);  // by local path
  std::deque<std::string> queue_ GUARDED_BY(mu_);           // local paths to ship
  std::thread thread_;                                      // last: starts once the rest exists
};

}  // namespace armhive
