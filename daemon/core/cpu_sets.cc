#include "daemon/core/cpu_sets.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <map>
#include <set>
#include <utility>

namespace armhive {
namespace {

// Far above any real host; keeps a typo like "0-4000000" from allocating a huge list.
constexpr int kMaxCpuId = 8191;

std::string_view trim(std::string_view s) {
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Parses a non-negative decimal CPU id; the whole of `s` must be digits.
std::optional<int> parse_id(std::string_view s) {
  if (s.empty() || s.size() > 6) return std::nullopt;
  int value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size() || value < 0) return std::nullopt;
  return value;
}

bool contains(const CpuList& list, int cpu) {
  return std::binary_search(list.begin(), list.end(), cpu);
}

CpuList intersect(const CpuList& a, const CpuList& b) {
  CpuList out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace

Result<CpuList> parse_cpu_list(std::string_view field, std::string_view text) {
  std::set<int> cpus;
  std::string_view rest = trim(text);
  if (rest.empty()) return CpuList{};
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    auto bad = [&](std::string_view why) {
      return invalid_argument(std::string(field), "bad CPU list \"" + std::string(trim(text)) +
                                                      "\": item \"" + std::string(item) + "\" " +
                                                      std::string(why) +
                                                      " (expected e.g. \"0-3,8\")");
    };
    if (item.empty()) return bad("is empty");
    size_t dash = item.find('-');
    std::optional<int> first;
    std::optional<int> last;
    if (dash == std::string_view::npos) {
      first = last = parse_id(item);
    } else {
      first = parse_id(trim(item.substr(0, dash)));
      last = parse_id(trim(item.substr(dash + 1)));
    }
    if (!first || !last) return bad("is not a CPU number or range");
    if (*first > *last) return bad("is a descending range");
    if (*last > kMaxCpuId) return bad("names a CPU above " + std::to_string(kMaxCpuId));
    for (int c = *first; c <= *last; ++c) cpus.insert(c);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return CpuList(cpus.begin(), cpus.end());
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::set<int> sorted(cpus.begin(), cpus.end());
  std::string out;
  auto it = sorted.begin();
  while (it != sorted.end()) {
    int first = *it;
    int last = first;
    ++it;
    while (it != sorted.end() && *it == last + 1) {
      last = *it;
      ++it;
    }
    if (!out.empty()) out += ',';
    out += std::to_string(first);
    if (last != first) out += "-" + std::to_string(last);
  }
  return out;
}

bool CpuSets::is_housekeeping(int cpu) const { return contains(housekeeping, cpu); }
bool CpuSets::is_dedicated(int cpu) const { return contains(dedicated, cpu); }
bool CpuSets::is_shared(int cpu) const { return contains(shared, cpu); }

CpuSets default_cpu_sets(const HostTopology& topology) {
  CpuSets sets;
  if (topology.cpus.empty()) return sets;
  std::set<int> nodes;
  for (const HostCpu& c : topology.cpus) nodes.insert(c.numa_node);
  std::set<int> housekeeping;
  if (nodes.size() <= 1) {
    int lowest = topology.cpus.front().id;
    for (const HostCpu& c : topology.cpus) lowest = std::min(lowest, c.id);
    housekeeping.insert(lowest);
  } else {
    std::map<int, int> first_of_node;
    for (const HostCpu& c : topology.cpus) {
      auto [it, inserted] = first_of_node.emplace(c.numa_node, c.id);
      if (!inserted) it->second = std::min(it->second, c.id);
    }
    for (const auto& [node, cpu] : first_of_node) housekeeping.insert(cpu);
  }
  sets.housekeeping.assign(housekeeping.begin(), housekeeping.end());
  for (const HostCpu& c : topology.cpus) {
    if (!housekeeping.contains(c.id)) sets.dedicated.push_back(c.id);
  }
  std::sort(sets.dedicated.begin(), sets.dedicated.end());
  return sets;
}

Result<CpuSets> make_cpu_sets(const HostTopology& topology, const CpuSetsConfig& config) {
  CpuSets defaults = default_cpu_sets(topology);
  CpuSets sets;
  const std::string& p = config.field_prefix;
  if (config.housekeeping) {
    ARMHIVE_ASSIGN_OR_RETURN(sets.housekeeping,
                             parse_cpu_list(p + "housekeeping", *config.housekeeping));
  } else {
    sets.housekeeping = defaults.housekeeping;
  }
  if (config.shared) {
    ARMHIVE_ASSIGN_OR_RETURN(sets.shared, parse_cpu_list(p + "shared", *config.shared));
  }
  if (config.dedicated) {
    ARMHIVE_ASSIGN_OR_RETURN(sets.dedicated, parse_cpu_list(p + "dedicated", *config.dedicated));
  } else {
    for (const HostCpu& c : topology.cpus) {
      if (!sets.is_housekeeping(c.id) && !sets.is_shared(c.id)) sets.dedicated.push_back(c.id);
    }
    std::sort(sets.dedicated.begin(), sets.dedicated.end());
  }
  ARMHIVE_RETURN_IF_ERROR(validate_cpu_sets(topology, sets, config));
  return sets;
}

Status validate_cpu_sets(const HostTopology& topology, const CpuSets& sets,
                         const CpuSetsConfig& config) {
  const std::string& p = config.field_prefix;
  CpuList host;
  for (const HostCpu& c : topology.cpus) host.push_back(c.id);
  std::sort(host.begin(), host.end());
  const std::pair<const char*, const CpuList*> named[] = {{"housekeeping", &sets.housekeeping},
                                                          {"dedicated", &sets.dedicated},
                                                          {"shared", &sets.shared}};
  for (const auto& [name, list] : named) {
    if (!std::is_sorted(list->begin(), list->end()) ||
        std::adjacent_find(list->begin(), list->end()) != list->end()) {
      return invalid_argument(p + name, "CPU list must be sorted without duplicates");
    }
    CpuList outside;
    std::set_difference(list->begin(), list->end(), host.begin(), host.end(),
                        std::back_inserter(outside));
    if (!outside.empty()) {
      return invalid_argument(p + name, "CPU(s) " + format_cpu_list(outside) +
                                            " not on this host (it has CPUs " +
                                            format_cpu_list(host) + ")");
    }
  }
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = i + 1; j < 3; ++j) {
      CpuList both = intersect(*named[i].second, *named[j].second);
      if (!both.empty()) {
        return invalid_argument(p + named[j].first, std::string("overlaps ") + p + named[i].first +
                                                        " on CPU(s) " + format_cpu_list(both) +
                                                        ": the sets must be disjoint");
      }
    }
  }
  if (sets.housekeeping.empty()) {
    return invalid_argument(p + "housekeeping",
                            "must name at least one CPU: the host, NIC interrupts and QEMU "
                            "emulator threads run there");
  }
  if (config.dedicated_pools && sets.dedicated.empty()) {
    return invalid_argument(p + "dedicated", "is empty but a pool uses dedicated CPUs (host CPUs " +
                                                 format_cpu_list(host) + ", housekeeping " +
                                                 format_cpu_list(sets.housekeeping) + ")");
  }
  if (config.shared_pools && sets.shared.empty()) {
    return invalid_argument(p + "shared", "is empty but a pool uses shared CPUs");
  }
  return Status::ok();
}

}  // namespace armhive
