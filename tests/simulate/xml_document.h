// An XML document read back with expat, for the tests of `sluice simulate --svg`: reading fails,
// naming expat's complaint and its line, unless the text is well-formed XML.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/status.h"

namespace sluice::testing {

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::string text;  // the character data directly inside, entities decoded
  std::vector<XmlElement> children;

  // The attribute's value, empty when it has none.
  std::string Attribute(const std::string& attribute) const;
  // Whether `token` is one of the words of the class attribute.
  bool HasClass(std::string_view token) const;
  // Every element inside this one, in document order, for which `match` holds.
  std::vector<const XmlElement*> FindAll(const std::function<bool(const XmlElement&)>& match) const;
  // The elements inside this one with that class token, in document order.
  std::vector<const XmlElement*> WithClass(std::string_view token) const;
};

// The root element of `text`.
Result<XmlElement> ReadXml(std::string_view text);

}  // namespace sluice::testing
