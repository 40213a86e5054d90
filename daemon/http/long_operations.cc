#include "daemon/http/long_operations.h"

#include "daemon/http/middleware.h"

namespace armhive {
namespace {

constexpr std::string_view kRetryAfterSeconds = "5";

std::string_view noun(LongOperation kind) {
  switch (kind) {
    case LongOperation::kExec:
      return "execs";
    case LongOperation::kFileTransfer:
      return "file transfers";
    case LongOperation::kTunnel:
      return "tunnels";
    case LongOperation::kEventStream:
      return "event streams";
  }
  return "operations";
}

bool holds_worker(LongOperation kind) {
  return kind == LongOperation::kExec || kind == LongOperation::kFileTransfer;
}

}  // namespace

std::string_view limit_key(LongOperation kind) {
  switch (kind) {
    case LongOperation::kExec:
      return "max_execs_per_token";
    case LongOperation::kFileTransfer:
      return "max_file_transfers_per_token";
    case LongOperation::kTunnel:
      return "max_tunnels_per_token";
    case LongOperation::kEventStream:
      return "max_event_streams_per_token";
  }
  return "max_operations_per_token";
}

size_t LongOperations::limit(LongOperation kind) const {
  switch (kind) {
    case LongOperation::kExec:
      return limits_.execs;
    case LongOperation::kFileTransfer:
      return limits_.file_transfers;
    case LongOperation::kTunnel:
      return limits_.tunnels;
    case LongOperation::kEventStream:
      return limits_.event_streams;
  }
  return 0;
}

Result<std::shared_ptr<LongOperations::Slot>> LongOperations::acquire(const std::string& token,
                                                                      LongOperation kind) {
  const size_t max = limit(kind);
  {
    MutexLock lock(mu_);
    const size_t n = running_locked(token, kind);
    if (n >= max) {
      return Status(ErrorCode::kResourceExhausted,
                    "token \"" + token + "\" has " + std::to_string(n) + " " +
                        std::string(noun(kind)) + " running; the limit ([server] " +
                        std::string(limit_key(kind)) + ") is " + std::to_string(max) +
                        ": retry when one has ended",
                    {}, std::string(limit_key(kind)));
    }
    if (holds_worker(kind)) {
      const size_t busy = running_locked(token, LongOperation::kExec) +
                          running_locked(token, LongOperation::kFileTransfer);
      if (busy >= worker_cap_) {
        return Status(ErrorCode::kResourceExhausted,
                      "token \"" + token + "\" has " + std::to_string(busy) +
                          " execs and file transfers running, each holding one of the API's "
                          "worker threads; one token may hold at most " +
                          std::to_string(worker_cap_) + ": retry when one has ended",
                      {}, std::string(limit_key(kind)));
      }
    }
    ++running_[{token, kind}];
  }
  return std::make_shared<Slot>(*this, token, kind);
}

size_t LongOperations::running(const std::string& token, LongOperation kind) const {
  MutexLock lock(mu_);
  return running_locked(token, kind);
}

size_t LongOperations::running_locked(const std::string& token, LongOperation kind) const {
  auto it = running_.find({token, kind});
  return it == running_.end() ? 0 : it->second;
}

void LongOperations::release(const std::string& token, LongOperation kind) {
  MutexLock lock(mu_);
  auto it = running_.find({token, kind});
  if (it == running_.end()) return;
  if (--it->second == 0) running_.erase(it);
}

HttpResponse too_many_response(const Status& refused) {
  HttpResponse res = problem_response(refused);
  res.headers.emplace_back("Retry-After", std::string(kRetryAfterSeconds));
  return res;
}

Status refuse_busy(Call& call, const Status& refused) {
  call.res = too_many_response(refused);
  return Status::ok();
}

}  // namespace armhive
