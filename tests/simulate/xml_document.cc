#include "simulate/xml_document.h"

#include <expat.h>

#include <memory>
#include <sstream>

namespace sluice::testing {
namespace {

struct Builder {
  XmlElement document;  // holds the root element as its only child
  std::vector<XmlElement*> open{&document};
};

void OnStart(void* data, const XML_Char* name, const XML_Char** attributes) {
  auto* builder = static_cast<Builder*>(data);
  // Only the innermost open element grows, so the pointers to the open ones stay valid.
  XmlElement& element = builder->open.back()->children.emplace_back();
  element.name = name;
  for (; attributes[0] != nullptr; attributes += 2)
    element.attributes[attributes[0]] = attributes[1];
  builder->open.push_back(&element);
}

void OnEnd(void* data, const XML_Char*) { static_cast<Builder*>(data)->open.pop_back(); }

void OnText(void* data, const XML_Char* text, int length) {
  static_cast<Builder*>(data)->open.back()->text.append(text, static_cast<size_t>(length));
}

void Collect(const XmlElement& element, const std::function<bool(const XmlElement&)>& match,
             std::vector<const XmlElement*>& found) {
  for (const XmlElement& child : element.children) {
    if (match(child)) found.push_back(&child);
    Collect(child, match, found);
  }
}

}  // namespace

std::string XmlElement::Attribute(const std::string& attribute) const {
  const auto it = attributes.find(attribute);
  return it == attributes.end() ? "" : it->second;
}

bool XmlElement::HasClass(std::string_view token) const {
  std::istringstream words(Attribute("class"));
  for (std::string word; words >> word;) {
    if (word == token) return true;
  }
  return false;
}

std::vector<const XmlElement*> XmlElement::FindAll(
    const std::function<bool(const XmlElement&)>& match) const {
  std::vector<const XmlElement*> found;
  Collect(*this, match, found);
  return found;
}

std::vector<const XmlElement*> XmlElement::WithClass(std::string_view token) const {
  return FindAll([&](const XmlElement& e) { return e.HasClass(token); });
}

Result<XmlElement> ReadXml(std::string_view text) {
  const std::unique_ptr<XML_ParserStruct, decltype(&XML_ParserFree)> parser(
      XML_ParserCreate(nullptr), &XML_ParserFree);
  Builder builder;
  XML_SetUserData(parser.get(), &builder);
  XML_SetElementHandler(parser.get(), OnStart, OnEnd);
  XML_SetCharacterDataHandler(parser.get(), OnText);
  if (XML_Parse(parser.get(), text.data(), static_cast<int>(text.size()), XML_TRUE) ==
      XML_STATUS_ERROR) {
    return Status::InvalidArgument(std::string("not well-formed XML: ") +
                                   XML_ErrorString(XML_GetErrorCode(parser.get())) + " at line " +
                                   std::to_string(XML_GetCurrentLineNumber(parser.get())));
  }
  if (builder.document.children.size() != 1) return Status::InvalidArgument("no root element");
  return std::move(builder.document.children.front());
}

}  // namespace sluice::testing
