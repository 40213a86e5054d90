#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace armhive {

// The one way armhive writes XML, SVG and (X)HTML: libxml2's text writer into memory, owned
// here. Element and attribute names are the caller's constants; every text and attribute value
// is made XML-safe (invalid UTF-8 and characters XML forbids become U+FFFD, base/xml_escape.h)
// and then escaped by libxml2 (text also escapes ' as &#39;), so input can never change the
// document's structure. kHtml closes every non-void element with an end tag (<div></div>, as
// HTML parsers need) and writes void elements (<meta/>) empty.
//
// Errors are sticky: after the first libxml2 failure (out of memory, an end() without a
// start()) every call is a no-op and finish() returns nothing. One thread at a time; libxml2
// must have been initialised (xmlInitParser(), done by main() before threads start).
class XmlWriter {
 public:
  enum class Syntax { kXml, kHtml };

  explicit XmlWriter(Syntax syntax = Syntax::kXml);
  ~XmlWriter() noexcept;
  XmlWriter(const XmlWriter&) = delete;
  XmlWriter& operator=(const XmlWriter&) = delete;

  // <!DOCTYPE html> and a newline; only before the root element.
  XmlWriter& doctype_html();
  XmlWriter& start(std::string_view element);
  XmlWriter& attr(std::string_view name, std::string_view value);
  XmlWriter& attr(std::string_view name, int value);
  XmlWriter& text(std::string_view text);
  // start(element), text(text), end().
  XmlWriter& element(std::string_view element, std::string_view text);
  // Closes the innermost open element.
  XmlWriter& end();
  // Markup written as is: only for constants of the program (a style sheet), never for input.
  XmlWriter& raw(std::string_view markup);

  // Closes what is still open and returns the document; nothing if libxml2 failed.
  std::optional<std::string> finish();

 private:
  struct Handles;
  std::unique_ptr<Handles> h_;
  Syntax syntax_;
  bool ok_ = false;
};

}  // namespace armhive
