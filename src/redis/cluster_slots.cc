#include "redis/cluster_slots.h"

#include <array>
#include <string>

namespace sluice::redis {
namespace {

constexpr std::array<uint16_t, 256> MakeCrc16Table() {
  std::array<uint16_t, 256> table{};
  for (int byte = 0; byte < 256; ++byte) {
    uint16_t crc = static_cast<uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    table[byte] = crc;
  }
  return table;
}

constexpr std::array<uint16_t, 256> kCrc16Table = MakeCrc16Table();

uint16_t Crc16(std::string_view bytes) {
  uint16_t crc = 0;
  for (const char c : bytes) {
    crc = static_cast<uint16_t>((crc << 8) ^
                                kCrc16Table[((crc >> 8) ^ static_cast<uint8_t>(c)) & 0xff]);
  }
  return crc;
}

}  // namespace

uint16_t KeySlot(std::string_view key) {
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) % kClusterSlots;
}

std::string_view HostOf(std::string_view address) { return address.substr(0, address.rfind(':')); }

std::vector<SlotRange> ParseSlotRanges(const Reply& reply, std::string_view asked) {
  std::vector<SlotRange> ranges;
  if (reply.type != Reply::Type::kArray) return ranges;
  for (const Reply& range : reply.elements) {
    const auto& e = range.elements;
    if (range.type != Reply::Type::kArray || e.size() < 3 || e[0].type != Reply::Type::kInteger ||
        e[1].type != Reply::Type::kInteger || e[2].type != Reply::Type::kArray ||
        e[2].elements.size() < 2 || e[2].elements[0].type != Reply::Type::kString ||
        e[2].elements[1].type != Reply::Type::kInteger || e[0].integer < 0 ||
        e[1].integer >= kClusterSlots || e[0].integer > e[1].integer) {
      return {};
    }
    const std::string& host = e[2].elements[0].str;
    ranges.push_back(SlotRange{.first = static_cast<int>(e[0].integer),
                               .last = static_cast<int>(e[1].integer),
                               .address = (host.empty() ? std::string(HostOf(asked)) : host) + ":" +
                                          std::to_string(e[2].elements[1].integer)});
  }
  return ranges;
}

std::optional<Redirect> ParseRedirect(const Reply& reply, std::string_view from) {
  if (!reply.is_error()) return std::nullopt;
  const bool ask = reply.str.starts_with("ASK ");
  if (!ask && !reply.str.starts_with("MOVED ")) return std::nullopt;
  std::string address = reply.str.substr(reply.str.rfind(' ') + 1);
  if (address.starts_with(':')) address.insert(0, HostOf(from));
  return Redirect{.ask = ask, .address = std::move(address)};
}

ClusterRefusal ParseClusterRefusal(const Reply& reply) {
  if (!reply.is_error()) return ClusterRefusal::kNone;
  // After TRYAGAIN and CLUSTERDOWN, the words of a script's errors (script.c: Redis 7.0, and 7.4
  // on for the last of each).
  if (reply.str.starts_with("TRYAGAIN") ||
      reply.str.find("undeclared keys were accessed during rehashing") != std::string::npos) {
    return ClusterRefusal::kTryAgain;
  }
  if (reply.str.starts_with("CLUSTERDOWN") ||
      reply.str.find("Script attempted to access a non local key") != std::string::npos ||
      reply.str.find("while the cluster is down") != std::string::npos ||
      reply.str.find("Script attempted to access a slot not served") != std::string::npos) {
    return ClusterRefusal::kMapStale;
  }
  return ClusterRefusal::kNone;
}

}  // namespace sluice::redis
