#include "base/xml_escape.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

TEST_CASE("xml_escape handles markup, quotes, control bytes and invalid UTF-8", "[base]") {
  CHECK(xml_escape("a<b>&\"'") == "a&lt;b&gt;&amp;&quot;&#39;");
  CHECK(xml_escape("]]>") == "]]&gt;");
  CHECK(xml_escape("\xC3\xA9t\xC3\xA9") == "\xC3\xA9t\xC3\xA9");  // valid UTF-8 kept
  CHECK(xml_escape("\x01") == "\xEF\xBF\xBD");
  CHECK(xml_escape("\xff") == "\xEF\xBF\xBD");
  CHECK(xml_escape("\xC3") == "\xEF\xBF\xBD");  // truncated sequence
  CHECK(xml_escape("a\tb\nc") == "a\tb\nc");
}

}  // namespace
}  // namespace armhive
