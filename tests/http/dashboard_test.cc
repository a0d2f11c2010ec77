// The dashboard's files as the binary serves them: each one exactly as written in
// src/http/dashboard/, with its type and the dashboard's headers, and a page that the policy lets
// run: no inline script, style or handler, nothing from another origin, no HTML made from text.
#include "http/dashboard.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <regex>
#include <string>

namespace sluice::http {
namespace {

std::string SourceFile(const std::string& name) {
  std::ifstream in(SLUICE_SOURCE_DIR "/src/http/dashboard/" + name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Served {
  std::string path;
  std::string file;
  std::string content_type;
};

const Served kFiles[] = {
    {"/", "index.html", "text/html; charset=utf-8"},
    {"/ui", "index.html", "text/html; charset=utf-8"},
    {"/ui/app.js", "app.js", "text/javascript; charset=utf-8"},
    {"/ui/model.js", "model.js", "text/javascript; charset=utf-8"},
    {"/ui/prometheus.js", "prometheus.js", "text/javascript; charset=utf-8"},
    {"/ui/style.css", "style.css", "text/css; charset=utf-8"},
};

std::vector<std::string> Matches(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    found.push_back((*it)[1].str());
  }
  return found;
}

TEST(DashboardTest, EachFileIsServedAsWrittenWithTheDashboardsHeaders) {
  for (const Served& served : kFiles) {
    const DashboardFile* file = FindDashboardFile(served.path);
    ASSERT_NE(file, nullptr) << served.path;
    EXPECT_EQ(file->body, SourceFile(served.file)) << served.path;
    Response response;
    response.Reset();
    ServeDashboardFile(*file, response);
    EXPECT_EQ(response.content_type, served.content_type);
    EXPECT_EQ(response.body, file->body);
    EXPECT_EQ(*response.FindHeader("Content-Security-Policy"), kDashboardPolicy);
    EXPECT_EQ(*response.FindHeader("X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(*response.FindHeader("Cache-Control"), "no-cache");
    EXPECT_EQ(*response.FindHeader("Referrer-Policy"), "no-referrer");
  }
  for (const char* path : {"/index.html", "/ui/app", "/ui//app.js", "/UI", "/ui/../metrics"}) {
    EXPECT_EQ(FindDashboardFile(path), nullptr) << path;
  }
}

TEST(DashboardTest, ThePolicyAllowsOnlyThisOriginAndNoInlineCode) {
  const std::string policy(kDashboardPolicy);
  EXPECT_EQ(policy.find("unsafe"), std::string::npos);
  for (const char* directive : {"default-src 'none'", "script-src 'self'", "style-src 'self'",
                                "connect-src 'self'", "frame-ancestors 'none'"}) {
    EXPECT_NE(policy.find(directive), std::string::npos) << directive;
  }
}

TEST(DashboardTest, ThePageLoadsOnlyItsOwnFilesAndHasNoInlineCode) {
  const std::string html = SourceFile("index.html");
  const auto scripts = Matches(html, "<script([^>]*)>");
  ASSERT_EQ(scripts.size(), 1u);
  for (const std::string& url : Matches(html, R"((?:src|href)="([^"]*)\")")) {
    EXPECT_NE(FindDashboardFile(url), nullptr) << url << " is not served";
  }
  EXPECT_EQ(Matches(html, R"(<script(?![^>]*\ssrc=)([^>]*)>)").size(), 0u) << "inline script";
  EXPECT_EQ(Matches(html, R"((<style))").size(), 0u);
  EXPECT_EQ(Matches(html, R"(\s(style|on[a-z]+)=)").size(), 0u) << "inline style or handler";

  for (const char* name : {"app.js", "model.js", "prometheus.js"}) {
    const std::string js = SourceFile(name);
    for (const std::string& module : Matches(js, R"(from '\./([^']+)')")) {
      EXPECT_NE(FindDashboardFile("/ui/" + module), nullptr) << name << " imports " << module;
    }
    for (const char* sink : {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                             "eval(", "Function(", "setAttribute('on", "http://", "https://"}) {
      EXPECT_EQ(js.find(sink), std::string::npos) << name << " uses " << sink;
    }
  }
  const std::string css = SourceFile("style.css");
  EXPECT_EQ(css.find("url("), std::string::npos);
  EXPECT_EQ(css.find("@import"), std::string::npos);
}

}  // namespace
}  // namespace sluice::http
