// The Redis key names of a limiter key. "<prefix><scope>:{<key>}" holds its state and, for
// sliding_log, "<prefix><scope>:{<key>}:n" the count of the units that left its log. `%`, `{` and
// `}` in the scope and the key are percent-encoded, so:
//   - the hash tag (what Redis Cluster hashes) is exactly the encoded key: every limiter's state
//     for one key lives in one slot, which an all-or-nothing check of several limits needs;
//   - no (scope, key) pair can name the keys of another, or leave the prefix's namespace.
// Other bytes, binary ones included, are kept as they are (Redis keys are binary-safe).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace sluice::redis {

inline constexpr std::string_view kAuxSuffix = ":n";

// Bytes appended in an inline buffer, moved to the heap only when they outgrow it. Views into
// it stay valid until the next append. append() is named as std::string's, so that the Append*
// templates below take either.
class KeyBuffer {
 public:
  KeyBuffer() = default;
  KeyBuffer(const KeyBuffer&) = delete;
  KeyBuffer& operator=(const KeyBuffer&) = delete;

  void append(std::string_view bytes);
  size_t size() const { return size_; }
  std::string_view View(size_t pos, size_t count) const {
    return std::string_view(heap_.empty() ? inline_.data() : heap_.data(), size_)
        .substr(pos, count);
  }

 private:
  std::array<char, 512> inline_;
  std::string heap_;
  size_t size_ = 0;
};

// Appends `bytes` with `%`, `{` and `}` percent-encoded.
template <typename Out>
void AppendEscaped(Out& out, std::string_view bytes) {
  size_t run = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (c != '%' && c != '{' && c != '}') continue;
    out.append(bytes.substr(run, i - run));
    out.append(c == '%' ? "%25" : c == '{' ? "%7B" : "%7D");
    run = i + 1;
  }
  out.append(bytes.substr(run));
}

// Appends the state key name; the auxiliary key is that followed by kAuxSuffix.
template <typename Out>
void AppendStateKey(Out& out, std::string_view prefix, std::string_view scope,
                    std::string_view key) {
  out.append(prefix);
  AppendEscaped(out, scope);
  out.append(":{");
  AppendEscaped(out, key);
  out.append("}");
}

}  // namespace sluice::redis
