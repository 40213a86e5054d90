#pragma once

#include <string>

namespace armhive {

// How many nodes of `text` (an HTML report, a page or an SVG, parsed as XML) an XPath selects,
// with the prefixes `h` (XHTML) and `s` (SVG) bound; -1 when `text` is not well-formed. For tests
// that check what a chart or page shows rather than how its markup is spelled.
int xml_count(const std::string& text, const char* xpath);

}  // namespace armhive
