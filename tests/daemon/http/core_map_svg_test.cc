#include "daemon/http/core_map_svg.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>

#include <catch2/catch.hpp>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/support/topologies.h"

namespace armhive {
namespace {

// The rendered SVG parsed back with libxml2, queried with XPath (prefix "s" = SVG namespace).
class ParsedSvg {
 public:
  explicit ParsedSvg(const std::string& svg)
      : doc_(xmlReadMemory(svg.data(), static_cast<int>(svg.size()), "core-map.svg", nullptr,
                           XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING),
             xmlFreeDoc) {
    if (doc_) {
      ctx_.reset(xmlXPathNewContext(doc_.get()));
      xmlXPathRegisterNs(ctx_.get(), BAD_CAST "s", BAD_CAST "http://www.w3.org/2000/svg");
    }
  }
  bool ok() const { return doc_ != nullptr; }

  std::vector<xmlNodePtr> nodes(const std::string& xpath) const {
    std::vector<xmlNodePtr> out;
    std::unique_ptr<xmlXPathObject, decltype(&xmlXPathFreeObject)> r(
        xmlXPathEvalExpression(BAD_CAST xpath.c_str(), ctx_.get()), xmlXPathFreeObject);
    if (r && r->nodesetval != nullptr) {
      for (int i = 0; i < r->nodesetval->nodeNr; ++i) out.push_back(r->nodesetval->nodeTab[i]);
    }
    return out;
  }
  std::string text(const std::string& xpath) const {
    std::vector<xmlNodePtr> n = nodes(xpath);
    if (n.empty()) return "<missing " + xpath + ">";
    xmlChar* c = xmlNodeGetContent(n.front());
    std::string s = c != nullptr ? reinterpret_cast<const char*>(c) : "";
    xmlFree(c);
    return s;
  }
  static std::string attr(xmlNodePtr n, const char* name) {
    xmlChar* v = xmlGetProp(n, BAD_CAST name);
    std::string s = v != nullptr ? reinterpret_cast<const char*>(v) : "";
    xmlFree(v);
    return s;
  }

