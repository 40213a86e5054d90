#include "base/xml_writer.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

TEST_CASE("xml writer: input is escaped and cannot change the structure", "[base]") {
  XmlWriter w;
  w.start("svg").attr("class", "a\"b<c>").start("text").text("</text><script>x</script> & 'q'");
  w.end().end();
  std::optional<std::string> out = w.finish();
  REQUIRE(out.has_value());
  CHECK(*out ==
        "<svg class=\"a&quot;b&lt;c&gt;\"><text>&lt;/text&gt;&lt;script&gt;x&lt;/script&gt; &amp; "
        "&#39;q&#39;</text></svg>");
}

TEST_CASE("xml writer: invalid UTF-8 and forbidden characters become U+FFFD", "[base]") {
  XmlWriter w;
  w.element("t", std::string("ok\x01\xff", 4));
  CHECK(w.finish() == std::optional<std::string>("<t>ok\xEF\xBF\xBD\xEF\xBF\xBD</t>"));
}

TEST_CASE("xml writer: HTML syntax closes empty elements with an end tag, void ones empty",
          "[base]") {
  XmlWriter w(XmlWriter::Syntax::kHtml);
  w.doctype_html().start("html").start("head").start("meta").attr("charset", "utf-8").end();
  w.start("style").raw("a>b{}").end().end().start("body").start("div").end();
  CHECK(w.finish() == std::optional<std::string>(
                          "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"/><style>a>b{}</"
                          "style></head><body><div></div></body></html>"));
}

TEST_CASE("xml writer: an end() without a start() fails the document", "[base]") {
  XmlWriter w;
  w.end();
  CHECK_FALSE(w.finish().has_value());
}

}  // namespace
}  // namespace armhive
