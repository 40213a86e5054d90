#include "daemon/bench/iperf3_parser.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "base/bounded_number.h"
#include "base/json_depth.h"

namespace armhive {
namespace {

using nlohmann::json;

// The JSON comes from the host's iperf3 client, but the guest's server feeds it (with -R the
// guest is the sender and reports its own figures): every number is range-checked.
constexpr double kMaxBitsPerSecond = 1e13;  // 10 Tbit/s
constexpr double kMaxBytes = 1e15;          // 1 PB in one test
constexpr double kMaxSeconds = 1e6;
constexpr double kMaxCount = 1e12;
constexpr double kMaxPercent = 1e5;  // iperf3's CPU figures can pass 100 on many cores

// Reads numbers out of the document; the first bad one is kept and reported once at the end
// (the accessors then return 0), so the walk below stays linear.
class Checked {
 public:
  double number(const json& j, const char* key, double max, const std::string& where) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return 0;
    if (!it->is_number()) {
      fail(invalid_argument("iperf3", where + "." + key + " is not a number"));
      return 0;
    }
    double v = it->get<double>();
    Status s = check_bounded(v, 0, max, "iperf3 " + where + "." + key);
    if (!s.is_ok()) {
      fail(s);
      return 0;
    }
    return v;
  }
  std::optional<int64_t> opt_int(const json& j, const char* key, double max,
                                 const std::string& where) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number()) return std::nullopt;
    return static_cast<int64_t>(number(j, key, max, where));
  }
  int small_int(const json& j, const char* key, double max, const std::string& where) {
    return static_cast<int>(number(j, key, max, where));
  }
  uint64_t bytes(const json& j, const std::string& where) {
    return static_cast<uint64_t>(number(j, "bytes", kMaxBytes, where));
  }
  bool ok() const { return error_.is_ok(); }
  const Status& error() const { return error_; }

 private:
  void fail(Status s) {
    if (error_.is_ok()) error_ = std::move(s);
  }
  Status error_ = Status::ok();
};

}  // namespace

