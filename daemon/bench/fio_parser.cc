#include "daemon/bench/fio_parser.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/bounded_number.h"
#include "base/json_depth.h"

namespace armhive {
namespace {

using nlohmann::json;

// A number member checked for range; kInvalidArgument naming it otherwise.
Result<double> number(const json& obj, const std::string& field, const char* key, double lo,
                      double hi) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number())
    return invalid_argument(field + "." + key, "missing or not a number in fio's JSON");
  double v = it->get<double>();
  if (!check_bounded(v, lo, hi, key).is_ok()) {
    return invalid_argument(field + "." + key, "out of range (" + std::to_string(v) + ")");
  }
  return v;
}

// fio prints job options as strings.
std::string option(const json& opts, const char* key, std::string fallback = "") {
  auto it = opts.find(key);
  if (it == opts.end() || !it->is_string()) return fallback;
  return it->get<std::string>().substr(0, 200);
}

bool near(double a, double b, double tolerance) {
  return std::fabs(a - b) <= tolerance * std::max(std::fabs(a), std::fabs(b));
}

}  // namespace

std::optional<uint64_t> parse_fio_size(std::string_view text) {
  if (text.empty() || text.size() > 24) return std::nullopt;
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  auto n = parse_bounded_int(text.substr(0, digits), 1, int64_t{1} << 40, "size");
  if (!n.is_ok()) return std::nullopt;
  std::string suffix;
  for (char c : text.substr(digits)) suffix += static_cast<char>(std::tolower(c));
  uint64_t mult = 1;
  if (suffix == "" || suffix == "b") {
    mult = 1;
  } else if (suffix == "k" || suffix == "kb" || suffix == "kib") {
    mult = 1ULL << 10;
  } else if (suffix == "m" || suffix == "mb" || suffix == "mib") {
    mult = 1ULL << 20;
  } else if (suffix == "g" || suffix == "gb" || suffix == "gib") {
    mult = 1ULL << 30;
  } else {
    return std::nullopt;
  }
  uint64_t v = static_cast<uint64_t>(*n);
  if (v > (1ULL << 40) / mult) return std::nullopt;
  return v * mult;
}

Result<FioResult> parse_fio_json(std::string_view output) {
  if (output.size() > 10'000'000) return invalid_argument("storage", "fio output too long");
  size_t brace = output.find('{');
  if (brace == std::string_view::npos)
    return invalid_argument("storage", "no JSON in fio output (fio failed before its report?)");
  ARMHIVE_RETURN_IF_ERROR(check_json_depth(output.substr(brace), "storage"));
  json doc = json::parse(output.substr(brace), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    return invalid_argument("storage", "fio output is not valid JSON (truncated?)");
  FioResult r;
  if (auto v = doc.find("fio version"); v != doc.end() && v->is_string())
    r.version = v->get<std::string>().substr(0, 40);
  auto jobs = doc.find("jobs");
  if (jobs == doc.end() || !jobs->is_array() || jobs->empty())
    return invalid_argument("storage.jobs", "fio's JSON has no jobs");
  for (const json& job : *jobs) {
    if (!job.is_object()) return invalid_argument("storage.jobs", "a job is not an object");
    FioJobResult j;
    if (auto n = job.find("jobname"); n != job.end() && n->is_string())
      j.name = n->get<std::string>().substr(0, 60);
    std::string field = "storage." + (j.name.empty() ? std::string("job") : j.name);
    if (auto e = job.find("error"); e == job.end() || !e->is_number_integer()) {
      return invalid_argument(field + ".error", "missing in fio's JSON");
    } else if (e->get<int64_t>() != 0) {
      return unavailable(
          "fio job " + j.name + " failed with error " + std::to_string(e->get<int64_t>()) +
          " (an errno: " + std::string(std::strerror(static_cast<int>(e->get<int64_t>()))) + ")");
    }
    json opts = job.value("job options", json::object());
    if (!opts.is_object()) opts = json::object();
    j.rw = option(opts, "rw", "read");
    j.ioengine = option(opts, "ioengine");
    j.direct = option(opts, "direct") == "1";
    j.size = option(opts, "size");
    auto bs = parse_fio_size(option(opts, "bs", "4k"));
    if (!bs) return invalid_argument(field + ".bs", "not a block size");
    j.block_bytes = *bs;
    auto depth = parse_bounded_int(option(opts, "iodepth", "1"), 1, 65536, "iodepth");
    if (!depth.is_ok())
      return invalid_argument(field + ".iodepth", "not a queue depth in 1..65536");
    j.iodepth = static_cast<int>(*depth);
    if (j.rw == "read" || j.rw == "randread") {
      j.direction = "read";
    } else if (j.rw == "write" || j.rw == "randwrite") {
      j.direction = "write";
    } else {
      return invalid_argument(field + ".rw", "only read, write, randread and randwrite jobs");
    }
    const char* other = j.direction == "read" ? "write" : "read";
    auto side = job.find(j.direction);
    if (side == job.end() || !side->is_object())
      return invalid_argument(field + "." + j.direction, "missing in fio's JSON");
    if (auto o = job.find(other); o != job.end() && o->is_object() &&
                                  o->value("io_bytes", json(0)).is_number() &&
                                  o->value("io_bytes", json(0)).get<double>() != 0) {
      return invalid_argument(field + "." + other, "a " + j.rw + " job did I/O in both directions");
    }
    const std::string sf = field + "." + j.direction;
    ARMHIVE_ASSIGN_OR_RETURN(double io_bytes, number(*side, sf, "io_bytes", 1, 1e15));
    ARMHIVE_ASSIGN_OR_RETURN(j.bw_bytes_per_s, number(*side, sf, "bw_bytes", 1, 1e12));
    ARMHIVE_ASSIGN_OR_RETURN(j.iops, number(*side, sf, "iops", 1e-3, 1e9));
    ARMHIVE_ASSIGN_OR_RETURN(j.runtime_ms, number(*side, sf, "runtime", 1, 1e8));
    j.io_bytes = static_cast<uint64_t>(io_bytes);
    if (auto lat = side->find("lat_ns"); lat != side->end() && lat->is_object()) {
      ARMHIVE_ASSIGN_OR_RETURN(double mean, number(*lat, sf + ".lat_ns", "mean", 0, 1e12));
      j.lat_mean_us = mean / 1000;
    } else {
      return invalid_argument(sf + ".lat_ns", "missing in fio's JSON");
    }
    if (auto clat = side->find("clat_ns"); clat != side->end() && clat->is_object()) {
      if (auto pct = clat->find("percentile"); pct != clat->end() && pct->is_object()) {
        auto p99 = number(*pct, sf + ".clat_ns.percentile", "99.000000", 0, 1e12);
        if (!p99.is_ok()) return p99.status();
        j.clat_p99_us = *p99 / 1000;
      }
    }
    // fio's own relations: a report that contradicts them is corrupt.
    if (!near(j.bw_bytes_per_s, io_bytes * 1000 / j.runtime_ms, 0.05)) {
      return invalid_argument(sf + ".bw_bytes", "does not match io_bytes / runtime");
    }
    if (!near(j.bw_bytes_per_s, j.iops * static_cast<double>(j.block_bytes), 0.05)) {
      return invalid_argument(sf + ".iops", "does not match bw_bytes / block size");
    }
    r.jobs.push_back(std::move(j));
  }
  return r;
}

}  // namespace armhive