 private:
  struct CtxFree {
    void operator()(xmlXPathContext* c) const { xmlXPathFreeContext(c); }
  };
  std::unique_ptr<xmlDoc, decltype(&xmlFreeDoc)> doc_;
  std::unique_ptr<xmlXPathContext, CtxFree> ctx_;
};

std::vector<CoreUse> free_cores(const HostTopology& t,
                                const std::string& default_role = "dedicated") {
  std::vector<CoreUse> out;
  for (const HostCpu& c : t.cpus)
    out.push_back({c.id, c.id == 0 ? "housekeeping" : default_role, "", "", ""});
  return out;
}

std::string box(int cpu) { return "//s:g[@data-cpu='" + std::to_string(cpu) + "']"; }

TEST_CASE("core map: one box per CPU, grouped by node and cluster", "[http][core_map]") {
  HostTopology lx = lx2160a_topology();
  std::vector<CoreUse> cores = free_cores(lx);
  cores[2] = {2, "dedicated", "armhive-vm-1", "l-0123456789ab", "ci"};
  cores[3] = {3, "dedicated", "armhive-vm-1", "l-0123456789ab", "ci"};
  cores[9] = {9, "dedicated", "armhive-very-long-vm-name", "", ""};
  ParsedSvg svg(render_core_map_svg(lx, cores));
  REQUIRE(svg.ok());
  REQUIRE(svg.nodes("/s:svg").size() == 1);
  std::vector<xmlNodePtr> boxes = svg.nodes("//s:g[@data-cpu]");
  CHECK(boxes.size() == 16);
  std::set<std::string> ids;
  for (xmlNodePtr b : boxes) ids.insert(ParsedSvg::attr(b, "data-cpu"));
  CHECK(ids.size() == 16);
  CHECK(svg.nodes("//s:g[@data-node='0']/s:g[@data-cluster]").size() == 8);
  CHECK(svg.nodes("//s:g[@data-cluster='1']/s:g[@data-cpu='2' or @data-cpu='3']").size() == 2);

  CHECK(ParsedSvg::attr(svg.nodes(box(0)).front(), "class") == "cpu housekeeping");
  CHECK(ParsedSvg::attr(svg.nodes(box(2)).front(), "class") == "cpu dedicated-used");
  CHECK(ParsedSvg::attr(svg.nodes(box(4)).front(), "class") == "cpu dedicated-free");
  CHECK(svg.text(box(2) + "/s:title") ==
        "CPU 2: dedicated, leased\nNUMA node 0, L2 cluster 1\nlease l-0123456789ab, VM "
        "armhive-vm-1, pool ci");
  CHECK(svg.text(box(2) + "/s:text[2]") == "l-0123456789ab");   // a whole lease id fits
  CHECK(svg.text(box(9) + "/s:text[2]") == "armhive-very-l…");  // longer labels are cut
  CHECK(svg.text(box(5) + "/s:text[2]") == "free");
  // The legend counts what the map shows.
  std::string legend = svg.text("//s:g[@class='legend']");
  CHECK(legend.find("dedicated, leased (3)") != std::string::npos);
  CHECK(legend.find("dedicated, free (12)") != std::string::npos);
  CHECK(legend.find("housekeeping (host, IRQs, emulator) (1)") != std::string::npos);
}

TEST_CASE("core map: ThunderX shows two NUMA nodes of 48 CPUs", "[http][core_map]") {
  HostTopology tx = thunderx_2s_topology();
  std::vector<CoreUse> cores = free_cores(tx);
  cores[48].role = "housekeeping";
  ParsedSvg svg(render_core_map_svg(tx, cores));
  REQUIRE(svg.ok());
  CHECK(svg.nodes("//s:g[@data-cpu]").size() == 96);
  CHECK(svg.nodes("//s:g[@data-node='0']//s:g[@data-cpu]").size() == 48);
  CHECK(svg.nodes("//s:g[@data-node='1']//s:g[@data-cpu]").size() == 48);
  CHECK(svg.nodes("//s:g[@class='cpu housekeeping']").size() == 2);
  CHECK(svg.text("/s:svg/s:title").find("96 CPUs, 2 NUMA nodes") != std::string::npos);
}

TEST_CASE("core map: hostile names are escaped, never markup", "[http][core_map]") {
  HostTopology lx = lx2160a_topology();
  std::vector<CoreUse> cores = free_cores(lx);
  const std::string script = "</text><script>alert(1)</script>";
  const std::string quotes = "a&b\"'<>]]>&amp;";
  cores[5] = {5, "dedicated", script, "l-1", "p\"ool"};
  cores[6] = {6, "dedicated", "vm", quotes, "<pool>"};
  cores[7] = {7, "dedicated", std::string("bad\x01\xff") + "utf8", "l-\xc3\xa9\xe2\x82", "ok"};
  cores.push_back({8, "dedicated", "<!--", "<!DOCTYPE x [<!ENTITY e 'boom'>]>", ""});
  HostTopology with_name = lx;
  with_name.hostname = "<host>&";
  const std::string out = render_core_map_svg(with_name, cores);
  ParsedSvg svg(out);
  REQUIRE(svg.ok());
  CHECK(svg.nodes("//*[local-name()='script']").empty());
  CHECK(out.find("<script") == std::string::npos);
  CHECK(svg.nodes("//s:g[@data-cpu]").size() == 16);
  // The text round-trips exactly where it was valid.
  CHECK(svg.text(box(5) + "/s:title").find("VM " + script + ", pool p\"ool") != std::string::npos);
  CHECK(svg.text(box(6) + "/s:title").find("lease " + quotes + ", VM vm, pool <pool>") !=
        std::string::npos);
  CHECK(svg.text(box(6) + "/s:text[2]") == quotes);
  // Control characters and invalid UTF-8 become U+FFFD instead of breaking the document.
  CHECK(svg.text(box(7) + "/s:title").find("VM bad\xEF\xBF\xBD\xEF\xBF\xBDutf8") !=
        std::string::npos);
  CHECK(svg.text(box(7) + "/s:title").find("lease l-\xc3\xa9\xEF\xBF\xBD") != std::string::npos);
  CHECK(svg.text("/s:svg/s:title").find("Core map: <host>&") == 0);
  // CPU 8 appears once, listing both entries (free + a hostile one).
  CHECK(svg.text(box(8) + "/s:title").find("lease <!DOCTYPE x") != std::string::npos);
}

TEST_CASE("core map: shared CPUs list every VM, unknown entries are ignored", "[http][core_map]") {
  HostTopology dev = two_cpu_topology();
  std::vector<CoreUse> cores = {
      {0, "housekeeping", "", "", ""},
      {1, "shared", "vm-a", "l-a", "small"},
      {1, "shared", "vm-b", "l-b", "small"},
      {7, "dedicated", "ghost", "l-ghost", "x"},  // not on this host
  };
  ParsedSvg svg(render_core_map_svg(dev, cores));
  REQUIRE(svg.ok());
  CHECK(svg.nodes("//s:g[@data-cpu]").size() == 2);
  CHECK(ParsedSvg::attr(svg.nodes(box(1)).front(), "class") == "cpu shared-used");
  CHECK(svg.text(box(1) + "/s:text[2]") == "2 VMs");
  std::string title = svg.text(box(1) + "/s:title");
  CHECK(title.find("lease l-a, VM vm-a") != std::string::npos);
  CHECK(title.find("lease l-b, VM vm-b") != std::string::npos);
  CHECK(title.find("L2 cluster") == std::string::npos);  // unknown clusters are not invented
  CHECK(svg.nodes("//s:g[@data-cpu='7']").empty());

  // A CPU with no entry at all is drawn as unassigned.
  ParsedSvg bare(render_core_map_svg(dev, {}));
  REQUIRE(bare.ok());
  CHECK(bare.nodes("//s:g[@class='cpu unassigned']").size() == 2);
}

}  // namespace
}  // namespace armhive
