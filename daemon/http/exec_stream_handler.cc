#include "daemon/http/exec_stream_handler.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>

#include "api/exec_stream.h"
#include "api/json.h"
#include "daemon/http/convert.h"
#include "daemon/http/middleware.h"

namespace armhive {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Turns exec output into stream lines on the exchange. Called on the exec's worker thread
// only; the abort flag is set from the connection's executor.
class HttpExecSink final : public ExecSink {
 public:
  HttpExecSink(std::shared_ptr<Exchange> exchange, std::stop_token stop,
               std::chrono::milliseconds keepalive)
      : exchange_(std::move(exchange)),
        stop_(std::move(stop)),
        keepalive_(keepalive),
        aborted_(std::make_shared<std::atomic<bool>>(false)) {
    exchange_->on_abort([aborted = aborted_] { aborted->store(true); });
  }

  void started() override {
    HttpResponse head;
    head.status = 200;
    head.content_type = "application/x-ndjson";
    head.headers.emplace_back("Cache-Control", "no-store");
    exchange_->begin_stream(std::move(head));
    started_ = true;
    last_write_ = SteadyClock::now();
  }

  void output(ExecOutputStream stream, std::string_view data) override {
    exchange_->write_chunk(
        exec_output_line(stream == ExecOutputStream::kStdout ? "stdout" : "stderr", data));
    last_write_ = SteadyClock::now();
  }

  // Also where idle streams get their keep-alive newline (the sink is polled while the
  // command is silent), so clients can tell a quiet command from a dead link.
  bool cancelled() override {
    if (started_ && SteadyClock::now() - last_write_ >= keepalive_) {
      exchange_->write_chunk("\n");
      last_write_ = SteadyClock::now();
    }
    return aborted_->load() || stop_.stop_requested();
  }

  bool is_started() const { return started_; }

 private:
  std::shared_ptr<Exchange> exchange_;
  std::stop_token stop_;
  std::chrono::milliseconds keepalive_;
  std::shared_ptr<std::atomic<bool>> aborted_;
  bool started_ = false;
  SteadyClock::time_point last_write_ = SteadyClock::now();
};

}  // namespace

bool wants_exec_stream(const HttpRequest& req) {
  return req.header("Accept").find("application/x-ndjson") != std::string::npos;
}

Status stream_exec(ServerContext& ctx, Call& c, const std::string& lease_id,
                   const ExecRequestDto& request) {
  GuestExecRequest g = from_dto(request);
  if (!request.timeout_given) g.timeout = std::chrono::milliseconds::zero();
  auto exchange = c.keep();
  HttpExecSink sink(exchange, ctx.stop, ctx.options.event_keepalive);
  Result<GuestExecResult> r = internal_error("the exec failed");
  try {
    r = ctx.leases.exec_stream(lease_id, g, sink);
  } catch (const std::exception&) {  // a service must not throw; answer 500 like the pipeline
    r = internal_error("internal error while running the command");
  }
  if (!sink.is_started()) {
    exchange->respond(
        problem_response(r.is_ok() ? internal_error("the exec never started") : r.status()));
    return Status::ok();
  }
  if (r.is_ok()) {
    const bool cancelled = r->cancelled;
    exchange->write_chunk(exec_result_line(to_dto(std::move(*r)), cancelled));
  } else {
    exchange->write_chunk(exec_error_line(problem_from_status(r.status())));
  }
  exchange->end_stream();
  return Status::ok();
}

}  // namespace armhive
