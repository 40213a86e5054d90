#include "daemon/http/core_map_svg.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/utf8.h"
#include "base/xml_escape.h"
#include "base/xml_writer.h"

namespace armhive {
namespace {

// Layout, in SVG user units (px).
constexpr int kMargin = 12;
constexpr int kBoxW = 96;
constexpr int kBoxH = 40;
constexpr int kGap = 6;
constexpr int kClusterPad = 6;
constexpr int kClusterLabel = 16;
constexpr int kNodePad = 10;
constexpr int kNodeLabel = 22;
constexpr int kMaxCols = 12;        // CPUs per row inside one cluster
constexpr int kMaxNodeInner = 900;  // wrap clusters beyond this width (LX2160A: 4 per row)
constexpr int kTitleH = 28;
constexpr int kLegendH = 28;
constexpr size_t kLabelChars = 15;  // code points of a label inside a box ("l-" + 12 hex fits)

enum class Kind {
  kHousekeeping,
  kDedicatedFree,
  kDedicatedUsed,
  kSharedFree,
  kSharedUsed,
  kUnassigned
};

struct Style {
  const char* css_class;
  const char* legend;
  const char* fill;
  const char* stroke;
  const char* text;
};

constexpr std::array<Style, 6> kStyles{{
    {"housekeeping", "housekeeping (host, IRQs, emulator)", "#90a4ae", "#546e7a", "#102027"},
    {"dedicated-free", "dedicated, free", "#e8f5e9", "#66bb6a", "#1b5e20"},
    {"dedicated-used", "dedicated, leased", "#1e88e5", "#0d47a1", "#ffffff"},
    {"shared-free", "shared, free", "#fff8e1", "#ffb300", "#6d4c00"},
    {"shared-used", "shared, in use", "#fb8c00", "#e65100", "#ffffff"},
    {"unassigned", "unassigned", "#ffffff", "#9e9e9e", "#616161"},
}};

const Style& style(Kind k) { return kStyles[static_cast<size_t>(k)]; }

struct Box {
  int cpu = 0;
  int node = 0;
  int cluster = -1;
  Kind kind = Kind::kUnassigned;
  std::vector<const CoreUse*> users;  // entries with a VM
  int x = 0;
  int y = 0;
};

struct ClusterLayout {
  int cluster = -1;
  std::vector<Box*> boxes;
  int cols = 1;
  int w = 0;
  int h = 0;
  int x = 0;
  int y = 0;
};

struct NodeLayout {
  int node = 0;
  std::vector<ClusterLayout> clusters;
  int w = 0;
  int h = 0;
  int y = 0;
};

Kind classify(const std::vector<const CoreUse*>& entries, bool used) {
  const std::string role = entries.empty() ? std::string() : entries.front()->role;
  if (role == "housekeeping") return Kind::kHousekeeping;
  if (role == "dedicated") return used ? Kind::kDedicatedUsed : Kind::kDedicatedFree;
  if (role == "shared") return used ? Kind::kSharedUsed : Kind::kSharedFree;
  return Kind::kUnassigned;
}

std::string box_label(const Box& b) {
  if (b.kind == Kind::kHousekeeping) return "host";
  if (b.users.empty()) return b.kind == Kind::kUnassigned ? "" : "free";
  if (b.users.size() > 1) return std::to_string(b.users.size()) + " VMs";
  const CoreUse& u = *b.users.front();
  return u.lease_id.empty() ? u.vm_name : u.lease_id;
}

std::string box_title(const Box& b) {
  std::string t = "CPU " + std::to_string(b.cpu) + ": " + style(b.kind).legend + "\nNUMA node " +
                  std::to_string(b.node);
  if (b.cluster >= 0) t += ", L2 cluster " + std::to_string(b.cluster);
  for (const CoreUse* u : b.users) {
    t += "\n";
    if (!u->lease_id.empty()) t += "lease " + u->lease_id + ", ";
    t += "VM " + u->vm_name;
    if (!u->pool.empty()) t += ", pool " + u->pool;
  }
  return t;
}

std::string fallback_svg() {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"240\" height=\"24\">"
         "<text x=\"4\" y=\"16\">core map unavailable</text></svg>";
}

}  // namespace

std::string render_core_map_svg(const HostTopology& topology, const std::vector<CoreUse>& cores) {
  std::map<int, std::vector<const CoreUse*>> by_cpu;
  for (const CoreUse& c : cores) by_cpu[c.cpu].push_back(&c);

  // Boxes grouped node -> cluster, CPUs ascending.
  std::vector<Box> boxes;
  boxes.reserve(topology.cpus.size());
  for (const HostCpu& c : topology.cpus) {
    Box b;
    b.cpu = c.id;
    b.node = c.numa_node;
    b.cluster = c.cluster;
    const auto it = by_cpu.find(c.id);
    std::vector<const CoreUse*> entries =
        it == by_cpu.end() ? std::vector<const CoreUse*>{} : it->second;
    for (const CoreUse* u : entries) {
      if (!u->vm_name.empty() || !u->lease_id.empty()) b.users.push_back(u);
    }
    b.kind = classify(entries, !b.users.empty());
    boxes.push_back(std::move(b));
  }
  std::map<int, std::map<int, std::vector<Box*>>> grouped;
  for (Box& b : boxes) grouped[b.node][b.cluster].push_back(&b);

  // Layout.
  std::vector<NodeLayout> nodes;
  int y = kMargin + kTitleH + kLegendH;
  int width = 0;
  for (auto& [node_id, clusters] : grouped) {
    NodeLayout n;
    n.node = node_id;
    n.y = y;
    int cx = kNodePad;
    int cy = kNodeLabel;
    int row_h = 0;
    for (auto& [cluster_id, list] : clusters) {
      std::sort(list.begin(), list.end(),
                [](const Box* a, const Box* b) { return a->cpu < b->cpu; });
      ClusterLayout cl;
      cl.cluster = cluster_id;
      cl.boxes = list;
      const int count = static_cast<int>(list.size());
      cl.cols = std::min(count, kMaxCols);
      const int rows = (count + cl.cols - 1) / cl.cols;
      cl.w = 2 * kClusterPad + cl.cols * kBoxW + (cl.cols - 1) * kGap;
      cl.h = kClusterLabel + kClusterPad + rows * kBoxH + (rows - 1) * kGap + kClusterPad;
      if (cx > kNodePad && cx + cl.w > kMaxNodeInner) {
        cx = kNodePad;
        cy += row_h + kGap;
        row_h = 0;
      }
      cl.x = kMargin + cx;
      cl.y = y + cy;
      for (int i = 0; i < count; ++i) {
        list[static_cast<size_t>(i)]->x = cl.x + kClusterPad + (i % cl.cols) * (kBoxW + kGap);
        list[static_cast<size_t>(i)]->y = cl.y + kClusterLabel + (i / cl.cols) * (kBoxH + kGap);
      }
      n.w = std::max(n.w, cx + cl.w + kNodePad);
      row_h = std::max(row_h, cl.h);
      cx += cl.w + kGap;
      n.clusters.push_back(std::move(cl));
    }
    n.h = cy + row_h + kNodePad;
    y += n.h + kGap * 2;
    width = std::max(width, n.w);
    nodes.push_back(std::move(n));
  }
  std::array<int, kStyles.size()> counts{};
  for (const Box& b : boxes) ++counts[static_cast<size_t>(b.kind)];
  const int legend_item_w = 250;
  width = std::max(width, 3 * legend_item_w);
  const int total_w = width + 2 * kMargin;
  const int total_h = y + kMargin;

  XmlWriter w;
  w.start("svg")
      .attr("xmlns", "http://www.w3.org/2000/svg")
      .attr("width", total_w)
      .attr("height", total_h)
      .attr("viewBox", "0 0 " + std::to_string(total_w) + " " + std::to_string(total_h))
      .attr("font-family", "sans-serif")
      .attr("role", "img")
      .attr("class", "core-map");
  std::string heading =
      "Core map: " + (topology.hostname.empty() ? std::string("host") : topology.hostname) + " (" +
      std::to_string(topology.cpus.size()) + " CPUs, " + std::to_string(nodes.size()) +
      " NUMA node" + (nodes.size() == 1 ? "" : "s");
  if (!topology.cpu_model.empty()) heading += ", " + topology.cpu_model;
  heading += ")";
  w.start("title").text(heading).end();
  w.start("text")
      .attr("x", kMargin)
      .attr("y", kMargin + 16)
      .attr("font-size", "15")
      .attr("font-weight", "bold")
      .text(heading)
      .end();

  // Legend: two rows of three.
  w.start("g").attr("class", "legend");
  for (size_t i = 0; i < kStyles.size(); ++i) {
    const int lx = kMargin + static_cast<int>(i % 3) * legend_item_w;
    const int ly = kMargin + kTitleH + static_cast<int>(i / 3) * 14 - 6;
    w.start("rect")
        .attr("x", lx)
        .attr("y", ly)
        .attr("width", 12)
        .attr("height", 10)
        .attr("fill", kStyles[i].fill)
        .attr("stroke", kStyles[i].stroke)
        .end();
    w.start("text")
        .attr("x", lx + 16)
        .attr("y", ly + 9)
        .attr("font-size", "11")
        .text(std::string(kStyles[i].legend) + " (" + std::to_string(counts[i]) + ")")
        .end();
  }
  w.end();

  for (const NodeLayout& n : nodes) {
    w.start("g").attr("class", "numa-node").attr("data-node", n.node);
    w.start("rect")
        .attr("x", kMargin)
        .attr("y", n.y)
        .attr("width", n.w)
        .attr("height", n.h)
        .attr("rx", "6")
        .attr("fill", "#fafafa")
        .attr("stroke", "#424242")
        .end();
    w.start("text")
        .attr("x", kMargin + kNodePad)
        .attr("y", n.y + 16)
        .attr("font-size", "13")
        .attr("font-weight", "bold")
        .text("NUMA node " + std::to_string(n.node))
        .end();
    for (const ClusterLayout& cl : n.clusters) {
      w.start("g").attr("class", "cluster").attr("data-cluster", cl.cluster);
      w.start("rect")
          .attr("x", cl.x)
          .attr("y", cl.y)
          .attr("width", cl.w)
          .attr("height", cl.h)
          .attr("rx", "4")
          .attr("fill", "none")
          .attr("stroke", "#bdbdbd")
          .end();
      w.start("text")
          .attr("x", cl.x + kClusterPad)
          .attr("y", cl.y + 12)
          .attr("font-size", "10")
          .attr("fill", "#616161")
          .text(cl.cluster >= 0 ? "L2 cluster " + std::to_string(cl.cluster) : "L2 cluster unknown")
          .end();
      for (const Box* b : cl.boxes) {
        const Style& s = style(b->kind);
        w.start("g").attr("class", std::string("cpu ") + s.css_class).attr("data-cpu", b->cpu);
        w.start("title").text(box_title(*b)).end();
        w.start("rect")
            .attr("x", b->x)
            .attr("y", b->y)
            .attr("width", kBoxW)
            .attr("height", kBoxH)
            .attr("rx", "3")
            .attr("fill", s.fill)
            .attr("stroke", s.stroke);
        if (b->kind == Kind::kUnassigned) w.attr("stroke-dasharray", "3,2");
        w.end();
        w.start("text")
            .attr("x", b->x + 5)
            .attr("y", b->y + 15)
            .attr("font-size", "11")
            .attr("font-weight", "bold")
            .attr("fill", s.text)
            .text("CPU " + std::to_string(b->cpu))
            .end();
        const std::string label = truncate_utf8(xml_text_safe(box_label(*b)), kLabelChars);
        if (!label.empty()) {
          w.start("text")
              .attr("x", b->x + 5)
              .attr("y", b->y + 31)
              .attr("font-size", "10")
              .attr("fill", s.text)
              .text(label)
              .end();
        }
        w.end();
      }
      w.end();
    }
    w.end();
  }
  w.end();
  std::optional<std::string> svg = w.finish();
  return svg ? *svg : fallback_svg();
}

}  // namespace armhive
