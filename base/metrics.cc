#include "base/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace armhive {
namespace {

std::string format_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string escape_label(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string escape_help(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Metric and label names: [a-zA-Z_:][a-zA-Z0-9_:]*; anything else becomes '_'.
std::string sanitize_name(std::string_view n) {
  // Built character by character (not copied and patched in place): GCC 12 at -O3 reports a
  // -Wrestrict false positive on assigning a literal to the copy.
  if (n.empty()) return std::string(1, '_');
  std::string out;
  out.reserve(n.size());
  for (size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9');
    out.push_back(ok ? c : '_');
  }
  return out;
}

std::string render_labels(const Metrics::Labels& labels, std::string_view extra_key = {},
                          std::string_view extra_value = {}) {
  if (labels.empty() && extra_key.empty()) return {};
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += sanitize_name(k) + "=\"" + escape_label(v) + "\"";
  }
  if (!extra_key.empty()) {
    if (!first) out += ',';
    out += std::string(extra_key) + "=\"" + std::string(extra_value) + "\"";
  }
  out += '}';
  return out;
}

}  // namespace

const std::vector<double>& Metrics::latency_buckets() {
  static const std::vector<double> kBuckets{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                            2.5,   5,    10,    30,   60,  120,  300};
  return kBuckets;
}

Metrics::Family* Metrics::family_locked(std::string_view name, Type type) {
  std::string key = sanitize_name(name);
  auto it = families_.find(key);
  if (it == families_.end()) {
    Family f;
    f.type = type;
    if (type == Type::kHistogram) f.bounds = latency_buckets();
    it = families_.emplace(std::move(key), std::move(f)).first;
  }
  if (it->second.type != type) {
    ++misuse_;
    return nullptr;
  }
  return &it->second;
}

void Metrics::describe_counter(std::string_view name, std::string_view help) {
  MutexLock lock(mu_);
  if (Family* f = family_locked(name, Type::kCounter)) f->help = help;
}

void Metrics::describe_gauge(std::string_view name, std::string_view help) {
  MutexLock lock(mu_);
  if (Family* f = family_locked(name, Type::kGauge)) f->help = help;
}

void Metrics::describe_histogram(std::string_view name, std::string_view help,
                                 std::vector<double> buckets) {
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  MutexLock lock(mu_);
  Family* f = family_locked(name, Type::kHistogram);
  if (f == nullptr) return;
  f->help = help;
  if (f->series.empty()) f->bounds = std::move(buckets);
}

void Metrics::inc(std::string_view name, const Labels& labels, double value) {
  if (value < 0) return;  // counters only go up
  MutexLock lock(mu_);
  if (Family* f = family_locked(name, Type::kCounter)) f->series[labels].value += value;
}

void Metrics::set(std::string_view name, const Labels& labels, double value) {
  MutexLock lock(mu_);
  if (Family* f = family_locked(name, Type::kGauge)) f->series[labels].value = value;
}

void Metrics::observe(std::string_view name, const Labels& labels, double value) {
  MutexLock lock(mu_);
  Family* f = family_locked(name, Type::kHistogram);
  if (f == nullptr) return;
  Series& s = f->series[labels];
  if (s.buckets.size() != f->bounds.size()) s.buckets.assign(f->bounds.size(), 0);
  for (size_t i = 0; i < f->bounds.size(); ++i) {
    if (value <= f->bounds[i]) {
      ++s.buckets[i];
      break;
    }
  }
  ++s.count;
  s.sum += value;
}

void Metrics::clear(std::string_view name) {
  MutexLock lock(mu_);
  auto it = families_.find(name);
  if (it != families_.end()) it->second.series.clear();
}

double Metrics::value(std::string_view name, const Labels& labels) const {
  MutexLock lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return 0;
  auto s = it->second.series.find(labels);
  return s == it->second.series.end() ? 0 : s->second.value;
}

uint64_t Metrics::count(std::string_view name, const Labels& labels) const {
  MutexLock lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return 0;
  auto s = it->second.series.find(labels);
  return s == it->second.series.end() ? 0 : s->second.count;
}

std::string Metrics::exposition() const {
  MutexLock lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    if (!f.help.empty()) out += "# HELP " + name + " " + escape_help(f.help) + "\n";
    out += "# TYPE " + name + " ";
    out += f.type == Type::kCounter ? "counter" : f.type == Type::kGauge ? "gauge" : "histogram";
    out += "\n";
    for (const auto& [labels, s] : f.series) {
      if (f.type != Type::kHistogram) {
        out += name + render_labels(labels) + " " + format_number(s.value) + "\n";
        continue;
      }
      uint64_t cumulative = 0;
      for (size_t i = 0; i < f.bounds.size(); ++i) {
        cumulative += i < s.buckets.size() ? s.buckets[i] : 0;
        out += name + "_bucket" + render_labels(labels, "le", format_number(f.bounds[i])) + " " +
               std::to_string(cumulative) + "\n";
      }
      out += name + "_bucket" + render_labels(labels, "le", "+Inf") + " " +
             std::to_string(s.count) + "\n";
      out += name + "_sum" + render_labels(labels) + " " + format_number(s.sum) + "\n";
      out += name + "_count" + render_labels(labels) + " " + std::to_string(s.count) + "\n";
    }
  }
  if (misuse_ > 0) {
    out += "# TYPE armhive_metrics_misuse_total counter\narmhive_metrics_misuse_total " +
           std::to_string(misuse_) + "\n";
  }
  return out;
}

}  // namespace armhive
