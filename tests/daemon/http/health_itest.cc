// The health benchmarks' routes: GET /v1/hosts/{name}/health[.svg], /ui/hosts/{name}/health,
// and the health results on /v1/hosts and /ui/hosts.
#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "tests/daemon/http/api_fixture.h"
#include "tests/support/fake_health_store.h"

namespace armhive {
namespace {

using nlohmann::json;

// The SVG parsed with libxml2; XPath with prefix "s" for the SVG namespace.
class Svg {
 public:
  explicit Svg(const std::string& text)
      : doc_(xmlReadMemory(text.data(), static_cast<int>(text.size()), "health.svg", nullptr,
                           XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING),
             xmlFreeDoc),
        ctx_(nullptr, xmlXPathFreeContext) {
    if (doc_) {
      ctx_.reset(xmlXPathNewContext(doc_.get()));
      xmlXPathRegisterNs(ctx_.get(), BAD_CAST "s", BAD_CAST "http://www.w3.org/2000/svg");
    }
  }
  bool ok() const { return doc_ != nullptr; }
  std::vector<std::string> texts(const std::string& xpath) const {
    std::vector<std::string> out;
    std::unique_ptr<xmlXPathObject, decltype(&xmlXPathFreeObject)> r(
        xmlXPathEvalExpression(BAD_CAST xpath.c_str(), ctx_.get()), xmlXPathFreeObject);
    if (r && r->nodesetval != nullptr) {
      for (int i = 0; i < r->nodesetval->nodeNr; ++i) {
        xmlChar* c = xmlNodeGetContent(r->nodesetval->nodeTab[i]);
        out.emplace_back(c ? reinterpret_cast<const char*>(c) : "");
        xmlFree(c);
      }
    }
    return out;
  }
  bool has_text(const std::string& needle) const {
    for (const auto& t : texts("//s:text"))
      if (t.find(needle) != std::string::npos) return true;
    return false;
  }

