// Guest files (`armhive cp`): PUT /v1/leases/{id}/files streams the request body into the guest,
// GET streams a guest file (or a directory as tar) out. Neither holds the bytes whole: the body
// arrives through HttpRequest::body_source (Route::streamed_body) and the download leaves as
// chunks, kept to a few MiB behind the socket.
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "api/json.h"
#include "daemon/http/handlers.h"
#include "daemon/http/middleware.h"
#include "daemon/http/params.h"

namespace armhive {
namespace {

constexpr size_t kMaxQueuedDownload = 4 << 20;  // below the connection's 8 MiB drop
constexpr std::chrono::milliseconds kBackpressurePoll{2};

std::string_view kind_name(GuestFileKind k) { return k == GuestFileKind::kTar ? "tar" : "file"; }

std::string_view media_type(GuestFileKind k) {
  return k == GuestFileKind::kTar ? "application/x-tar" : "application/octet-stream";
}

// The media type without parameters, lowercased.
std::string bare_media_type(std::string type) {
  type = type.substr(0, type.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.pop_back();
  for (char& ch : type) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return type;
}

Result<std::string> path_param(const HttpRequest& req) {
  if (!req.has_param("path")) return invalid_argument("path", "is required (?path=/abs/path)");
  // A query value may carry %00; the policy refuses NUL and control characters.
  return req.param("path");
}

Result<std::string> sha256_param(const HttpRequest& req) {
  std::string sum = req.param("sha256");
  for (char& ch : sum) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (!sum.empty() &&
      (sum.size() != 64 || sum.find_first_not_of("0123456789abcdef") != std::string::npos)) {
    return invalid_argument("sha256", "must be 64 hex digits");
  }
  return sum;
}

Status check_ready(const Lease& lease) {
  if (lease.state == LeaseState::kReady) return Status::ok();
  return conflict("lease " + lease.id + " is " + std::string(to_string(lease.state)) +
                      ": files move in and out of ready leases only",
                  lease.id);
}

Status put_file(ServerContext& ctx, Call& c) {
  const std::string& id = c.req.path_params[0];
  ARMHIVE_ASSIGN_OR_RETURN(Lease lease, ctx.visible_lease(c.who, id));
  GuestFilePut put;
  ARMHIVE_ASSIGN_OR_RETURN(put.path, path_param(c.req));
  ARMHIVE_ASSIGN_OR_RETURN(put.sha256, sha256_param(c.req));
  const std::string type = bare_media_type(c.req.header("Content-Type"));
  if (type == "application/x-tar") {
    put.kind = GuestFileKind::kTar;
  } else if (!type.empty() && type != "application/octet-stream") {
    return Status(ErrorCode::kUnsupportedMediaType,
                  "Content-Type must be application/octet-stream (a file) or application/x-tar "
                  "(a directory), not \"" +
                      type + "\"",
                  {}, "Content-Type");
  }
  if (!c.req.content_length || c.req.body_source == nullptr) {
    return invalid_argument("Content-Length",
                            "is required: the pool's size limit is checked before the upload");
  }
  put.size = *c.req.content_length;
  ARMHIVE_RETURN_IF_ERROR(check_ready(lease));
  auto slot = ctx.long_operations.acquire(c.who.name, LongOperation::kFileTransfer);
  if (!slot.is_ok()) return refuse_busy(c, slot.status());
  ctx.audit_action(c.who, "lease.file_put", id,
                   "path=" + put.path + " bytes=" + std::to_string(put.size));
  ARMHIVE_ASSIGN_OR_RETURN(GuestFileTransfer done,
                           ctx.leases.put_file(id, put, *c.req.body_source));
  FileTransferDto dto{put.path, std::string(kind_name(done.kind)), done.bytes, done.sha256};
  write_json(c.res, 200, to_json(dto));
  return Status::ok();
}

// Turns the download into chunks on the exchange: the head (with the guest's size and
// sha256) at begin(), then each piece, waiting while more than kMaxQueuedDownload is queued.
// Called on the handler's worker thread; the abort flag is set on the connection's executor.
class HttpByteSink final : public ByteSink {
 public:
  HttpByteSink(std::shared_ptr<Exchange> exchange, std::stop_token stop)
      : exchange_(std::move(exchange)),
        stop_(std::move(stop)),
        aborted_(std::make_shared<std::atomic<bool>>(false)) {
    exchange_->on_abort([aborted = aborted_] { aborted->store(true); });
  }

  Status begin(GuestFileKind kind, uint64_t size, const std::string& sha256) override {
    HttpResponse head;
    head.status = 200;
    head.content_type = std::string(media_type(kind));
    head.headers.emplace_back("Cache-Control", "no-store");
    head.headers.emplace_back("X-Armhive-Kind", std::string(kind_name(kind)));
    head.headers.emplace_back("X-Armhive-Size", std::to_string(size));
    head.headers.emplace_back("X-Armhive-Sha256", sha256);
    exchange_->begin_stream(std::move(head));
    begun_ = true;
    return Status::ok();
  }

  Status write(std::string_view data) override {
    while (exchange_->queued_bytes() > kMaxQueuedDownload) {
      if (gone()) break;
      std::this_thread::sleep_for(kBackpressurePoll);
    }
    if (gone()) return unavailable("the client went away during the download");
    exchange_->write_chunk(std::string(data));
    return Status::ok();
  }

  bool begun() const { return begun_; }

 private:
  bool gone() const { return aborted_->load() || stop_.stop_requested(); }

  std::shared_ptr<Exchange> exchange_;
  std::stop_token stop_;
  std::shared_ptr<std::atomic<bool>> aborted_;
  bool begun_ = false;
};

Status get_file(ServerContext& ctx, Call& c) {
  const std::string& id = c.req.path_params[0];
  ARMHIVE_ASSIGN_OR_RETURN(Lease lease, ctx.visible_lease(c.who, id));
  ARMHIVE_ASSIGN_OR_RETURN(std::string path, path_param(c.req));
  ARMHIVE_RETURN_IF_ERROR(check_ready(lease));
  auto slot = ctx.long_operations.acquire(c.who.name, LongOperation::kFileTransfer);
  if (!slot.is_ok()) return refuse_busy(c, slot.status());
  ctx.audit_action(c.who, "lease.file_get", id, "path=" + path);
  auto exchange = c.keep();
  HttpByteSink sink(exchange, ctx.stop);
  auto r = ctx.leases.get_file(id, path, sink);
  if (!sink.begun()) {
    exchange->respond(
        problem_response(r.is_ok() ? internal_error("the download never began") : r.status()));
  } else if (r.is_ok()) {
    exchange->end_stream();
  } else {
    // The head is out: a broken-off chunked stream is how the client learns it failed.
    ctx.log("error: download of " + path + " from lease " + id + ": " + r.status().to_string());
    exchange->abort_stream();
  }
  return Status::ok();
}

}  // namespace

void add_file_routes(Router& router, ServerContext& ctx) {
  auto h = [&ctx](Status (*fn)(ServerContext&, Call&)) {
    return [&ctx, fn](Call& c) { return fn(ctx, c); };
  };
  Route put{"PUT", "/v1/leases/{id}/files", Access::kWrite, h(put_file)};
  put.streamed_body = true;
  router.add(std::move(put));
  // A write token too: reading a guest's files is as much as running a command in it.
  router.add({"GET", "/v1/leases/{id}/files", Access::kWrite, h(get_file)});
}

}  // namespace armhive
