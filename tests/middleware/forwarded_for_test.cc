// How addresses and X-Forwarded-For entries are read: ports, brackets, IPv6 zone ids (dropped),
// IPv4-mapped addresses, and lists with empty entries (",", " , ", "1.2.3.4,"), which are no
// entries.
#include "middleware/forwarded_for.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace sluice::middleware {
namespace {

std::string Read(std::string_view text) {
  const auto address = ParseAddress(text);
  return address ? address->to_string() : "<none>";
}

class Lines final : public RequestView {
 public:
  explicit Lines(std::vector<std::string> lines) : lines_(std::move(lines)) {}
  std::string_view peer_address() const override { return "10.0.0.1"; }
  std::string_view path() const override { return "/"; }
  void ForEachHeaderValue(std::string_view name,
                          const std::function<void(std::string_view)>& visit) const override {
    if (name != "X-Forwarded-For") return;
    for (const std::string& line : lines_) visit(line);
  }

 private:
  std::vector<std::string> lines_;
};

std::vector<std::string> Entries(std::vector<std::string> lines) {
  const Lines request(std::move(lines));
  std::vector<std::string> entries;
  for (std::string_view e : ForwardedForEntries(request)) entries.emplace_back(e);
  return entries;
}

using List = std::vector<std::string>;

TEST(ForwardedFor, EmptyEntriesAreNoEntries) {
  EXPECT_EQ(Entries({","}), List{});
  EXPECT_EQ(Entries({" , "}), List{});
  EXPECT_EQ(Entries({""}), List{});
  EXPECT_EQ(Entries({" \t "}), List{});
  EXPECT_EQ(Entries({",,, ,", ""}), List{});
  EXPECT_EQ(Entries({"1.2.3.4,"}), List{"1.2.3.4"});
  EXPECT_EQ(Entries({",1.2.3.4"}), List{"1.2.3.4"});
  EXPECT_EQ(Entries({" 1.2.3.4 , , 10.0.0.1 "}), (List{"1.2.3.4", "10.0.0.1"}));
  EXPECT_EQ(Entries({"1.2.3.4", ", 10.0.0.1"}), (List{"1.2.3.4", "10.0.0.1"}));
  EXPECT_EQ(Entries({}), List{});
}

TEST(ForwardedFor, AnEmptyEntryIsNoAddress) {
  EXPECT_EQ(Read(""), "<none>");
  EXPECT_EQ(Read(","), "<none>");
  EXPECT_EQ(Read(" "), "<none>");
}

TEST(ForwardedFor, PortsAndBrackets) {
  EXPECT_EQ(Read("192.0.2.1"), "192.0.2.1");
  EXPECT_EQ(Read("192.0.2.1:4711"), "192.0.2.1");
  EXPECT_EQ(Read("192.0.2.1:65535"), "192.0.2.1");
  EXPECT_EQ(Read("192.0.2.1:65536"), "<none>");
  EXPECT_EQ(Read("192.0.2.1:"), "<none>");
  EXPECT_EQ(Read("192.0.2.1:x"), "<none>");
  EXPECT_EQ(Read("2001:db8::1"), "2001:db8::1");
  EXPECT_EQ(Read("[2001:db8::1]"), "2001:db8::1");
  EXPECT_EQ(Read("[2001:db8::1]:4711"), "2001:db8::1");
  EXPECT_EQ(Read("[2001:db8::1]:"), "<none>");
  EXPECT_EQ(Read("[2001:db8::1]4711"), "<none>");
  EXPECT_EQ(Read("[2001:db8::1"), "<none>");
  EXPECT_EQ(Read("[192.0.2.1]"), "<none>");  // brackets are for IPv6
  EXPECT_EQ(Read("[]"), "<none>");
}

TEST(ForwardedFor, ZoneIdsAreDropped) {
  EXPECT_EQ(Read("2001:db8::1%1"), "2001:db8::1");
  EXPECT_EQ(Read("2001:db8::1%eth0"), "2001:db8::1");
  EXPECT_EQ(Read("fe80::1%25eth0"), "fe80::1");
  EXPECT_EQ(Read("[2001:db8::1%1]"), "2001:db8::1");
  EXPECT_EQ(Read("[2001:db8::1%1]:4711"), "2001:db8::1");
  EXPECT_EQ(Read("192.0.2.1%1"), "<none>");  // no zones in IPv4
  EXPECT_EQ(Read("%1"), "<none>");
}

TEST(ForwardedFor, AnIpv4MappedAddressIsTheIpv4One) {
  EXPECT_EQ(Read("::ffff:192.0.2.1"), "192.0.2.1");
  EXPECT_EQ(Read("[::ffff:192.0.2.1]:80"), "192.0.2.1");
  EXPECT_EQ(Read("::ffff:192.0.2.1%2"), "192.0.2.1");
}

TEST(ForwardedFor, WhatIsNoAddress) {
  for (const char* text : {"unknown", "_hidden", "example.com", "1.2.3", "1.2.3.4.5", "256.0.0.1",
                           "2001:db8::g", "1.2.3.4 5.6.7.8"}) {
    EXPECT_EQ(Read(text), "<none>") << text;
  }
}

}  // namespace
}  // namespace sluice::middleware
