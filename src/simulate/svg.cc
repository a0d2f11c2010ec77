#include "simulate/svg.h"

#include <charconv>
#include <cmath>
#include <cstdint>

namespace sluice::simulate {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// XML 1.0's Char production: tab, newline, carriage return, and the rest of Unicode but the
// surrogates, U+FFFE and U+FFFF.
bool AllowedInXml(uint32_t c) {
  if (c < 0x20) return c == 0x09 || c == 0x0A || c == 0x0D;
  if (c >= 0xD800 && c <= 0xDFFF) return false;
  return c != 0xFFFE && c != 0xFFFF && c <= 0x10FFFF;
}

// Length of the well-formed UTF-8 sequence at the start of `text` and its code point; 0 when the
// bytes there are not one (overlong forms and surrogates included).
size_t DecodeUtf8(std::string_view text, uint32_t& c) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  uint32_t min = 0;
  if (lead < 0x80) {
    c = lead;
    return 1;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2, c = lead & 0x1F, min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, c = lead & 0x0F, min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, c = lead & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    c = (c << 6) | (byte(i) & 0x3F);
  }
  return c < min ? 0 : length;
}

}  // namespace

std::string FormatSvgNumber(double value) {
  if (!std::isfinite(value)) return "0";  // no coordinate means that; it keeps the XML valid
  double rounded = std::round(value * 100) / 100;
  if (rounded == 0) rounded = 0;  // no "-0"
  char buffer[64];
  const auto [end, ec] =
      std::to_chars(buffer, buffer + sizeof(buffer), rounded, std::chars_format::fixed, 2);
  if (ec != std::errc()) return "0";  // beyond 10^60: no coordinate means that either
  std::string text(buffer, end);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text;
}

std::string EscapeXml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    uint32_t c = 0;
    const size_t length = DecodeUtf8(text, c);
    if (length == 0 || !AllowedInXml(c)) {
      out += kReplacement;
      text.remove_prefix(length == 0 ? 1 : length);
      continue;
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out.append(text.substr(0, length));
    }
    text.remove_prefix(length);
  }
  return out;
}

SvgPath& SvgPath::Command(char command, std::initializer_list<double> numbers) {
  if (!data_.empty()) data_ += ' ';
  data_ += command;
  bool first = true;
  for (double n : numbers) {
    if (!first) data_ += ' ';
    data_ += FormatSvgNumber(n);
    first = false;
  }
  return *this;
}

SvgPath& SvgPath::MoveTo(double x, double y) { return Command('M', {x, y}); }
SvgPath& SvgPath::LineTo(double x, double y) { return Command('L', {x, y}); }
SvgPath& SvgPath::HorizontalTo(double x) { return Command('H', {x}); }
SvgPath& SvgPath::VerticalTo(double y) { return Command('V', {y}); }
SvgPath& SvgPath::Close() { return Command('Z', {}); }

SvgWriter::SvgWriter(double width, double height, std::string_view font_family, double font_size) {
  out_ = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  Open("svg", {{"xmlns", "http://www.w3.org/2000/svg"},
               {"width", width},
               {"height", height},
               {"viewBox", "0 0 " + FormatSvgNumber(width) + " " + FormatSvgNumber(height)},
               {"font-family", font_family},
               {"font-size", font_size}});
}

void SvgWriter::StartTag(std::string_view tag, SvgAttributes attributes) {
  out_ += '<';
  out_ += tag;
  for (const SvgAttribute& attribute : attributes) {
    out_ += ' ';
    out_ += attribute.name();
    out_ += "=\"";
    out_ += attribute.escaped_value();
    out_ += '"';
  }
}

void SvgWriter::Open(std::string_view tag, SvgAttributes attributes) {
  StartTag(tag, attributes);
  out_ += ">\n";
  open_.emplace_back(tag);
}

void SvgWriter::Close() {
  if (open_.empty()) return;
  out_ += "</" + open_.back() + ">\n";
  open_.pop_back();
}

void SvgWriter::Element(std::string_view tag, SvgAttributes attributes) {
  StartTag(tag, attributes);
  out_ += "/>\n";
}

void SvgWriter::Text(std::string_view tag, SvgAttributes attributes, std::string_view text) {
  StartTag(tag, attributes);
  out_ += '>';
  out_ += EscapeXml(text);
  out_ += "</";
  out_ += tag;
  out_ += ">\n";
}

std::string SvgWriter::Finish() {
  while (!open_.empty()) Close();
  return std::move(out_);
}

}  // namespace sluice::simulate