Result<IperfResult> parse_iperf3_json(std::string_view text) {
  // The guest's server feeds the report: bound its nesting before nlohmann builds it.
  ARMHIVE_RETURN_IF_ERROR(check_json_depth(text, "iperf3"));
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return invalid_argument("iperf3",
                            "iperf3 output is not complete JSON (truncated or not -J output)");
  }
  try {
    if (auto e = doc.find("error"); e != doc.end() && e->is_string()) {
      return unavailable("iperf3: " + e->get<std::string>().substr(0, 400));
    }
    IperfResult r;
    Checked c;
    const json& start = doc.at("start");
    r.version = start.value("version", "").substr(0, 100);
    std::map<int, int> port_of_socket;
    if (auto conns = start.find("connected"); conns != start.end() && conns->is_array()) {
      for (const auto& conn : *conns) {
        int socket = c.small_int(conn, "socket", 1 << 30, "start.connected");
        int port = c.small_int(conn, "local_port", 65535, "start.connected");
        port_of_socket[socket] = port;
        r.local_ports.push_back(port);
      }
    }
    if (auto ts = start.find("test_start"); ts != start.end()) {
      r.num_streams = c.small_int(*ts, "num_streams", 128, "start.test_start");
      r.reverse = c.small_int(*ts, "reverse", 1, "start.test_start") != 0;
      r.duration_s = c.number(*ts, "duration", kMaxSeconds, "start.test_start");
    }
    auto port = [&](int socket) {
      auto it = port_of_socket.find(socket);
      return it == port_of_socket.end() ? 0 : it->second;
    };
    for (const auto& iv : doc.at("intervals")) {
      IperfInterval out;
      for (const auto& s : iv.at("streams")) {
        IperfStreamSample sample;
        sample.socket = c.small_int(s, "socket", 1 << 30, "intervals.streams");
        sample.local_port = port(sample.socket);
        sample.bytes = c.bytes(s, "intervals.streams");
        sample.bits_per_second =
            c.number(s, "bits_per_second", kMaxBitsPerSecond, "intervals.streams");
        sample.retransmits = c.opt_int(s, "retransmits", kMaxCount, "intervals.streams");
        if (auto p = c.opt_int(s, "pmtu", 1 << 20, "intervals.streams")) {
          sample.pmtu = static_cast<int>(*p);
        }
        out.streams.push_back(sample);
      }
      const json& sum = iv.at("sum");
      out.start = c.number(sum, "start", kMaxSeconds, "intervals.sum");
      out.end = c.number(sum, "end", kMaxSeconds, "intervals.sum");
      out.sum_bytes = c.bytes(sum, "intervals.sum");
      out.sum_bits_per_second =
          c.number(sum, "bits_per_second", kMaxBitsPerSecond, "intervals.sum");
      out.sum_retransmits = c.opt_int(sum, "retransmits", kMaxCount, "intervals.sum");
      r.intervals.push_back(std::move(out));
      if (!c.ok()) break;
    }
    const json& end = doc.at("end");
    if (!end.contains("sum_sent") || !end.contains("sum_received")) {
      return unavailable("iperf3 ended without a summary (interrupted test)");
    }
    for (const auto& s : end.value("streams", json::array())) {
      IperfStreamTotal t;
      const json& snd = s.at("sender");
      const json& rcv = s.at("receiver");
      t.socket = c.small_int(snd, "socket", 1 << 30, "end.streams.sender");
      t.local_port = port(t.socket);
      t.sender_bytes = c.bytes(snd, "end.streams.sender");
      t.receiver_bytes = c.bytes(rcv, "end.streams.receiver");
      t.sender_bits_per_second =
          c.number(snd, "bits_per_second", kMaxBitsPerSecond, "end.streams.sender");
      t.receiver_bits_per_second =
          c.number(rcv, "bits_per_second", kMaxBitsPerSecond, "end.streams.receiver");
      t.retransmits = c.opt_int(snd, "retransmits", kMaxCount, "end.streams.sender");
      r.streams.push_back(t);
    }
    const json& sent = end.at("sum_sent");
    const json& received = end.at("sum_received");
    r.sent_bytes = c.bytes(sent, "end.sum_sent");
    r.received_bytes = c.bytes(received, "end.sum_received");
    r.sent_bits_per_second = c.number(sent, "bits_per_second", kMaxBitsPerSecond, "end.sum_sent");
    r.received_bits_per_second =
        c.number(received, "bits_per_second", kMaxBitsPerSecond, "end.sum_received");
    r.retransmits = c.opt_int(sent, "retransmits", kMaxCount, "end.sum_sent");
    if (auto cpu_it = end.find("cpu_utilization_percent");
        cpu_it != end.end() && cpu_it->is_object()) {
      const std::string where = "end.cpu_utilization_percent";
      IperfCpu cpu;
      cpu.host_total = c.number(*cpu_it, "host_total", kMaxPercent, where);
      cpu.host_user = c.number(*cpu_it, "host_user", kMaxPercent, where);
      cpu.host_system = c.number(*cpu_it, "host_system", kMaxPercent, where);
      cpu.remote_total = c.number(*cpu_it, "remote_total", kMaxPercent, where);
      cpu.remote_user = c.number(*cpu_it, "remote_user", kMaxPercent, where);
      cpu.remote_system = c.number(*cpu_it, "remote_system", kMaxPercent, where);
      r.cpu = cpu;
    }
    if (!c.ok()) {
      return Status(ErrorCode::kInvalidArgument, "iperf3 output rejected: " + c.error().message(),
                    {}, "iperf3");
    }
    if (r.num_streams == 0) r.num_streams = static_cast<int>(r.streams.size());
    return r;
  } catch (const json::exception& e) {
    return invalid_argument("iperf3", std::string("unexpected iperf3 JSON: ") + e.what());
  }
}

}  // namespace armhive
