#include "daemon/journal_sink.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>

namespace armhive {
namespace {

constexpr size_t kMaxMessage = 64 * 1024;  // well under the journal's datagram limit

// KEY=value, or for a value with a newline: KEY\n<64-bit little-endian length>value\n.
void field(std::string& out, const char* key, std::string_view value) {
  if (value.find('\n') == std::string_view::npos) {
    out.append(key).append("=").append(value).append("\n");
    return;
  }
  out.append(key).append("\n");
  uint64_t n = value.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out.append(value).append("\n");
}

int priority(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::critical:
      return 2;
    case spdlog::level::err:
      return 3;
    case spdlog::level::warn:
      return 4;
    case spdlog::level::info:
      return 6;
    default:
      return 7;
  }
}

}  // namespace

JournalSink::JournalSink(std::string socket_path)
    : socket_path_(std::move(socket_path)), fd_(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {}

JournalSink::~JournalSink() {
  if (fd_ >= 0) ::close(fd_);
}

bool JournalSink::stderr_is_journal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  return ::fstat(STDERR_FILENO, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

std::string JournalSink::encode(spdlog::level::level_enum level, const std::string& message) {
  static const std::regex kLease(R"(\blease (l-[0-9a-z]+))");
  static const std::regex kPool(R"(\bpool '?([a-z0-9._-]+))");
  static const std::regex kHost(R"(\bhost '?([a-z0-9._-]+))");
  std::string out;
  field(out, "MESSAGE", std::string_view(message).substr(0, kMaxMessage));
  field(out, "PRIORITY", std::to_string(priority(level)));
  field(out, "SYSLOG_IDENTIFIER", "armhived");
  // Words that follow "pool"/"host" in prose without naming one ("host name 'X' is used").
  auto named = [](const std::smatch& m) {
    static const char* const kProse[] = {"name", "names", "is", "and", "the", "of", "that"};
    for (const char* w : kProse) {
      if (m[1].str() == w) return false;
    }
    return true;
  };
  std::smatch m;
  if (std::regex_search(message, m, kLease)) field(out, "LEASE_ID", m[1].str());
  if (std::regex_search(message, m, kPool) && named(m)) field(out, "POOL", m[1].str());
  if (std::regex_search(message, m, kHost) && named(m)) field(out, "HOST", m[1].str());
  return out;
}

void JournalSink::sink_it_(const spdlog::details::log_msg& msg) {
  const std::string message(msg.payload.data(), msg.payload.size());
  const std::string datagram = encode(msg.level, message);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path_.c_str(), sizeof addr.sun_path - 1);
  if (fd_ >= 0 && ::sendto(fd_, datagram.data(), datagram.size(), MSG_NOSIGNAL,
                           reinterpret_cast<const sockaddr*>(&addr), sizeof addr) >= 0) {
    return;
  }
  std::fprintf(stderr, "%s\n", message.c_str());
}

}  // namespace armhive
