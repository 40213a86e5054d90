#include "base/xml_writer.h"

#include <libxml/xmlwriter.h>

#include <array>
#include <string>
#include <vector>

#include "base/xml_escape.h"

namespace armhive {
namespace {

const xmlChar* x(const std::string& s) { return reinterpret_cast<const xmlChar*>(s.c_str()); }

bool is_void_html_element(std::string_view name) {
  static constexpr std::array<std::string_view, 6> kVoid{"meta", "br",    "hr",
                                                         "img",  "input", "link"};
  for (auto v : kVoid) {
    if (v == name) return true;
  }
  return false;
}

}  // namespace

struct XmlWriter::Handles {
  xmlBufferPtr buf = nullptr;
  xmlTextWriterPtr w = nullptr;
  std::vector<std::string> open;  // element names, innermost last
};

XmlWriter::XmlWriter(Syntax syntax) : h_(std::make_unique<Handles>()), syntax_(syntax) {
  h_->buf = xmlBufferCreate();
  if (h_->buf != nullptr) h_->w = xmlNewTextWriterMemory(h_->buf, 0);
  ok_ = h_->w != nullptr;
}

XmlWriter::~XmlWriter() noexcept {
  if (h_->w != nullptr) xmlFreeTextWriter(h_->w);
  if (h_->buf != nullptr) xmlBufferFree(h_->buf);
}

XmlWriter& XmlWriter::doctype_html() { return raw("<!DOCTYPE html>\n"); }

XmlWriter& XmlWriter::start(std::string_view element) {
  if (ok_) {
    h_->open.emplace_back(element);
    ok_ = xmlTextWriterStartElement(h_->w, x(h_->open.back())) >= 0;
  }
  return *this;
}

XmlWriter& XmlWriter::attr(std::string_view name, std::string_view value) {
  if (ok_) {
    ok_ = xmlTextWriterWriteAttribute(h_->w, x(std::string(name)), x(xml_text_safe(value))) >= 0;
  }
  return *this;
}

XmlWriter& XmlWriter::attr(std::string_view name, int value) {
  return attr(name, std::to_string(value));
}

XmlWriter& XmlWriter::text(std::string_view text) {
  if (!ok_) return *this;
  // libxml2 escapes & < > but not the apostrophe, which HTML attribute contexts and the
  // reports' readers expect as &#39;: written as a character reference between the pieces.
  const std::string safe = xml_text_safe(text);
  size_t from = 0;
  while (ok_) {
    const size_t quote = safe.find('\'', from);
    const std::string piece = safe.substr(from, quote == std::string::npos ? quote : quote - from);
    if (!piece.empty()) ok_ = xmlTextWriterWriteString(h_->w, x(piece)) >= 0;
    if (quote == std::string::npos || !ok_) break;
    ok_ = xmlTextWriterWriteRaw(h_->w, x(std::string("&#39;"))) >= 0;
    from = quote + 1;
  }
  return *this;
}

XmlWriter& XmlWriter::element(std::string_view element, std::string_view text_value) {
  return start(element).text(text_value).end();
}

XmlWriter& XmlWriter::end() {
  if (!ok_) return *this;
  if (h_->open.empty()) {
    ok_ = false;
    return *this;
  }
  const bool full = syntax_ == Syntax::kHtml && !is_void_html_element(h_->open.back());
  ok_ = (full ? xmlTextWriterFullEndElement(h_->w) : xmlTextWriterEndElement(h_->w)) >= 0;
  h_->open.pop_back();
  return *this;
}

XmlWriter& XmlWriter::raw(std::string_view markup) {
  if (ok_) ok_ = xmlTextWriterWriteRaw(h_->w, x(std::string(markup))) >= 0;
  return *this;
}

std::optional<std::string> XmlWriter::finish() {
  while (ok_ && !h_->open.empty()) end();
  if (ok_) ok_ = xmlTextWriterFlush(h_->w) >= 0;
  if (!ok_) return std::nullopt;
  return std::string(reinterpret_cast<const char*>(xmlBufferContent(h_->buf)),
                     static_cast<size_t>(xmlBufferLength(h_->buf)));
}

}  // namespace armhive
