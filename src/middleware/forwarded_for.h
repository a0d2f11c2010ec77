// How the client addresses that peers and proxies report are read: an address as a socket or an
// X-Forwarded-For entry spells it, and the entries of X-Forwarded-For. ClientIp, TrustedProxies,
// ClientPrefixes and the forward-auth key read addresses only through these. Pure functions;
// thread-safe.
#pragma once

#include <boost/asio/ip/address.hpp>
#include <optional>
#include <string_view>
#include <vector>

#include "sluice/middleware/middleware.h"

namespace sluice::middleware {

// The address `text` spells: "192.0.2.1" or "2001:db8::1", optionally with a port
// ("192.0.2.1:4711", "[2001:db8::1]:4711") or in brackets ("[2001:db8::1]"). An IPv6 zone id
// ("fe80::1%eth0", "[2001:db8::1%1]:80") is dropped: it names an interface of the host that
// wrote it, not another client. An IPv4-mapped IPv6 address is the IPv4 one. nullopt for
// anything else: an empty text, a name, garbage, brackets around IPv4, a port above 65535.
std::optional<boost::asio::ip::address> ParseAddress(std::string_view text);

// The entries of every X-Forwarded-For line of `request`, in order, blanks trimmed. An empty
// entry is no address and no entry: "1.2.3.4," has one entry, "," and " , " none (RFC 9110
// section 5.6.1).
std::vector<std::string_view> ForwardedForEntries(const RequestView& request);

}  // namespace sluice::middleware
