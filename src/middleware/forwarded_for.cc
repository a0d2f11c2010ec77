#include "middleware/forwarded_for.h"

#include <algorithm>
#include <charconv>
#include <string>

namespace sluice::middleware {
namespace {

namespace ip = boost::asio::ip;

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The IPv4 address an IPv4-mapped IPv6 one stands for; any other unchanged.
ip::address Unmapped(const ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return ip::make_address_v4(ip::v4_mapped, address.to_v6());
  }
  return address;
}

// ":4711", at most 65535.
bool IsPortSuffix(std::string_view s) {
  if (s.size() < 2 || s.size() > 6 || s.front() != ':') return false;
  if (!std::all_of(s.begin() + 1, s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  int port = 0;
  std::from_chars(s.data() + 1, s.data() + s.size(), port);
  return port <= 65535;
}

std::optional<ip::address> Parse(std::string_view text) {
  boost::system::error_code ec;
  const ip::address address = ip::make_address(std::string(text), ec);
  if (ec) return std::nullopt;
  return Unmapped(address);
}

// An IPv6 address, its zone id dropped.
std::optional<ip::address> ParseV6(std::string_view text) {
  text = text.substr(0, text.find('%'));
  if (text.find(':') == std::string_view::npos) return std::nullopt;
  return Parse(text);
}

}  // namespace

std::optional<ip::address> ParseAddress(std::string_view text) {
  if (text.starts_with('[')) {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view port = text.substr(close + 1);
    if (!port.empty() && !IsPortSuffix(port)) return std::nullopt;
    return ParseV6(text.substr(1, close - 1));
  }
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return Parse(text);
  // One colon: IPv4 and a port (an IPv6 address has at least two).
  if (text.find(':', colon + 1) == std::string_view::npos) {
    if (!IsPortSuffix(text.substr(colon))) return std::nullopt;
    return Parse(text.substr(0, colon));
  }
  return ParseV6(text);
}

std::vector<std::string_view> ForwardedForEntries(const RequestView& request) {
  std::vector<std::string_view> entries;
  request.ForEachHeaderValue("X-Forwarded-For", [&entries](std::string_view line) {
    while (!line.empty()) {
      const auto comma = line.find(',');
      const std::string_view entry = TrimBlanks(line.substr(0, comma));
      if (!entry.empty()) entries.push_back(entry);
      line = comma == std::string_view::npos ? std::string_view() : line.substr(comma + 1);
    }
  });
  return entries;
}

}  // namespace sluice::middleware
