#pragma once

#include <spdlog/sinks/base_sink.h>

#include <mutex>
#include <string>

namespace armhive {

// An spdlog sink that writes each line to systemd's journal through its native protocol (one
// datagram of fields to /run/systemd/journal/socket): MESSAGE, PRIORITY, SYSLOG_IDENTIFIER,
// and the fields an operator filters by, taken from the line's own words — LEASE_ID from
// "lease l-…", POOL from "pool NAME", HOST from "host NAME" — so `journalctl -u armhived
// LEASE_ID=l-3f2a9c0d1e2b` shows one lease's story. Lines are written whole whatever they
// hold (a value with a newline takes the protocol's length-prefixed form). A line the journal
// refuses (it is gone, or the line is too big) goes to stderr instead.
//
// Thread-safety: spdlog's base_sink serialises sink_it_ on the mutex.
class JournalSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit JournalSink(std::string socket_path = "/run/systemd/journal/socket");
  ~JournalSink() override;
  JournalSink(const JournalSink&) = delete;
  JournalSink& operator=(const JournalSink&) = delete;

  // Whether stderr is the journal's stream ($JOURNAL_STREAM names its device and inode, as
  // systemd sets it for a service whose output goes to the journal).
  static bool stderr_is_journal();

  // The datagram for one line (exposed for tests).
  static std::string encode(spdlog::level::level_enum level, const std::string& message);

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override {}

 private:
  std::string socket_path_;
  int fd_ = -1;
};

}  // namespace armhive
