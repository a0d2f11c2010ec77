// A small writer of SVG documents, enough for the pictures of `sluice simulate --svg`: elements
// with attributes, text, and path data. Every attribute value and text is escaped, and bytes that
// are not valid UTF-8 or characters XML 1.0 forbids are replaced by U+FFFD, so the document is
// well-formed XML whatever the caller passes. Numbers are written with at most two decimals, so
// the same picture is always the same bytes.
//
// Thread safety: none; one writer builds one document.
#pragma once

#include <concepts>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::simulate {

// `value` with at most two decimals and no trailing zeros: 12, 0.5, -3.25 (and "0" for what is
// not a finite number below 10^60, which no picture means to draw).
std::string FormatSvgNumber(double value);

// `text` escaped for XML text and attribute values (& < > " '), with invalid UTF-8 and characters
// XML 1.0 forbids replaced by U+FFFD.
std::string EscapeXml(std::string_view text);

// One attribute: a name (a constant of the caller) and a value, text or a number.
class SvgAttribute {
 public:
  SvgAttribute(std::string_view name, std::string_view value)
      : name_(name), value_(EscapeXml(value)) {}
  SvgAttribute(std::string_view name, const char* value)
      : SvgAttribute(name, std::string_view(value)) {}
  template <typename Number>
  requires(std::integral<Number> || std::floating_point<Number>) &&
      (!std::same_as<Number, bool>)SvgAttribute(std::string_view name, Number value)
      : name_(name),
  value_(FormatSvgNumber(static_cast<double>(value))) {}

  std::string_view name() const { return name_; }
  const std::string& escaped_value() const { return value_; }

 private:
  std::string_view name_;
  std::string value_;
};

using SvgAttributes = std::initializer_list<SvgAttribute>;

// Path data ("d"), built command by command in absolute coordinates.
class SvgPath {
 public:
  SvgPath& MoveTo(double x, double y);
  SvgPath& LineTo(double x, double y);
  SvgPath& HorizontalTo(double x);
  SvgPath& VerticalTo(double y);
  SvgPath& Close();
  const std::string& data() const { return data_; }

 private:
  SvgPath& Command(char command, std::initializer_list<double> numbers);
  std::string data_;
};

class SvgWriter {
 public:
  // Starts a document of `width` × `height` pixels; `font` styles every text in it.
  SvgWriter(double width, double height, std::string_view font_family, double font_size);

  // <tag attributes>, closed by the matching Close().
  void Open(std::string_view tag, SvgAttributes attributes = {});
  void Close();
  // <tag attributes/>
  void Element(std::string_view tag, SvgAttributes attributes);
  // <tag attributes>text</tag>
  void Text(std::string_view tag, SvgAttributes attributes, std::string_view text);

  // Closes whatever is still open and returns the document.
  std::string Finish();

 private:
  void StartTag(std::string_view tag, SvgAttributes attributes);

  std::string out_;
  std::vector<std::string> open_;
};

}  // namespace sluice::simulate
