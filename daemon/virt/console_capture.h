#pragma once

#include <libvirt/libvirt.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/virt/connection.h"

namespace armhive {

// The tail of each VM's serial console, read from libvirt's console stream
// (virDomainOpenConsole) and kept in this process's memory: the way to see a remote host's
// console, where no file of the host can be read from here. (A log file in one of the host's
// storage pools could be downloaded, but libvirt probes the format of every file in a pool it
// refreshes, and a guest controls the first bytes of its console log once virtlogd rotates it.)
//
// Ownership: owns one stream per captured domain; the destructor aborts them all. The libvirt
// event loop (EventLoop) must run for output to arrive, and must outlive this object.
//
// Threading: every method may be called from any thread; stream callbacks run on the event
// loop thread. mu_ guards the map, each capture's own mutex its buffer; neither is held across
// a libvirt call.
class ConsoleCapture {
 public:
  // Each domain keeps its last `max_bytes` of output (at least 1 KiB).
  explicit ConsoleCapture(size_t max_bytes);
  ~ConsoleCapture() noexcept;
  ConsoleCapture(const ConsoleCapture&) = delete;
  ConsoleCapture& operator=(const ConsoleCapture&) = delete;

  // Opens the console of domain `name` (taking it over from any other reader: a restarted
  // daemon reclaims its own) on a connection of the stream's own (Connection::open_dedicated:
  // the stream is closed later from another thread, which no shared connection allows) and
  // captures from now on. Output already captured under `name` is kept, so a capture re-opened
  // after libvirtd restarted continues the same tail. A domain started paused and resumed after
  // this call is captured from its first byte. No-op if a capture of `name` is open already.
  Status attach(const Connection& connection, const std::string& name);

  // Whether output of `name` is being read now (false after the stream ended: the domain
  // stopped or the connection broke).
  bool is_open(const std::string& name) const;

  // The last `max_bytes` captured of `name`; kNotFound if it was never attached.
  Result<std::string> tail(const std::string& name, size_t max_bytes) const;

  // Closes the stream and forgets the output.
  void detach(const std::string& name);

  struct Capture;  // one domain's stream and buffer (console_capture.cc)

 private:
  const size_t max_bytes_;
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<Capture>, std::less<>> captures_ GUARDED_BY(mu_);
};

}  // namespace armhive
