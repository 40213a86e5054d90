#pragma once

#include <libxml/tree.h>
#include <libxml/xmlwriter.h>
#include <libxml/xpath.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace armhive::detail {

// Builds an XML document with libxml2's text writer: every attribute value and text node is
// escaped by libxml2, so no input can change the document's structure. Errors are sticky and
// reported once by finish(). Not thread-safe; one writer per document.
class XmlWriter {
 public:
  XmlWriter();
  ~XmlWriter() noexcept;
  XmlWriter(const XmlWriter&) = delete;
  XmlWriter& operator=(const XmlWriter&) = delete;

  XmlWriter& start(const char* element);
  // Namespaced element: <prefix:element xmlns:prefix="uri"> (uri empty: no declaration).
  XmlWriter& start_ns(const char* prefix, const char* element, const char* uri);
  XmlWriter& attr(const char* name, std::string_view value);
  XmlWriter& attr(const char* name, long long value);
  XmlWriter& text(std::string_view value);
  XmlWriter& end();
  // <element>value</element>
  XmlWriter& element(const char* name, std::string_view value);
  // Closes open elements and returns the document (without an XML declaration).
  Result<std::string> finish();

 private:
  void check(int rc, const char* what);
  xmlBufferPtr buf_ = nullptr;
  xmlTextWriterPtr w_ = nullptr;
  std::string error_;
};

// A parsed document with XPath helpers. Parsing never loads external entities or DTDs and
// reports errors as kInvalidArgument (libxml2's global error printer is silenced per parse).
class XmlDoc {
 public:
  static Result<XmlDoc> parse(std::string_view xml);
  XmlDoc(XmlDoc&& other) noexcept;
  XmlDoc& operator=(XmlDoc&& other) noexcept;
  XmlDoc(const XmlDoc&) = delete;
  XmlDoc& operator=(const XmlDoc&) = delete;
  ~XmlDoc() noexcept;

  // Registers a namespace prefix for later queries.
  void register_ns(const char* prefix, const char* uri);
  // Nodes matching `xpath`, relative to `context` (the document when null).
  std::vector<xmlNodePtr> nodes(const char* xpath, xmlNodePtr context = nullptr) const;
  xmlNodePtr node(const char* xpath, xmlNodePtr context = nullptr) const;
  // String value of an XPath expression (e.g. "string(/domain/name)"); empty if none.
  std::string str(const char* xpath, xmlNodePtr context = nullptr) const;
  xmlDocPtr get() const { return doc_; }

 private:
  XmlDoc(xmlDocPtr doc, xmlXPathContextPtr ctx) : doc_(doc), ctx_(ctx) {}
  xmlDocPtr doc_ = nullptr;
  xmlXPathContextPtr ctx_ = nullptr;
};

std::string attr_of(xmlNodePtr node, const char* name);  // empty if absent
std::optional<std::string> opt_attr_of(xmlNodePtr node, const char* name);
std::string text_of(xmlNodePtr node);

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}, sorted and unique; kInvalidArgument on a malformed list.
// Also accepts "^N" exclusions as libvirt does ("0-7,^3").
Result<std::vector<int>> parse_cpu_list(std::string_view list);
// {0,1,2,3,8} -> "0-3,8"
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace armhive::detail
