#pragma once

#include <string>
#include <string_view>

namespace armhive {

// Escapes text for XML and HTML, in element content and in attribute values alike: & < > " '
// become entities; invalid UTF-8 and control characters other than tab and newline become
// U+FFFD (carriage return a space), so the output is always well-formed. Pure; any thread.
std::string xml_escape(std::string_view text);

// Valid UTF-8 with only the characters XML 1.0 allows (tab, newline and carriage return
// included); anything else becomes U+FFFD. Not escaped: for writers that escape themselves
// (libxml2's text writer rejects invalid UTF-8 instead of replacing it). Pure; any thread.
std::string xml_text_safe(std::string_view text);

}  // namespace armhive
