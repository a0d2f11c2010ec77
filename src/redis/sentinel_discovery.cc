// SentinelClient's discovery: which server the sentinels name as the master (or the replica
// they are promoting, or the master a +switch-master announced), and a Client of it once the
// server says it is one.
#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "redis/connection.h"
#include "redis/sentinel_alarm.h"
#include "redis/sentinel_client.h"
#include "redis/sentinel_link.h"

namespace sluice::redis {

bool SentinelClient::Discover() {
  const auto now = std::chrono::steady_clock::now();
  last_discovery_ = now;
  discover_now_ = false;
  const SentinelOptions& sentinel = options_.sentinel;
  const Duration timeout = sentinel.master.connect_timeout;
  std::string host;
  int port = 0;
  const auto take = [&](const std::string& address) {
    const auto colon = address.rfind(':');
    host = address.substr(0, colon);
    port = std::atoi(address.c_str() + colon + 1);
  };
  if (!announced_.empty()) {
    take(announced_);
    announced_.clear();
    promotion_.reset();
  } else if (promotion_) {
    bool refused = false;  // the promoted server, taken, has since refused a write: not a master
    {
      base::MutexLock lock(mu_);
      refused = master_.address == promotion_->address &&
                master_.client.get() == alarm_->readonly.load(std::memory_order_acquire);
    }
    if (refused || now >= promotion_->until) {
      promotion_.reset();
    } else {
      take(promotion_->address);
    }
  }
  std::string why;
  for (size_t i = 0; i < sentinels_.size() && port == 0; ++i) {
    auto link = SentinelLink::Connect(sentinels_[i], access_, timeout);
    if (!link.ok()) {
      why = link.status().message();
      continue;
    }
    const std::string_view ask[] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", sentinel.master_name};
    auto reply = (*link)->Call(ask, timeout);
    if (!reply.ok() || reply->type != Reply::Type::kArray || reply->elements.size() != 2) {
      why = !reply.ok()         ? reply.status().message()
            : reply->is_error() ? "sentinel " + sentinels_[i] + " refused: " + reply->str
                                : "sentinel " + sentinels_[i] + " knows no master by that name";
      continue;
    }
    const std::string& port_text = reply->elements[1].str;
    const auto [end, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port <= 0 ||
        port > 65535) {
      port = 0;
      continue;
    }
    host = reply->elements[0].str;
    std::rotate(sentinels_.begin(), sentinels_.begin() + static_cast<std::ptrdiff_t>(i),
                sentinels_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
  }
  if (port == 0) {
    Failed(std::move(why));
    return Target() != nullptr;
  }
  const std::string address = host + ":" + std::to_string(port);
  {
    base::MutexLock lock(mu_);
    if (master_.client != nullptr && master_.address == address &&
        master_.client.get() != alarm_->readonly.load(std::memory_order_acquire)) {
      return true;
    }
  }
  // Why the server cannot be the master; empty when it can. A replica being promoted is asked on
  // the link kept to it before it is given a Client.
  std::string unusable = promotion_ ? ProbePromotion() : std::string();
  ClientOptions options = sentinel.master;
  options.host = host;
  options.port = port;
  options.unix_path.clear();
  options.require_master = true;
  if (options.tls != nullptr) options.tls_server_name = TlsNameFor(host, options.tls_server_name);
  std::shared_ptr<Client> client;
  if (unusable.empty()) {
    if (auto created = Client::Create(std::move(options), threads_); !created.ok()) {
      unusable = "cannot be used: " + created.status().message();
    } else {
      // A connection's handshake asked ROLE (require_master): one that is ready was answered
      // by a master.
      client = std::move(*created);
      if (const Status connected = client->Connected(); !connected.ok()) {
        unusable = "cannot be used: " + connected.message();
      }
    }
  }
  if (!unusable.empty()) {
    if (promotion_) {
      // Not promoted yet: asked again shortly; the master in use, if any, stays until then.
      discover_now_ = true;
      Failed("the replica the sentinels promote, " + address + ", " + unusable);
      return Target() != nullptr;
    }
    Failed("the master the sentinels name, " + address + ", " + unusable);
    return false;
  }
  Master replaced;
  {
    base::MutexLock lock(mu_);
    last_failure_.clear();
    replaced = std::exchange(master_, Master{client, address});
    const Client* stale = replaced.client.get();
    alarm_->readonly.compare_exchange_strong(stale, nullptr);
    if (replaced.client != nullptr) ++stats_.switches;
  }
  if (replaced.client != nullptr) {
    retired_.emplace_back(std::move(replaced.client), std::chrono::steady_clock::now());
  }
  return true;
}

std::string SentinelClient::ProbePromotion() {
  const Duration timeout = options_.sentinel.master.connect_timeout;
  Promotion& promotion = *promotion_;
  if (promotion.probe == nullptr) {
    auto link = SentinelLink::Connect(promotion.address, master_access_, timeout);
    if (!link.ok()) return "cannot be used: " + link.status().message();
    promotion.probe = std::move(*link);
  }
  const std::string_view role[] = {"ROLE"};
  const auto reply = promotion.probe->Call(role, timeout);
  if (!reply.ok()) {
    promotion.probe.reset();
    return "cannot be used: " + reply.status().message();
  }
  if (reply->is_error()) return "refused ROLE: " + reply->str;
  return IsMasterRole(*reply) ? "" : "is not one (ROLE)";
}

}  // namespace sluice::redis
