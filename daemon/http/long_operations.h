#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/http/message.h"
#include "daemon/http/router.h"
#include "daemon/http/server.h"

namespace armhive {

// The operations one request can keep going for minutes or hours: an exec (buffered or
// streamed, and an SSH certificate, which waits on a guest exec), a file transfer (PUT or GET
// /files), an API tunnel, a followed event stream. Execs and transfers hold a worker thread for
// their whole life; tunnels and streams hold a connection and a hub subscription.
enum class LongOperation { kExec, kFileTransfer, kTunnel, kEventStream };

// The configuration key of a kind's limit ("max_execs_per_token"): what a 429 names.
std::string_view limit_key(LongOperation kind);

// Counts the long operations running per token and refuses one beyond its limit.
//
// Threading: thread-safe; acquire() and a slot's release may run on any thread. The lock is
// held only around the count, never across a service call.
class LongOperations {
 public:
  // `workers`: the server's worker threads; one token's execs plus transfers (each holds one)
  // are also capped at half of them (at least 1).
  LongOperations(LongOperationLimits limits, size_t workers)
      : limits_(limits), worker_cap_(std::max<size_t>(1, workers / 2)) {}
  LongOperations(const LongOperations&) = delete;
  LongOperations& operator=(const LongOperations&) = delete;

  // One running operation; its count is given back when the slot is destroyed. Hold it (a
  // shared_ptr captured by the stream's or tunnel's callbacks) for as long as the operation
  // runs. The LongOperations must outlive it.
  class Slot {
   public:
    Slot(LongOperations& owner, std::string token, LongOperation kind)
        : owner_(owner), token_(std::move(token)), kind_(kind) {}
    ~Slot() { owner_.release(token_, kind_); }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;

   private:
    LongOperations& owner_;
    std::string token_;
    LongOperation kind_;
  };

  // A slot for `token`, or kResourceExhausted (429) naming the limit's key, the limit and how
  // many the token has running (too_many_response() adds Retry-After).
  Result<std::shared_ptr<Slot>> acquire(const std::string& token, LongOperation kind);

  // How many `token` has running now.
  size_t running(const std::string& token, LongOperation kind) const;

 private:
  void release(const std::string& token, LongOperation kind);
  size_t running_locked(const std::string& token, LongOperation kind) const REQUIRES(mu_);
  size_t limit(LongOperation kind) const;

  const LongOperationLimits limits_;
  const size_t worker_cap_;
  mutable Mutex mu_;
  std::map<std::pair<std::string, LongOperation>, size_t> running_ GUARDED_BY(mu_);
};

// The 429 problem of a refused acquire() with `Retry-After`: the client may try again once one
// of its operations has ended.
HttpResponse too_many_response(const Status& refused);
// Answers the call with too_many_response(refused); returns ok for the handler to return.
Status refuse_busy(Call& call, const Status& refused);

}  // namespace armhive
