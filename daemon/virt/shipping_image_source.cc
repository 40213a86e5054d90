#include "daemon/virt/shipping_image_source.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "base/sha256.h"
#include "daemon/virt/image_shipper.h"
#include "daemon/virt/storage.h"

namespace armhive {

namespace {

namespace fs = std::filesystem;

// What identifies a file's current bytes cheaply: its size and modification time. Empty if it
// cannot be read (the local resolver reports that).
std::string stamp_of(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return "";
  const auto mtime = fs::last_write_time(path, ec);
  if (ec) return "";
  return std::to_string(size) + "@" + std::to_string(mtime.time_since_epoch().count());
}

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

ShippingImageSource::ShippingImageSource(const Connection& host, std::string host_name,
                                         std::string pool, std::string pool_dir,
                                         ImageResolver local, std::chrono::milliseconds retry)
    : host_(host),
      host_name_(std::move(host_name)),
      pool_(std::move(pool)),
      pool_dir_(std::move(pool_dir)),
      local_(std::move(local)),
      retry_(retry),
      thread_([this] { run(); }) {}

ShippingImageSource::~ShippingImageSource() noexcept {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<BootImage> ShippingImageSource::resolve(const std::string& name) {
  ARMHIVE_ASSIGN_OR_RETURN(BootImage image, local_(name));
  std::vector<std::string*> paths;
  for (std::string* p : {&image.base_disk, &image.kernel, &image.initrd}) {
    if (!p->empty()) paths.push_back(p);
  }
  std::vector<std::string> stamps;
  for (const std::string* p : paths) stamps.push_back(stamp_of(*p));

  const auto now = std::chrono::steady_clock::now();
  uint64_t sent = 0, total = 0;
  Status failure;
  bool ready = true, queued_more = false;
  {
    MutexLock lock(mu_);
    for (size_t i = 0; i < paths.size(); ++i) {
      FileState& f = files_[*paths[i]];
      if (f.stamp != stamps[i]) f = FileState{stamps[i]};  // new, or changed on this machine
      if (!f.host_path.empty()) {
        *paths[i] = f.host_path;
        continue;
      }
      ready = false;
      sent += f.sent;
      total += f.total;
      if (!f.failed.is_ok() && now - f.failed_at < retry_) {
        if (failure.is_ok()) failure = f.failed;
        continue;
      }
      if (!f.queued) {
        f.queued = true;
        f.failed = Status::ok();
        queue_.push_back(*paths[i]);
        queued_more = true;
      }
    }
  }
  if (queued_more) wake_.notify_all();
  if (ready) return image;
  if (!failure.is_ok()) {
    return Status(ErrorCode::kUnavailable,
                  "shipping image " + name + " to host " + host_name_ +
                      " failed (tried again shortly): " + failure.message(),
                  failure.context());
  }
  return Status(ErrorCode::kUnavailable, "image " + name + " is being shipped to host " +
                                             host_name_ + " (" + mib(sent) + " of " + mib(total) +
                                             " sent)");
}

void ShippingImageSource::run() {
  for (;;) {
    std::string path, stamp;
    {
      MutexLock lock(mu_);
      wake_.wait(lock, [this]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      path = std::move(queue_.front());
      queue_.pop_front();
      stamp = files_[path].stamp;
    }
    ship(path, stamp);
  }
}

void ShippingImageSource::ship(const std::string& path, const std::string& stamp) {
  // Each outcome is recorded only if the file is still the one queued (stamp unchanged).
  auto record = [&](auto&& update) {
    MutexLock lock(mu_);
    FileState& f = files_[path];
    if (f.stamp == stamp) update(f);
  };
  Result<ShippedVolume> shipped = [&]() -> Result<ShippedVolume> {
    ARMHIVE_ASSIGN_OR_RETURN(std::string sha, sha256_file(path));
    ARMHIVE_ASSIGN_OR_RETURN(StoragePoolHandle pool, ensure_dir_pool(host_, pool_, pool_dir_));
    (void)pool;  // ship_file looks it up by name; made here so that it exists on the host
    return ship_file(host_, pool_, path, sha, [&](uint64_t sent, uint64_t total) {
      record([&](FileState& f) {
        f.sent = sent;
        f.total = total;
      });
    });
  }();
  const auto now = std::chrono::steady_clock::now();
  record([&](FileState& f) {
    f.queued = false;
    if (shipped.is_ok()) {
      f.host_path = shipped->path;
    } else {
      f.failed = shipped.status();
      f.failed_at = now;
    }
  });
}

}  // namespace armhive
