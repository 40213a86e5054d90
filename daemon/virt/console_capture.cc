#include "daemon/virt/console_capture.h"

#include <libvirt/virterror.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "daemon/virt/error.h"
#include "daemon/virt/handles.h"

namespace armhive {

struct ConsoleCapture::Capture {
  explicit Capture(size_t max) : max_bytes(max) {}

  void append(const char* data, size_t n) EXCLUDES(mu) {
    MutexLock lock(mu);
    buffer.append(data, n);
    // Trimmed in batches, so that appends stay amortised O(n).
    if (buffer.size() > 2 * max_bytes) buffer.erase(0, buffer.size() - max_bytes);
  }

  std::string tail(size_t n) EXCLUDES(mu) {
    MutexLock lock(mu);
    n = std::min({n, max_bytes, buffer.size()});
    return buffer.substr(buffer.size() - n);
  }

  // A stream and the connection it was opened on, which nothing else uses: whoever takes it
  // out (the stream's end, or detach) is the one to close it. The stream goes before its
  // connection.
  struct Open {
    ConnectPtr conn;
    StreamHandle stream;
    explicit operator bool() const { return static_cast<bool>(stream); }
  };

  // Takes the stream out if it is `st` (a newer attach may have replaced it).
  Open take_if(virStreamPtr st) EXCLUDES(mu) {
    MutexLock lock(mu);
    if (open.stream.get() != st) return Open();
    return std::exchange(open, Open());
  }

  const size_t max_bytes;
  Mutex mu;
  std::string buffer GUARDED_BY(mu);
  Open open GUARDED_BY(mu);  // empty once closed
};

namespace {

using Capture = ConsoleCapture::Capture;

// Ends `st`'s reading. The callback registration holds its own reference to the stream, so
// this is safe from inside the stream's callback.
void close_stream(virStreamPtr st, bool finished) noexcept {
  if (virStreamEventRemoveCallback(st) < 0) virResetLastError();
  if (finished ? virStreamFinish(st) < 0 : virStreamAbort(st) < 0) virResetLastError();
}

void on_stream_event(virStreamPtr st, int /*events*/, void* opaque) noexcept {
  Capture& cap = **static_cast<std::shared_ptr<Capture>*>(opaque);
  std::array<char, 16384> buf{};
  for (;;) {
    int n = virStreamRecv(st, buf.data(), buf.size());
    if (n > 0) {
      cap.append(buf.data(), static_cast<size_t>(n));
      continue;
    }
    if (n == -2) return;  // nothing more for now
    // 0: the end (the domain stopped); -1: the stream or connection broke.
    if (n < 0) virResetLastError();
    // Closed here only if detach() has not taken it meanwhile (it closes it then): one closer,
    // so the stream's connection never has two callers.
    Capture::Open mine = cap.take_if(st);
    if (mine) close_stream(st, n == 0);
    return;  // `mine` drops the stream, then its connection, here
  }
}

void free_opaque(void* opaque) noexcept { delete static_cast<std::shared_ptr<Capture>*>(opaque); }

}  // namespace

ConsoleCapture::ConsoleCapture(size_t max_bytes) : max_bytes_(std::max<size_t>(max_bytes, 1024)) {}

ConsoleCapture::~ConsoleCapture() noexcept {
  std::vector<std::string> names;
  {
    MutexLock lock(mu_);
    for (const auto& [name, cap] : captures_) names.push_back(name);
  }
  for (const std::string& name : names) detach(name);
}

Status ConsoleCapture::attach(const Connection& connection, const std::string& name) {
  std::shared_ptr<Capture> cap;
  bool fresh = false;
  {
    MutexLock lock(mu_);
    auto it = captures_.find(name);
    if (it == captures_.end()) {
      it = captures_.emplace(name, std::make_shared<Capture>(max_bytes_)).first;
      fresh = true;
    }
    cap = it->second;
  }
  {
    MutexLock lock(cap->mu);
    if (cap->open) return Status::ok();
  }
  auto forget = [&] {
    if (!fresh) return;
    MutexLock lock(mu_);
    auto it = captures_.find(name);
    if (it != captures_.end() && it->second == cap) captures_.erase(it);
  };
  Capture::Open open;
  if (auto conn = connection.open_dedicated(); conn.is_ok()) {
    open.conn = std::move(conn).value();
  } else {
    forget();
    return conn.status().annotate("console of " + name);
  }
  DomainHandle domain(virDomainLookupByName(open.conn.get(), name.c_str()));
  if (!domain) {
    Status s = libvirt_error("look up domain", name);
    forget();
    return s;
  }
  open.stream.reset(virStreamNew(open.conn.get(), VIR_STREAM_NONBLOCK));
  if (!open.stream) {
    Status s = libvirt_error("new console stream", name);
    forget();
    return s;
  }
  if (virDomainOpenConsole(domain.get(), nullptr, open.stream.get(), VIR_DOMAIN_CONSOLE_FORCE) <
      0) {
    Status s = libvirt_error("open console", name);
    forget();
    return s;
  }
  virStreamPtr raw = open.stream.get();
  {
    // Before the callback exists, so that an end it sees at once finds its stream.
    MutexLock lock(cap->mu);
    cap->open = std::move(open);
  }
  auto* opaque = new std::shared_ptr<Capture>(cap);
  if (virStreamEventAddCallback(
          raw, VIR_STREAM_EVENT_READABLE | VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP,
          on_stream_event, opaque, free_opaque) < 0) {
    Status s = libvirt_error("watch console stream", name);
    delete opaque;
    Capture::Open back = cap->take_if(raw);
    if (back && virStreamAbort(back.stream.get()) < 0) virResetLastError();
    forget();
    return s;
  }
  return Status::ok();
}

bool ConsoleCapture::is_open(const std::string& name) const {
  std::shared_ptr<Capture> cap;
  {
    MutexLock lock(mu_);
    auto it = captures_.find(name);
    if (it == captures_.end()) return false;
    cap = it->second;
  }
  MutexLock lock(cap->mu);
  return static_cast<bool>(cap->open);
}

Result<std::string> ConsoleCapture::tail(const std::string& name, size_t max_bytes) const {
  std::shared_ptr<Capture> cap;
  {
    MutexLock lock(mu_);
    auto it = captures_.find(name);
    if (it == captures_.end()) return not_found("no console captured", name);
    cap = it->second;
  }
  return cap->tail(max_bytes);
}

void ConsoleCapture::detach(const std::string& name) {
  std::shared_ptr<Capture> cap;
  {
    MutexLock lock(mu_);
    auto it = captures_.find(name);
    if (it == captures_.end()) return;
    cap = std::move(it->second);
    captures_.erase(it);
  }
  Capture::Open open;
  {
    MutexLock lock(cap->mu);
    open = std::exchange(cap->open, Capture::Open());
  }
  if (open) close_stream(open.stream.get(), false);
}

}  // namespace armhive
