#include "simulate/svg.h"

#include <gtest/gtest.h>

#include <limits>

#include "simulate/xml_document.h"

namespace sluice::simulate {
namespace {

TEST(FormatSvgNumber, TwoDecimalsAtMostAndNoTrailingZeros) {
  EXPECT_EQ(FormatSvgNumber(12), "12");
  EXPECT_EQ(FormatSvgNumber(0.5), "0.5");
  EXPECT_EQ(FormatSvgNumber(-3.256), "-3.26");
  EXPECT_EQ(FormatSvgNumber(84.004), "84");
  EXPECT_EQ(FormatSvgNumber(-0.001), "0");
  EXPECT_EQ(FormatSvgNumber(1e15), "1000000000000000");
  EXPECT_EQ(FormatSvgNumber(std::numeric_limits<double>::quiet_NaN()), "0");
}

constexpr std::string_view kFffd = "\xEF\xBF\xBD";

TEST(EscapeXml, EscapesMarkupAndKeepsUtf8) {
  EXPECT_EQ(EscapeXml(R"(<a href="x">Tom & 'Jerry'</a>)"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &apos;Jerry&apos;&lt;/a&gt;");
  EXPECT_EQ(EscapeXml("5 per 10 µs – ok 🚦\t\n"), "5 per 10 µs – ok 🚦\t\n");
}

TEST(EscapeXml, ReplacesWhatXmlCannotHold) {
  const std::string fffd(kFffd);
  EXPECT_EQ(EscapeXml(std::string_view("a\0b", 3)), "a" + fffd + "b");
  EXPECT_EQ(EscapeXml("\x01\x1f\x7f"), fffd + fffd + "\x7f");  // DEL is allowed in XML 1.0
  EXPECT_EQ(EscapeXml("\xff"), fffd);                          // never in UTF-8
  EXPECT_EQ(EscapeXml("\xC0\xAF"), fffd + fffd);               // overlong '/'
  EXPECT_EQ(EscapeXml("\xED\xA0\x80"), fffd);                  // a surrogate
  EXPECT_EQ(EscapeXml("\xEF\xBF\xBE"), fffd);                  // U+FFFE
  EXPECT_EQ(EscapeXml("\xF4\x90\x80\x80"), fffd);              // above U+10FFFF
  EXPECT_EQ(EscapeXml("ok\xE2\x82"), "ok" + fffd + fffd);      // cut short
}

TEST(SvgPath, WritesCommandsWithRoundedNumbers) {
  EXPECT_EQ(SvgPath().MoveTo(1, 2.5).LineTo(3.333, 4).HorizontalTo(5).VerticalTo(6).Close().data(),
            "M1 2.5 L3.33 4 H5 V6 Z");
}

// Whatever text and attribute values it is given, the document is well-formed, and reading it
// back gives the text (but for what XML cannot hold).
TEST(SvgWriter, EveryDocumentIsWellFormed) {
  const std::string hostile = "</svg><!-- & \"quoted\" 'single' ]]> \x01\xff";
  const std::string read_back =
      "</svg><!-- & \"quoted\" 'single' ]]> " + std::string(kFffd) + std::string(kFffd);
  SvgWriter svg(100, 50.5, hostile, 12);
  svg.Text("title", {}, hostile);
  svg.Open("g", {{"class", "outer"}, {"data-text", hostile}});
  svg.Element("rect", {{"x", 1}, {"y", 2.25}, {"width", int64_t{3}}, {"height", 4u}});
  svg.Open("g", {{"class", "inner"}});
  svg.Text("text", {{"x", 0}}, hostile);
  const std::string document = svg.Finish();  // closes both groups and the root

  auto root = testing::ReadXml(document);
  ASSERT_TRUE(root.ok()) << root.status().message() << "\n" << document;
  EXPECT_EQ(root->name, "svg");
  EXPECT_EQ(root->Attribute("xmlns"), "http://www.w3.org/2000/svg");
  EXPECT_EQ(root->Attribute("viewBox"), "0 0 100 50.5");
  EXPECT_EQ(root->Attribute("font-family"), read_back);
  ASSERT_EQ(root->children.size(), 2u);
  EXPECT_EQ(root->children[0].text, read_back);
  const testing::XmlElement& outer = root->children[1];
  EXPECT_EQ(outer.Attribute("data-text"), read_back);
  EXPECT_EQ(outer.children[0].Attribute("y"), "2.25");
  EXPECT_EQ(outer.children[0].Attribute("height"), "4");
  ASSERT_EQ(outer.WithClass("inner").size(), 1u);
  EXPECT_EQ(outer.WithClass("inner")[0]->children[0].text, read_back);
}

}  // namespace
}  // namespace sluice::simulate
