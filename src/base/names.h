// The names of an enum's values: one constexpr table of {value, name} per enum, read both ways by
// NameOf and ParseName, instead of a switch per direction. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::base {

template <typename Enum>
struct EnumName {
  Enum value;
  const char* name;
};

// The name of `value`, or `unknown` when the table lacks it.
template <typename Enum, size_t N>
constexpr const char* NameOf(const EnumName<Enum> (&table)[N], Enum value,
                             const char* unknown = "unknown") {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return unknown;
}

// The value named `name` exactly; nullopt when none is.
template <typename Enum, size_t N>
constexpr std::optional<Enum> ParseName(const EnumName<Enum> (&table)[N], std::string_view name) {
  for (const auto& entry : table) {
    if (name == entry.name) return entry.value;
  }
  return std::nullopt;
}

// Every name, for an error message: "a, b or c".
template <typename Enum, size_t N>
std::string NameList(const EnumName<Enum> (&table)[N]) {
  std::string list;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) list += i + 1 == N ? " or " : ", ";
    list += table[i].name;
  }
  return list;
}

}  // namespace sluice::base
