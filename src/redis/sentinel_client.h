// SentinelClient: the redis::Client interface over a Redis master that Redis Sentinel watches.
// It asks the sentinels, in order, for the master's address (SENTINEL GET-MASTER-ADDR-BY-NAME;
// the one that answers is asked first next time), and sends every call to a single-node Client
// of that address whose connections are used only once the server has said ROLE master
// (ClientOptions::require_master): no call ever reaches a replica, even on a connection to the
// old address re-established after a failover. It follows failovers:
//   - it is subscribed to +switch-master on every sentinel (re-subscribing when a link drops or
//     stops answering PING), and takes the master the first announcement names (once it has
//     said ROLE master);
//   - it is also subscribed to +failover-state-wait-promotion, which the sentinels' leader
//     publishes once it has told a replica of this master to become one (REPLICAOF NO ONE). It
//     takes that replica as soon as it says ROLE master, without waiting for +switch-master (a
//     second or more later): writes to the old master after the promotion are lost when it is
//     reconfigured as a replica. Until then it asks the replica for its ROLE on one link kept to
//     it, and makes the replica's Client (connections on every I/O thread) only once it is a
//     master: a failover that never completes costs the replica one connection. Until
//     +switch-master, for at most promotion_wait, the sentinels are not asked (they still name the
//     old master); the old master stays in use until the replica says master. A sentinel user
//     without that channel (an older ACL) follows failovers at +switch-master;
//   - it asks again whenever the master refuses a call with READONLY (that Client is then no
//     longer used) or a call fails with UNAVAILABLE (a connection lost), at most every
//     rediscover_min_gap, and every recheck_interval in any case.
// While no verified master is known (between a master's loss and the sentinels' announcement of
// the new one), calls fail at once with UNAVAILABLE, as while a single Redis is down: the
// deadline and the caller's failure policy decide, nothing is retried.
//
// Thread safety: as redis::Client. A thread of its own asks the sentinels and holds the
// subscriptions (blocking, bounded waits); a replaced master's Client is destroyed there once no
// call uses it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "redis/forwarding_client.h"
#include "redis/io_threads.h"
#include "redis/sentinel_link.h"
#include "redis/url.h"

namespace sluice::redis {

struct SentinelClientOptions {
  SentinelOptions sentinel;
  Duration recheck_interval = std::chrono::seconds(1);
  Duration rediscover_min_gap = std::chrono::milliseconds(20);
  // How long a promotion the sentinels' leader announced is followed without +switch-master.
  Duration promotion_wait = std::chrono::seconds(30);
};

struct SentinelStats {
  uint64_t switches = 0;       // masters taken into use after the first
  uint64_t announcements = 0;  // +switch-master messages for this master
  uint64_t promotions = 0;     // +failover-state-wait-promotion messages for this master
  std::string master;          // "host:port" in use; empty when none is
};

// Every call goes to the master in use (ForwardingClient).
class SentinelClient final : public ForwardingClient {
 public:
  // Asks the sentinels and connects to the master, waiting up to connect_timeout for each; when
  // none answers yet, goes on trying in the background. Fails only on bad options.
  static Result<std::unique_ptr<SentinelClient>> Create(SentinelClientOptions options);
  ~SentinelClient() override;

  // The master in use, "host:port" (empty while none is).
  std::string AddressOf(uint32_t id) const override;
  SentinelStats sentinel_stats() const;

 private:
  struct Alarm;
  struct Master {
    std::shared_ptr<Client> client;
    std::string address;
  };

  SentinelClient(SentinelClientOptions options, std::shared_ptr<Alarm> alarm);
  // Notes what a reply says of the master (READONLY, UNAVAILABLE) in `alarm`.
  static ReplyWatch WatchFor(std::shared_ptr<Alarm> alarm);
  // The master to send a call to; null while none is verified.
  std::shared_ptr<Client> Target() const override;
  // UNAVAILABLE, with why no master is known.
  Status NoTarget() const override;
  void Failed(std::string why);

  // A +switch-master subscription on one sentinel, re-made when it drops.
  struct Subscription {
    std::string address;
    std::unique_ptr<SentinelLink> link;
    std::chrono::steady_clock::time_point last_read{}, next_attempt{};
  };

  // The sentinels' thread.
  void Run();
  // Puts a verified master in use: the one last announced by +switch-master if any, else the one
  // the sentinels name; false when none is in use.
  bool Discover();
  // Asks the replica being promoted for its ROLE on the link kept to it; empty once it says
  // master, else why it cannot be taken yet.
  std::string ProbePromotion();
  void Subscribe(Subscription& subscription);
  void ReadMessages(Subscription& subscription);
  void ReleaseRetired(bool all);

  const SentinelClientOptions options_;
  const std::shared_ptr<IoThreads> threads_;
  const std::shared_ptr<Alarm> alarm_;
  mutable base::Mutex mu_;
  Master master_ SLUICE_GUARDED_BY(mu_);
  SentinelStats stats_ SLUICE_GUARDED_BY(mu_);
  // Why the last search for the master failed; empty once one is found.
  std::string last_failure_ SLUICE_GUARDED_BY(mu_);
  const SentinelAccess access_;
  const SentinelAccess master_access_;  // the data servers', for ProbePromotion

  // The sentinels' thread only.
  std::vector<std::string> sentinels_;  // the one that answered last first
  // On every sentinel: the first to announce a switch is the first heard.
  std::vector<Subscription> subscriptions_;
  std::string announced_;  // "host:port" of the last +switch-master not yet acted on
  // The replica the sentinels' leader is promoting ("host:port"), followed until `until`.
  struct Promotion {
    std::string address;
    std::chrono::steady_clock::time_point until;
    std::unique_ptr<SentinelLink> probe;  // to `address`, once connected
  };
  std::optional<Promotion> promotion_;
  std::vector<std::pair<std::shared_ptr<Client>, std::chrono::steady_clock::time_point>> retired_;
  bool discover_now_ = true;
  std::chrono::steady_clock::time_point last_discovery_{};

  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sluice::redis
