#include "daemon/virt/domain_stats.h"

#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string_view>

namespace armhive {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > kMax - b ? kMax : a + b; }

// "<prefix><digits><suffix>": the index, or nullopt.
std::optional<uint64_t> indexed(std::string_view name, std::string_view prefix,
                                std::string_view suffix) {
  if (name.size() <= prefix.size() + suffix.size() || name.substr(0, prefix.size()) != prefix ||
      name.substr(name.size() - suffix.size()) != suffix) {
    return std::nullopt;
  }
  std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 9) return std::nullopt;
  uint64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

std::optional<uint64_t> sum(const std::map<uint64_t, uint64_t>& per_index) {
  if (per_index.empty()) return std::nullopt;
  uint64_t total = 0;
  for (const auto& [index, value] : per_index) total = saturating_add(total, value);
  return total;
}

}  // namespace

std::vector<DomainStatField> domain_stat_fields(const virTypedParameter* params, int count) {
  std::vector<DomainStatField> out;
  for (int i = 0; params != nullptr && i < count; ++i) {
    const virTypedParameter& p = params[i];
    DomainStatField f;
    f.name = std::string(p.field, strnlen(p.field, VIR_TYPED_PARAM_FIELD_LENGTH));
    switch (p.type) {
      case VIR_TYPED_PARAM_ULLONG:
        f.value = p.value.ul;
        break;
      case VIR_TYPED_PARAM_UINT:
        f.value = p.value.ui;
        break;
      case VIR_TYPED_PARAM_LLONG:
        if (p.value.l < 0) continue;
        f.value = static_cast<uint64_t>(p.value.l);
        break;
      case VIR_TYPED_PARAM_INT:
        if (p.value.i < 0) continue;
        f.value = static_cast<uint64_t>(p.value.i);
        break;
      default:
        continue;
    }
    out.push_back(std::move(f));
  }
  return out;
}

UsageCounters usage_counters_from_stats(int64_t run_id,
                                        const std::vector<DomainStatField>& fields) {
  UsageCounters c;
  c.run_id = run_id;
  std::map<uint64_t, uint64_t> written, received, sent;
  for (const DomainStatField& f : fields) {
    if (f.name == "cpu.time") {
      c.cpu_ns = f.value;
    } else if (f.name == "balloon.rss") {
      c.rss_bytes = f.value > kMax / 1024 ? kMax : f.value * 1024;
    } else if (auto n = indexed(f.name, "block.", ".wr.bytes")) {
      written[*n] = f.value;
    } else if (auto n = indexed(f.name, "net.", ".rx.bytes")) {
      received[*n] = f.value;
    } else if (auto n = indexed(f.name, "net.", ".tx.bytes")) {
      sent[*n] = f.value;
    }
  }
  c.disk_write_bytes = sum(written);
  c.net_rx_bytes = sum(received);
  c.net_tx_bytes = sum(sent);
  return c;
}

}  // namespace armhive
