#include "daemon/bench/iperf3_parser.h"

#include <map>
#include <nlohmann/json.hpp>

namespace armhive {
namespace {

using nlohmann::json;

double num(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

uint64_t bytes_of(const json& j) {
  auto it = j.find("bytes");
  if (it == j.end() || !it->is_number()) return 0;
  double v = it->get<double>();
  return v > 0 ? static_cast<uint64_t>(v) : 0;
}

std::optional<int64_t> opt_int(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<int64_t>();
}

}  // namespace

Result<IperfResult> parse_iperf3_json(std::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return invalid_argument("iperf3",
                            "iperf3 output is not complete JSON (truncated or not -J output)");
  }
  try {
    if (auto e = doc.find("error"); e != doc.end() && e->is_string()) {
      return unavailable("iperf3: " + e->get<std::string>());
    }
    IperfResult r;
    const json& start = doc.at("start");
    r.version = start.value("version", "");
    std::map<int, int> port_of_socket;
    if (auto c = start.find("connected"); c != start.end() && c->is_array()) {
      for (const auto& conn : *c) {
        int socket = conn.value("socket", 0);
        int port = conn.value("local_port", 0);
        port_of_socket[socket] = port;
        r.local_ports.push_back(port);
      }
    }
    if (auto ts = start.find("test_start"); ts != start.end()) {
      r.num_streams = ts->value("num_streams", 0);
      r.reverse = ts->value("reverse", 0) != 0;
      r.duration_s = num(*ts, "duration");
    }
    auto port = [&](int socket) {
      auto it = port_of_socket.find(socket);
      return it == port_of_socket.end() ? 0 : it->second;
    };
    for (const auto& iv : doc.at("intervals")) {
      IperfInterval out;
      for (const auto& s : iv.at("streams")) {
        IperfStreamSample sample;
        sample.socket = s.value("socket", 0);
        sample.local_port = port(sample.socket);
        sample.bytes = bytes_of(s);
        sample.bits_per_second = num(s, "bits_per_second");
        sample.retransmits = opt_int(s, "retransmits");
        if (auto p = opt_int(s, "pmtu")) sample.pmtu = static_cast<int>(*p);
        out.streams.push_back(sample);
      }
      const json& sum = iv.at("sum");
      out.start = num(sum, "start");
      out.end = num(sum, "end");
      out.sum_bytes = bytes_of(sum);
      out.sum_bits_per_second = num(sum, "bits_per_second");
      out.sum_retransmits = opt_int(sum, "retransmits");
      r.intervals.push_back(std::move(out));
    }
    const json& end = doc.at("end");
    if (!end.contains("sum_sent") || !end.contains("sum_received")) {
      return unavailable("iperf3 ended without a summary (interrupted test)");
    }
    for (const auto& s : end.value("streams", json::array())) {
      IperfStreamTotal t;
      const json& snd = s.at("sender");
      const json& rcv = s.at("receiver");
      t.socket = snd.value("socket", 0);
      t.local_port = port(t.socket);
      t.sender_bytes = bytes_of(snd);
      t.receiver_bytes = bytes_of(rcv);
      t.sender_bits_per_second = num(snd, "bits_per_second");
      t.receiver_bits_per_second = num(rcv, "bits_per_second");
      t.retransmits = opt_int(snd, "retransmits");
      r.streams.push_back(t);
    }
    const json& sent = end.at("sum_sent");
    const json& received = end.at("sum_received");
    r.sent_bytes = bytes_of(sent);
    r.received_bytes = bytes_of(received);
    r.sent_bits_per_second = num(sent, "bits_per_second");
    r.received_bits_per_second = num(received, "bits_per_second");
    r.retransmits = opt_int(sent, "retransmits");
    if (auto c = end.find("cpu_utilization_percent"); c != end.end() && c->is_object()) {
      IperfCpu cpu;
      cpu.host_total = num(*c, "host_total");
      cpu.host_user = num(*c, "host_user");
      cpu.host_system = num(*c, "host_system");
      cpu.remote_total = num(*c, "remote_total");
      cpu.remote_user = num(*c, "remote_user");
      cpu.remote_system = num(*c, "remote_system");
      r.cpu = cpu;
    }
    if (r.num_streams == 0) r.num_streams = static_cast<int>(r.streams.size());
    return r;
  } catch (const json::exception& e) {
    return invalid_argument("iperf3", std::string("unexpected iperf3 JSON: ") + e.what());
  }
}

}  // namespace armhive
