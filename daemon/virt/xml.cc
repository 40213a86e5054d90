#include "daemon/virt/xml.h"

#include <libxml/parser.h>
#include <libxml/xpathInternals.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

namespace armhive::detail {

namespace {
const xmlChar* xc(const char* s) { return reinterpret_cast<const xmlChar*>(s); }

void silent_error(void* /*ctx*/, const char* /*msg*/, ...) {}
}  // namespace

XmlWriter::XmlWriter() {
  buf_ = xmlBufferCreate();
  if (buf_ != nullptr) w_ = xmlNewTextWriterMemory(buf_, 0);
  if (w_ == nullptr) {
    error_ = "cannot create an XML writer";
    return;
  }
  xmlTextWriterSetIndent(w_, 1);
  xmlTextWriterSetIndentString(w_, xc("  "));
}

XmlWriter::~XmlWriter() noexcept {
  if (w_ != nullptr) xmlFreeTextWriter(w_);
  if (buf_ != nullptr) xmlBufferFree(buf_);
}

void XmlWriter::check(int rc, const char* what) {
  if (rc < 0 && error_.empty()) error_ = std::string("XML writer failed at ") + what;
}

XmlWriter& XmlWriter::start(const char* element) {
  if (error_.empty()) check(xmlTextWriterStartElement(w_, xc(element)), element);
  return *this;
}

XmlWriter& XmlWriter::start_ns(const char* prefix, const char* element, const char* uri) {
  if (error_.empty()) {
    check(xmlTextWriterStartElementNS(w_, xc(prefix), xc(element),
                                      uri[0] != '\0' ? xc(uri) : nullptr),
          element);
  }
  return *this;
}

XmlWriter& XmlWriter::attr(const char* name, std::string_view value) {
  if (error_.empty()) {
    std::string v(value);
    check(xmlTextWriterWriteAttribute(w_, xc(name), xc(v.c_str())), name);
  }
  return *this;
}

XmlWriter& XmlWriter::attr(const char* name, long long value) {
  return attr(name, std::to_string(value));
}

XmlWriter& XmlWriter::text(std::string_view value) {
  if (error_.empty()) {
    std::string v(value);
    check(xmlTextWriterWriteString(w_, xc(v.c_str())), "text");
  }
  return *this;
}

XmlWriter& XmlWriter::end() {
  if (error_.empty()) check(xmlTextWriterEndElement(w_), "end");
  return *this;
}

XmlWriter& XmlWriter::element(const char* name, std::string_view value) {
  return start(name).text(value).end();
}

Result<std::string> XmlWriter::finish() {
  if (error_.empty()) check(xmlTextWriterEndDocument(w_), "end of document");
  if (error_.empty()) check(xmlTextWriterFlush(w_), "flush");
  if (!error_.empty()) return internal_error(error_);
  return std::string(reinterpret_cast<const char*>(xmlBufferContent(buf_)),
                     static_cast<size_t>(xmlBufferLength(buf_)));
}

Result<XmlDoc> XmlDoc::parse(std::string_view xml) {
  xmlSetGenericErrorFunc(nullptr, silent_error);
  xmlDocPtr doc = xmlReadMemory(xml.data(), static_cast<int>(xml.size()), "noname.xml", nullptr,
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  if (doc == nullptr) {
    const xmlError* e = xmlGetLastError();
    std::string msg = e != nullptr && e->message != nullptr ? e->message : "malformed XML";
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return Status(ErrorCode::kInvalidArgument, "cannot parse XML: " + msg);
  }
  xmlXPathContextPtr ctx = xmlXPathNewContext(doc);
  if (ctx == nullptr) {
    xmlFreeDoc(doc);
    return internal_error("cannot create an XPath context");
  }
  return XmlDoc(doc, ctx);
}

XmlDoc::XmlDoc(XmlDoc&& other) noexcept
    : doc_(std::exchange(other.doc_, nullptr)), ctx_(std::exchange(other.ctx_, nullptr)) {}

XmlDoc& XmlDoc::operator=(XmlDoc&& other) noexcept {
  if (this != &other) {
    if (ctx_ != nullptr) xmlXPathFreeContext(ctx_);
    if (doc_ != nullptr) xmlFreeDoc(doc_);
    doc_ = std::exchange(other.doc_, nullptr);
    ctx_ = std::exchange(other.ctx_, nullptr);
  }
  return *this;
}

XmlDoc::~XmlDoc() noexcept {
  if (ctx_ != nullptr) xmlXPathFreeContext(ctx_);
  if (doc_ != nullptr) xmlFreeDoc(doc_);
}

void XmlDoc::register_ns(const char* prefix, const char* uri) {
  xmlXPathRegisterNs(ctx_, xc(prefix), xc(uri));
}

std::vector<xmlNodePtr> XmlDoc::nodes(const char* xpath, xmlNodePtr context) const {
  std::vector<xmlNodePtr> out;
  ctx_->node = context != nullptr ? context : xmlDocGetRootElement(doc_);
  xmlXPathObjectPtr obj = xmlXPathEvalExpression(xc(xpath), ctx_);
  if (obj == nullptr) return out;
  if (obj->type == XPATH_NODESET && obj->nodesetval != nullptr) {
    for (int i = 0; i < obj->nodesetval->nodeNr; ++i) out.push_back(obj->nodesetval->nodeTab[i]);
  }
  xmlXPathFreeObject(obj);
  return out;
}

xmlNodePtr XmlDoc::node(const char* xpath, xmlNodePtr context) const {
  auto n = nodes(xpath, context);
  return n.empty() ? nullptr : n.front();
}

std::string XmlDoc::str(const char* xpath, xmlNodePtr context) const {
  ctx_->node = context != nullptr ? context : xmlDocGetRootElement(doc_);
  xmlXPathObjectPtr obj = xmlXPathEvalExpression(xc(xpath), ctx_);
  if (obj == nullptr) return {};
  xmlChar* s = xmlXPathCastToString(obj);
  std::string out = s != nullptr ? reinterpret_cast<const char*>(s) : "";
  xmlFree(s);
  xmlXPathFreeObject(obj);
  return out;
}

std::optional<std::string> opt_attr_of(xmlNodePtr node, const char* name) {
  if (node == nullptr) return std::nullopt;
  xmlChar* v = xmlGetProp(node, xc(name));
  if (v == nullptr) return std::nullopt;
  std::string out(reinterpret_cast<const char*>(v));
  xmlFree(v);
  return out;
}

std::string attr_of(xmlNodePtr node, const char* name) {
  return opt_attr_of(node, name).value_or(std::string());
}

std::string text_of(xmlNodePtr node) {
  if (node == nullptr) return {};
  xmlChar* v = xmlNodeGetContent(node);
  if (v == nullptr) return {};
  std::string out(reinterpret_cast<const char*>(v));
  xmlFree(v);
  return out;
}

namespace {
bool parse_int(std::string_view s, int& out) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && out >= 0;
}
}  // namespace

Result<std::vector<int>> parse_cpu_list(std::string_view list) {
  std::set<int> in;
  std::set<int> ex;
  std::string_view rest = list;
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!rest.empty() && space(rest.back())) rest.remove_suffix(1);
  while (!rest.empty() && space(rest.front())) rest.remove_prefix(1);
  if (rest.empty()) return std::vector<int>{};
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    bool exclude = !item.empty() && item.front() == '^';
    if (exclude) item.remove_prefix(1);
    size_t dash = item.find('-');
    int lo = 0;
    int hi = 0;
    bool ok = dash == std::string_view::npos
                  ? (parse_int(item, lo) && (hi = lo, true))
                  : (parse_int(item.substr(0, dash), lo) && parse_int(item.substr(dash + 1), hi));
    if (!ok || hi < lo || hi - lo > 65535) {
      return invalid_argument("cpuset", "malformed CPU list '" + std::string(list) + "'");
    }
    for (int c = lo; c <= hi; ++c) (exclude ? ex : in).insert(c);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  std::vector<int> out;
  for (int c : in) {
    if (ex.count(c) == 0) out.push_back(c);
  }
  return out;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::vector<int> v(cpus);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(v[i]);
    if (j > i) out += '-' + std::to_string(v[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace armhive::detail
