// The path of a request target in one canonical form, for keying limits on paths: every spelling
// of a path that an application routes alike is one key, so a client cannot get a fresh limit by
// spelling its path another way. The middleware's Path() and the forward-auth `uri` key part are
// both this; it holds no rate-limiting logic.
//
// From a request target as the client sent it ("/a/b?q", or the absolute form
// "http://host/a/b?q", whose path is taken):
//   - the query and a fragment are dropped ("/login?x=1" is "/login");
//   - a percent-encoded unreserved character (RFC 3986 section 2.3: ALPHA DIGIT - . _ ~) is
//     decoded ("/%6cogin" is "/login"); any other percent-encoding stays encoded, its hex digits
//     in upper case ("%2f" is "%2F": an encoded '/' is data within a segment, not a separator);
//   - a byte that may not appear in a path as it is (a space, a control character, a byte above
//     0x7F, ...) is percent-encoded, as a client that encodes it would have sent it;
//   - empty segments are dropped ("//login" is "/login") and dot segments resolved after the
//     decoding ("/a/../login", "/./login" and "/%2e/login" are "/login"; ".." at the root stays
//     at the root);
//   - a trailing slash is dropped ("/login/" is "/login"); the root is "/".
// Letters keep their case: "/Login" and "/login" are two paths (RFC 3986 section 6.2.2.1).
//
// Thread safety: a pure function.
#pragma once

#include <string>
#include <string_view>

#include "sluice/status.h"

namespace sluice::middleware {

// The canonical path of `target`. INVALID_ARGUMENT, with no key to be made of it, when a '%' is
// not followed by two hex digits, or when `target` is neither a path nor an absolute URI.
Result<std::string> NormalPath(std::string_view target);

}  // namespace sluice::middleware
