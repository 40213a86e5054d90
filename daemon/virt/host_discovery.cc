#include "daemon/virt/host_discovery.h"

#include <fcntl.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "daemon/virt/error.h"
#include "daemon/virt/handles.h"
#include "daemon/virt/xml.h"

namespace armhive {

using detail::XmlDoc;

namespace {

std::string read_small_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

uint64_t to_u64(const std::string& s) {
  return s.empty() ? 0 : std::strtoull(s.c_str(), nullptr, 10);
}

uint64_t to_kib(uint64_t value, const std::string& unit) {
  if (unit.empty() || unit == "KiB" || unit == "k" || unit == "K") return value;
  if (unit == "MiB" || unit == "M") return value * 1024;
  if (unit == "GiB" || unit == "G") return value * 1024 * 1024;
  if (unit == "b" || unit == "bytes") return value / 1024;
  return value;
}

bool kvm_device_usable(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

}  // namespace

std::vector<std::vector<int>> read_sysfs_clusters(const std::string& sysfs_root) {
  namespace fs = std::filesystem;
  std::set<std::vector<int>> seen;
  fs::path cpu_dir = fs::path(sysfs_root) / "devices/system/cpu";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(cpu_dir, ec)) {
    std::string n = entry.path().filename().string();
    if (n.size() < 4 || n.compare(0, 3, "cpu") != 0 ||
        !std::all_of(n.begin() + 3, n.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    std::string list;
    for (int idx = 0; idx < 8 && list.empty(); ++idx) {
      fs::path cache = entry.path() / "cache" / ("index" + std::to_string(idx));
      if (!fs::exists(cache, ec)) continue;
      std::string level = read_small_file(cache / "level");
      // Older fixtures and some kernels lack `level`: index2 is L2 on arm64 and x86.
      if (level == "2" || (level.empty() && idx == 2))
        list = read_small_file(cache / "shared_cpu_list");
    }
    if (list.empty()) list = read_small_file(entry.path() / "topology/cluster_cpus_list");
    if (list.empty()) continue;
    auto cpus = detail::parse_cpu_list(list);
    if (cpus.is_ok() && !cpus->empty()) seen.insert(*cpus);
  }
  std::vector<std::vector<int>> out(seen.begin(), seen.end());
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return out;
}

Result<HostTopology> parse_capabilities(std::string_view capabilities_xml,
                                        const DiscoveryOptions& options) {
  ARMHIVE_ASSIGN_OR_RETURN(XmlDoc doc, XmlDoc::parse(capabilities_xml));
  if (doc.node("/capabilities/host") == nullptr) {
    return Status(ErrorCode::kInvalidArgument, "capabilities document without <host>");
  }
  HostTopology t;
  t.arch = doc.str("string(/capabilities/host/cpu/arch)");
  t.cpu_model = doc.str("string(/capabilities/host/cpu/model)");
  if (t.arch.empty()) return Status(ErrorCode::kInvalidArgument, "capabilities without host arch");

  for (xmlNodePtr cell : doc.nodes("/capabilities/host/topology/cells/cell")) {
    NumaCell c;
    c.id = std::atoi(detail::attr_of(cell, "id").c_str());
    xmlNodePtr mem = doc.node("memory", cell);
    c.memory_kib = to_kib(to_u64(detail::text_of(mem)), detail::attr_of(mem, "unit"));
    for (xmlNodePtr p : doc.nodes("pages", cell)) {
      HugePages h;
      h.size_kib = to_kib(to_u64(detail::attr_of(p, "size")), detail::attr_of(p, "unit"));
      if (h.size_kib <= 64) continue;  // base pages, not hugepages
      h.total = to_u64(detail::text_of(p));
      h.free = h.total;
      if (static_cast<size_t>(c.id) < options.free_hugepages.size()) {
        for (const auto& [size, free] : options.free_hugepages[c.id]) {
          if (size == h.size_kib) h.free = free;
        }
      }
      c.hugepages.push_back(h);
    }
    for (xmlNodePtr cpu : doc.nodes("cpus/cpu", cell)) {
      HostCpu hc;
      hc.id = std::atoi(detail::attr_of(cpu, "id").c_str());
      hc.socket = std::atoi(detail::attr_of(cpu, "socket_id").c_str());
      hc.die = std::atoi(detail::attr_of(cpu, "die_id").c_str());
      hc.core = std::atoi(detail::attr_of(cpu, "core_id").c_str());
      hc.numa_node = c.id;
      hc.cluster = -1;
      std::string sib = detail::attr_of(cpu, "siblings");
      if (!sib.empty()) {
        auto s = detail::parse_cpu_list(sib);
        if (!s.is_ok()) return s.status().annotate("siblings of CPU " + std::to_string(hc.id));
        hc.siblings = *s;
      } else {
        hc.siblings = {hc.id};
      }
      c.cpus.push_back(hc.id);
      t.cpus.push_back(std::move(hc));
    }
    std::sort(c.cpus.begin(), c.cpus.end());
    t.memory_kib += c.memory_kib;
    t.cells.push_back(std::move(c));
  }
  std::sort(t.cpus.begin(), t.cpus.end(),
            [](const HostCpu& a, const HostCpu& b) { return a.id < b.id; });

  std::vector<std::vector<int>> clusters;
  if (options.clusters) {
    clusters = *options.clusters;
  } else if (!options.sysfs_root.empty()) {
    clusters = read_sysfs_clusters(options.sysfs_root);
  }
  for (size_t i = 0; i < clusters.size(); ++i) {
    for (int id : clusters[i]) {
      for (HostCpu& c : t.cpus) {
        if (c.id == id) c.cluster = static_cast<int>(i);
      }
    }
  }

  bool kvm = false;
  if (options.kvm_usable) {
    kvm = *options.kvm_usable;
  } else if (options.kvm_from_capabilities) {
    // libvirt offers a kvm domain for an arch only where /dev/kvm works on that host.
    for (xmlNodePtr guest : doc.nodes("/capabilities/guest")) {
      xmlNodePtr arch = doc.node("arch", guest);
      if (arch == nullptr || detail::attr_of(arch, "name") != t.arch) continue;
      for (xmlNodePtr domain : doc.nodes("domain", arch)) {
        kvm = kvm || detail::attr_of(domain, "type") == "kvm";
      }
    }
  } else {
    kvm = kvm_device_usable(options.kvm_device);
  }
  t.accel = (t.arch == "aarch64" && kvm) ? Accel::kKvm : Accel::kTcg;
  return t;
}

Result<HostTopology> discover_host(const Connection& connection, const DiscoveryOptions& options,
                                   std::string* capabilities_xml) {
  ARMHIVE_ASSIGN_OR_RETURN(ConnectPtr conn, connection.get());
  LibvirtString caps(virConnectGetCapabilities(conn.get()));
  if (!caps) return libvirt_error("get host capabilities", connection.uri());
  DiscoveryOptions opts = options;

  // Free hugepages per cell and size (capabilities only give totals).
  {
    ARMHIVE_ASSIGN_OR_RETURN(HostTopology pre, parse_capabilities(caps.get(), options));
    std::vector<unsigned int> sizes;
    for (const NumaCell& c : pre.cells) {
      for (const HugePages& h : c.hugepages) {
        if (std::find(sizes.begin(), sizes.end(), h.size_kib) == sizes.end()) {
          sizes.push_back(static_cast<unsigned int>(h.size_kib));
        }
      }
    }
    if (!sizes.empty() && !pre.cells.empty()) {
      int ncells = 0;
      for (const NumaCell& c : pre.cells) ncells = std::max(ncells, c.id + 1);
      std::vector<unsigned long long> counts(static_cast<size_t>(ncells) * sizes.size());
      int n = virNodeGetFreePages(conn.get(), static_cast<unsigned int>(sizes.size()), sizes.data(),
                                  0, static_cast<unsigned int>(ncells), counts.data(), 0);
      if (n < 0) {
        virResetLastError();  // drivers without it (test:///): free stays = total
      } else {
        opts.free_hugepages.assign(ncells, {});
        for (int cell = 0; cell < ncells; ++cell) {
          for (size_t s = 0; s < sizes.size(); ++s) {
            opts.free_hugepages[cell].emplace_back(sizes[s], counts[cell * sizes.size() + s]);
          }
        }
      }
    }
  }

  ARMHIVE_ASSIGN_OR_RETURN(HostTopology t, parse_capabilities(caps.get(), opts));
  if (capabilities_xml != nullptr) *capabilities_xml = caps.get();
  LibvirtString host(virConnectGetHostname(conn.get()));
  if (host) {
    t.hostname = host.str();
  } else {
    virResetLastError();
  }
  virNodeInfo info{};
  if (virNodeGetInfo(conn.get(), &info) == 0) {
    t.memory_kib = info.memory;
  } else {
    virResetLastError();
  }
  return t;
}

}  // namespace armhive
