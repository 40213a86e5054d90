#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/thread_annotations.h"

namespace armhive {

// A small Prometheus registry: counters, gauges and histograms, each a family of series told
// apart by labels, rendered in the text exposition format (version 0.0.4) by exposition().
//
// Families are created on first use with the type of the call (inc -> counter, set -> gauge,
// observe -> histogram); describe_*() beforehand sets the help text and histogram buckets.
// Using a name with a different type than it was created with is ignored (and counted in
// armhive_metrics_misuse_total) rather than aborting: metrics must never take the daemon down.
//
// Owned by main() and passed by reference to the HTTP server and the engine.
// Threading: every method is thread-safe (one internal mutex; calls are short).
class Metrics {
 public:
  using Labels = std::map<std::string, std::string>;

  // Default buckets for latencies in seconds (5 ms .. 5 min).
  static const std::vector<double>& latency_buckets();

  void describe_counter(std::string_view name, std::string_view help);
  void describe_gauge(std::string_view name, std::string_view help);
  void describe_histogram(std::string_view name, std::string_view help,
                          std::vector<double> buckets = latency_buckets());

  void inc(std::string_view name, const Labels& labels = {}, double value = 1);
  void set(std::string_view name, const Labels& labels, double value);
  void observe(std::string_view name, const Labels& labels, double value);
  // Drops every series of a gauge family (before re-populating it from a fresh snapshot, so a
  // pool that disappeared stops being reported).
  void clear(std::string_view name);

  // Current value of a counter or gauge series (0 when absent); for tests and self-checks.
  double value(std::string_view name, const Labels& labels = {}) const;
  // Observation count of a histogram series.
  uint64_t count(std::string_view name, const Labels& labels = {}) const;

  // Text exposition format, families sorted by name.
  std::string exposition() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series {
    double value = 0;               // counter / gauge
    std::vector<uint64_t> buckets;  // histogram: cumulative-less counts per bucket
    uint64_t count = 0;
    double sum = 0;
  };
  struct Family {
    Type type = Type::kCounter;
    std::string help;
    std::vector<double> bounds;
    std::map<Labels, Series> series;
  };

  Family* family_locked(std::string_view name, Type type) REQUIRES(mu_);

  mutable Mutex mu_;
  std::map<std::string, Family, std::less<>> families_ GUARDED_BY(mu_);
  uint64_t misuse_ GUARDED_BY(mu_) = 0;
};

}  // namespace armhive