 private:
  std::unique_ptr<xmlDoc, decltype(&xmlFreeDoc)> doc_;
  std::unique_ptr<xmlXPathContext, decltype(&xmlXPathFreeContext)> ctx_;
};

HealthResult result(double value, int hour, const std::string& verdict, bool band) {
  HealthResult r;
  r.at = from_unix_ms(1'800'000'000'000 + int64_t{hour} * 3'600'000);
  r.host = "honeycomb";
  r.pool = "tiny";
  r.suite = "compression";
  r.figure = "compression.guest.t1.compress_mb_s";
  r.label = "zstd compress MB/s (guest, 1 thread)";
  r.unit = "MB/s";
  r.value = value;
  r.run_id = "b-" + std::to_string(hour);
  r.verdict = verdict;
  if (band) r.band = HealthBandValues{5, 400, 3, 391, 409};
  r.reason = verdict == "degraded" ? "compression.guest.t1.compress_mb_s 300.00 is outside its "
                                     "band [391.00, 409.00] <slow>"
                                   : "within";
  return r;
}

struct HealthFixture {
  HealthFixture()
      : api(true, [this](HttpOptions& o) {
          o.health_series = [this](const std::string& host, const std::string& pool, size_t limit) {
            return store.recent(host, pool, "", limit);
          };
        }) {
    for (int h = 0; h < 5; ++h) {
      REQUIRE(store.append(result(400 + h, h * 6, "insufficient_history", false)).is_ok());
    }
    REQUIRE(store.append(result(402, 30, "within_band", true)).is_ok());
    REQUIRE(store.append(result(300, 36, "degraded", true)).is_ok());
  }
  FakeHealthStore store;
  ApiFixture api;
};

TEST_CASE("http: a host's health series as JSON, SVG trend and page", "[http][health]") {
  HealthFixture f;
  auto j = f.api.request("GET", "/v1/hosts/honeycomb/health?pool=tiny", f.api.reader);
  REQUIRE(j.status == 200);
  json body = json::parse(j.body);
  CHECK(body["host"] == "honeycomb");
  REQUIRE(body["items"].size() == 7);
  CHECK(body["items"][6]["verdict"] == "degraded");
  CHECK(body["items"][6]["value"] == 300.0);
  CHECK(body["items"][6]["band"]["low"] == 391.0);
  CHECK(body["items"][0]["band"].is_null());
  CHECK(
      json::parse(f.api.request("GET", "/v1/hosts/honeycomb/health?pool=tiny&limit=2", f.api.reader)
                      .body)["items"]
          .size() == 2);

  auto svg = f.api.request("GET", "/v1/hosts/honeycomb/health.svg?pool=tiny", f.api.reader);
  REQUIRE(svg.status == 200);
  CHECK(svg.content_type == "image/svg+xml");
  Svg doc(svg.body);
  REQUIRE(doc.ok());
  auto titles = doc.texts("/s:svg/s:title");
  REQUIRE(titles.size() == 1);
  CHECK(titles[0].find("honeycomb") != std::string::npos);
  CHECK(titles[0].find("zstd compress MB/s") != std::string::npos);
  CHECK(doc.has_text("time (UTC)"));  // x axis label
  CHECK(doc.has_text("MB/s"));        // y axis unit
  CHECK(doc.has_text("01-15"));       // a date tick (2027-01-15 UTC)
  CHECK(doc.texts("//s:polygon[@class='band']").size() == 1);
  CHECK(doc.texts("//s:polyline[@class='band-median']").size() == 1);
  CHECK(doc.texts("//s:circle[@class='degraded']").size() == 1);
  CHECK(doc.texts("//s:circle[@class='result']").size() == 6);
  CHECK(doc.has_text("band: 391.00"));

  auto page = f.api.request("GET", "/ui/hosts/honeycomb/health?pool=tiny", f.api.reader);
  REQUIRE(page.status == 200);
  CHECK(page.content_type.rfind("text/html", 0) == 0);
  CHECK(page.body.find("<svg") != std::string::npos);
  CHECK(page.body.find("&lt;slow&gt;") != std::string::npos);  // the reason, escaped
  CHECK(page.body.find("<slow>") == std::string::npos);
}

TEST_CASE("http: health routes refuse a missing pool and name unknown hosts and pools",
          "[http][health]") {
  HealthFixture f;
  auto missing = f.api.request("GET", "/v1/hosts/honeycomb/health.svg", f.api.reader);
  CHECK(missing.status == 400);
  CHECK(json::parse(missing.body)["field"] == "pool");
  CHECK(f.api.request("GET", "/v1/hosts/honeycomb/health?pool=nope", f.api.reader).status == 404);
  CHECK(f.api.request("GET", "/v1/hosts/nohost/health?pool=tiny", f.api.reader).status == 404);
  auto limit = f.api.request("GET", "/v1/hosts/honeycomb/health?pool=tiny&limit=0", f.api.reader);
  CHECK(limit.status == 400);
  CHECK(f.api.request("GET", "/v1/hosts/honeycomb/health?pool=tiny").status == 401);
  // An empty series still draws axes and says so.
  f.api.leases.add_warm_pool("ci");
  Svg empty(f.api.request("GET", "/v1/hosts/honeycomb/health.svg?pool=ci", f.api.reader).body);
  REQUIRE(empty.ok());
  CHECK(empty.has_text("no health results yet"));
  CHECK(empty.has_text("time (UTC)"));
}

TEST_CASE("http: a degraded health result shows on /v1/hosts and /ui/hosts", "[http][health]") {
  HealthFixture f;
  f.api.leases.set_host_health({result(300, 36, "degraded", true)});
  json hosts = json::parse(f.api.request("GET", "/v1/hosts", f.api.reader).body);
  json h = hosts["items"][0];
  CHECK(h["state"] == "degraded");
  REQUIRE(h["health"].size() == 1);
  CHECK(h["health"][0]["pool"] == "tiny");
  CHECK(h["health"][0]["value"] == 300.0);
  CHECK(h["health"][0]["band"]["high"] == 409.0);
  auto page = f.api.request("GET", "/ui/hosts", f.api.reader);
  CHECK(page.body.find("<b>degraded</b>") != std::string::npos);
  CHECK(page.body.find("/ui/hosts/honeycomb/health?pool=tiny") != std::string::npos);
  // Two decimals, as a reader reads it (it was printed as "0.000000").
  char fragmentation[64];
  std::snprintf(fragmentation, sizeof fragmentation, "fragmentation %.2f,",
                h["fragmentation"].get<double>());
  CHECK(page.body.find(fragmentation) != std::string::npos);

  f.api.leases.set_host_health({result(401, 42, "within_band", true)});
  hosts = json::parse(f.api.request("GET", "/v1/hosts", f.api.reader).body);
  CHECK(hosts["items"][0]["state"] == "ok");
}

}  // namespace
}  // namespace armhive
