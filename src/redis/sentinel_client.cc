#include "redis/sentinel_client.h"

#include <poll.h>

#include <algorithm>

#include "redis/sentinel_alarm.h"
#include "redis/sentinel_link.h"

namespace sluice::redis {
namespace {

constexpr std::string_view kSwitchMaster = "+switch-master";
constexpr std::string_view kWaitPromotion = "+failover-state-wait-promotion";
// The space-separated words of a sentinel's message.
std::vector<std::string_view> Words(std::string_view text) {
  std::vector<std::string_view> words;
  while (!text.empty()) {
    const auto space = text.find(' ');
    words.push_back(text.substr(0, space));
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
  }
  return words;
}

// How long a replaced master's Client is kept after its replacement, for the calls being
// submitted to it when it was replaced.
constexpr auto kRetiredGrace = std::chrono::seconds(1);

}  // namespace

Result<std::unique_ptr<SentinelClient>> SentinelClient::Create(SentinelClientOptions options) {
  const SentinelOptions& sentinel = options.sentinel;
  if (sentinel.sentinels.empty()) return Status::InvalidArgument("no sentinel to ask");
  if (sentinel.master_name.empty()) {
    return Status::InvalidArgument("the master's name is missing (the sentinels' monitor name)");
  }
  if (sentinel.tls != (sentinel.master.tls != nullptr)) {
    return Status::InvalidArgument(
        "rediss+sentinel:// needs the TLS context of the master's options, and only it has one");
  }
  if (!sentinel.sentinel_user.empty() && sentinel.sentinel_password.empty()) {
    return Status::InvalidArgument("a sentinel user needs its password");
  }
  if (sentinel.master.timeout.count() <= 0 || sentinel.master.connect_timeout.count() <= 0) {
    return Status::InvalidArgument("Redis timeouts must be positive");
  }
  if (sentinel.master.connections_per_thread < 1) {
    return Status::InvalidArgument("a Redis client needs at least one connection per thread");
  }
  if (options.recheck_interval.count() <= 0 || options.rediscover_min_gap.count() <= 0 ||
      options.promotion_wait.count() <= 0) {
    return Status::InvalidArgument("the sentinel intervals must be positive");
  }
  std::unique_ptr<SentinelClient> client(
      new SentinelClient(std::move(options), std::make_shared<Alarm>()));
  client->Discover();
  client->thread_ = std::thread([c = client.get()] { c->Run(); });
  return client;
}

SentinelClient::SentinelClient(SentinelClientOptions options, std::shared_ptr<Alarm> alarm)
    : ForwardingClient(WatchFor(alarm)),
      options_(std::move(options)),
      threads_(std::make_shared<IoThreads>(std::max(1, options_.sentinel.master.io_threads))),
      alarm_(std::move(alarm)),
      access_{.user = options_.sentinel.sentinel_user,
              .password = options_.sentinel.sentinel_password,
              .tls = options_.sentinel.master.tls,
              .tls_server_name = options_.sentinel.master.tls_server_name},
      master_access_{.peer = "server",
                     .user = options_.sentinel.master.user,
                     .password = options_.sentinel.master.password,
                     .tls = options_.sentinel.master.tls,
                     .tls_server_name = options_.sentinel.master.tls_server_name},
      sentinels_(options_.sentinel.sentinels) {
  for (const std::string& address : sentinels_) {
    subscriptions_.emplace_back().address = address;
  }
}

SentinelClient::~SentinelClient() {
  stop_.store(true);
  alarm_->Raise();
  if (thread_.joinable()) thread_.join();
  subscriptions_.clear();
  Master last;
  {
    base::MutexLock lock(mu_);
    last = std::move(master_);
  }
  last.client.reset();
  ReleaseRetired(/*all=*/true);
}

ForwardingClient::ReplyWatch SentinelClient::WatchFor(std::shared_ptr<Alarm> alarm) {
  return [alarm = std::move(alarm)](const Client& from, const Result<Reply>& reply) {
    if (!reply.ok()) {
      if (reply.status().code() == StatusCode::kUnavailable) alarm->Raise();
    } else if (reply->is_error() && reply->str.starts_with("READONLY")) {
      alarm->readonly.store(&from, std::memory_order_release);
      alarm->Raise();
    }
  };
}

std::shared_ptr<Client> SentinelClient::Target() const {
  base::MutexLock lock(mu_);
  if (master_.client.get() == alarm_->readonly.load(std::memory_order_acquire)) return nullptr;
  return master_.client;
}

Status SentinelClient::NoTarget() const {
  std::string why;
  {
    base::MutexLock lock(mu_);
    why = last_failure_;
  }
  return Status::Unavailable("no Redis master known for '" + options_.sentinel.master_name +
                             "' (the sentinels are asked again)" + (why.empty() ? "" : ": ") + why);
}

void SentinelClient::Failed(std::string why) {
  base::MutexLock lock(mu_);
  last_failure_ = std::move(why);
}

std::string SentinelClient::AddressOf(uint32_t id) const {
  if (id != 0) return {};
  base::MutexLock lock(mu_);
  return master_.address;
}

SentinelStats SentinelClient::sentinel_stats() const {
  base::MutexLock lock(mu_);
  SentinelStats stats = stats_;
  stats.master = master_.client == nullptr ? "" : master_.address;
  return stats;
}

void SentinelClient::Subscribe(Subscription& subscription) {
  const auto now = std::chrono::steady_clock::now();
  if (now < subscription.next_attempt) return;
  subscription.next_attempt = now + options_.recheck_interval;  // a sentinel down: not at once
  const Duration timeout = options_.sentinel.master.connect_timeout;
  auto link = SentinelLink::Connect(subscription.address, access_, timeout);
  if (!link.ok()) return;
  const std::string_view both[] = {"SUBSCRIBE", kSwitchMaster, kWaitPromotion};
  auto confirmed = (*link)->Call(both, timeout);
  if (confirmed.ok() && confirmed->is_error()) {
    // A sentinel user whose ACL lacks the promotions' channel follows failovers at +switch-master.
    const std::string_view switches[] = {"SUBSCRIBE", kSwitchMaster};
    confirmed = (*link)->Call(switches, timeout);
  }
  if (confirmed.ok() && confirmed->type == Reply::Type::kArray && !confirmed->elements.empty() &&
      confirmed->elements[0].str == "subscribe") {
    subscription.link = std::move(*link);
    subscription.last_read = std::chrono::steady_clock::now();
    discover_now_ = true;  // a switch announced while no link was subscribed
  }
}

void SentinelClient::ReadMessages(Subscription& subscription) {
  while (subscription.link != nullptr) {
    auto next = subscription.link->Next(Duration::zero());
    if (!next.ok()) {
      subscription.link.reset();
      discover_now_ = true;
      return;
    }
    if (!next->has_value()) return;
    subscription.last_read = std::chrono::steady_clock::now();
    const Reply& message = **next;
    if (message.type != Reply::Type::kArray || message.elements.size() != 3 ||
        message.elements[0].str != "message") {
      continue;  // PING's pong, the second channel's confirmation
    }
    const std::vector<std::string_view> words = Words(message.elements[2].str);
    if (message.elements[1].str == kWaitPromotion) {
      // "slave <ip>:<port> <ip> <port> @ <master name> <master ip> <master port>"
      if (words.size() != 8 || words[0] != "slave" || words[4] != "@" ||
          words[5] != options_.sentinel.master_name) {
        continue;
      }
      {
        base::MutexLock lock(mu_);
        ++stats_.promotions;
      }
      promotion_ = Promotion{.address = std::string(words[2]) + ":" + std::string(words[3]),
                             .until = std::chrono::steady_clock::now() + options_.promotion_wait,
                             .probe = nullptr};
      discover_now_ = true;
      last_discovery_ = {};
      continue;
    }
    // "<master name> <old ip> <old port> <new ip> <new port>"
    if (message.elements[1].str != kSwitchMaster || words.size() != 5 ||
        words[0] != options_.sentinel.master_name) {
      continue;
    }
    {
      base::MutexLock lock(mu_);
      ++stats_.announcements;
    }
    announced_ = std::string(words[3]) + ":" + std::string(words[4]);
    // It knows the newest configuration: ask it first from now on, and not one that has yet to
    // hear of the switch (which would name the old master, still one until it is reconfigured).
    if (auto it = std::find(sentinels_.begin(), sentinels_.end(), subscription.address);
        it != sentinels_.end()) {
      std::rotate(sentinels_.begin(), it, it + 1);
    }
    discover_now_ = true;
    last_discovery_ = {};  // at once, whatever the gap since the last
  }
}

void SentinelClient::ReleaseRetired(bool all) {
  const auto now = std::chrono::steady_clock::now();
  for (auto it = retired_.begin(); it != retired_.end();) {
    if (!all && (it->first.use_count() > 1 || now - it->second < kRetiredGrace)) {
      ++it;
      continue;
    }
    const Client* gone = it->first.get();
    it = retired_.erase(it);
    // Its address may be a new client's now.
    alarm_->readonly.compare_exchange_strong(gone, nullptr);
  }
}

void SentinelClient::Run() {
  using std::chrono::steady_clock;
  const auto cap = std::chrono::milliseconds(100);
  std::vector<pollfd> fds;
  std::vector<Subscription*> polled;
  while (!stop_.load()) {
    auto now = steady_clock::now();
    const bool recheck = now - last_discovery_ >= options_.recheck_interval;
    if ((discover_now_ || recheck) && now - last_discovery_ >= options_.rediscover_min_gap) {
      if (!Discover()) discover_now_ = true;
      for (Subscription& s : subscriptions_) {
        const std::string_view ping[] = {"PING"};
        if (recheck && s.link != nullptr &&
            !s.link->Send(ping, options_.sentinel.master.connect_timeout).ok()) {
          s.link.reset();
        }
      }
    }
    if (stop_.load()) break;
    for (Subscription& s : subscriptions_) {
      if (s.link == nullptr) {
        Subscribe(s);
      } else if (steady_clock::now() - s.last_read > 3 * options_.recheck_interval) {
        s.link.reset();  // a sentinel that answers no PING
      }
    }
    ReleaseRetired(/*all=*/false);

    now = steady_clock::now();
    const auto next =
        last_discovery_ + (discover_now_ ? options_.rediscover_min_gap : options_.recheck_interval);
    const auto wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(next - now),
                                 std::chrono::milliseconds(0), cap);
    fds.assign(1, pollfd{.fd = alarm_->fd, .events = POLLIN, .revents = 0});
    polled.clear();
    for (Subscription& s : subscriptions_) {
      if (s.link == nullptr) continue;
      fds.push_back(pollfd{.fd = s.link->fd(), .events = POLLIN, .revents = 0});
      polled.push_back(&s);
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(wait.count())) <= 0) continue;
    if (fds[0].revents != 0) {
      alarm_->Clear();
      discover_now_ = true;
    }
    for (size_t i = 0; i < polled.size(); ++i) {
      if (fds[i + 1].revents != 0) ReadMessages(*polled[i]);
    }
  }
}

}  // namespace sluice::redis
