#include "middleware/request_path.h"

#include <optional>
#include <vector>

namespace sluice::middleware {
namespace {

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// RFC 3986 section 2.3.
bool IsUnreserved(char c) {
  return IsAlpha(c) || IsDigit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

// What a path segment may hold as it is (pchar, RFC 3986 section 3.3), '%' aside.
bool IsSegmentChar(char c) {
  constexpr std::string_view kSubDelimsAndColonAt = "!$&'()*+,;=:@";
  return IsUnreserved(c) || kSubDelimsAndColonAt.find(c) != std::string_view::npos;
}

int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendEncoded(std::string& out, unsigned char byte) {
  constexpr char kHex[] = "0123456789ABCDEF";
  out += '%';
  out += kHex[byte >> 4];
  out += kHex[byte & 0xf];
}

// The path of an absolute URI ("http://host/a?q": "/a?q"; "http://host?q": "?q"); nullopt when
// `target` does not start with a scheme and "://".
std::optional<std::string_view> PathOfAbsolute(std::string_view target) {
  if (target.empty() || !IsAlpha(target.front())) return std::nullopt;
  size_t i = 1;
  while (i < target.size() && (IsAlpha(target[i]) || IsDigit(target[i]) || target[i] == '+' ||
                               target[i] == '-' || target[i] == '.')) {
    ++i;
  }
  if (target.substr(i, 3) != "://") return std::nullopt;
  const size_t path = target.find_first_of("/?#", i + 3);
  return path == std::string_view::npos ? std::string_view() : target.substr(path);
}

// `segment` with its percent-encodings and raw bytes in canonical form (above); false when a '%'
// is not followed by two hex digits.
bool AppendCanonical(std::string_view segment, std::string& out) {
  for (size_t i = 0; i < segment.size(); ++i) {
    const char c = segment[i];
    if (c != '%') {
      if (IsSegmentChar(c)) {
        out += c;
      } else {
        AppendEncoded(out, static_cast<unsigned char>(c));
      }
      continue;
    }
    if (segment.size() - i < 3) return false;
    const int hi = HexValue(segment[i + 1]);
    const int lo = HexValue(segment[i + 2]);
    if (hi < 0 || lo < 0) return false;
    const char decoded = static_cast<char>(hi * 16 + lo);
    if (IsUnreserved(decoded)) {
      out += decoded;
    } else {
      AppendEncoded(out, static_cast<unsigned char>(decoded));
    }
    i += 2;
  }
  return true;
}

}  // namespace

Result<std::string> NormalPath(std::string_view target) {
  if (!target.starts_with('/')) {
    const auto path = PathOfAbsolute(target);
    if (!path) {
      return Status::InvalidArgument("the request target is neither a path nor an absolute URI");
    }
    target = *path;
  }
  target = target.substr(0, target.find_first_of("?#"));

  // The canonical segments, one after the other in `path`, each starting at its '/'; `starts`
  // holds where each begins, so that ".." can drop the last.
  std::string path;
  std::vector<size_t> starts;
  std::string segment;
  while (!target.empty()) {
    const size_t slash = target.find('/', 1);
    const std::string_view raw =
        target.substr(1, slash == std::string_view::npos ? slash : slash - 1);
    target = slash == std::string_view::npos ? std::string_view() : target.substr(slash);
    segment.clear();
    if (!AppendCanonical(raw, segment)) {
      return Status::InvalidArgument(
          "the request path has a '%' that is not followed by two hex digits");
    }
    if (segment.empty() || segment == ".") continue;
    if (segment == "..") {
      if (!starts.empty()) {
        path.resize(starts.back());
        starts.pop_back();
      }
      continue;
    }
    starts.push_back(path.size());
    path += '/';
    path += segment;
  }
  if (path.empty()) path = "/";
  return path;
}

}  // namespace sluice::middleware
