#include "support/redis_cluster.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <thread>

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// Replicas sync at once (the default waits 5 s for more replicas): a replica that has not synced
// never takes over.
std::unique_ptr<RedisServer> StartNode() {
  return RedisServer::Start({"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                             "--cluster-node-timeout", "1000", "--repl-diskless-sync-delay", "0"});
}

}  // namespace

// One line of CLUSTER NODES: "<id> <ip:port@cport[,hostname]> <flags> <master id> <ping> <pong>
// <epoch> <link> <slot ranges...>".
struct RedisCluster::NodeLine {
  std::string id;
  int port = 0;
  bool master = false;
  bool failed = false;
  std::string master_id;
  std::vector<std::pair<int, int>> slots;

  static NodeLine Parse(const std::string& line) {
    std::istringstream in(line);
    NodeLine node;
    std::string address, flags, ignored;
    in >> node.id >> address >> flags >> node.master_id;
    for (int i = 0; i < 4; ++i) in >> ignored;
    const auto colon = address.find(':');
    if (colon != std::string::npos) node.port = std::atoi(address.c_str() + colon + 1);
    node.master = flags.find("master") != std::string::npos;
    node.failed = flags.find("fail") != std::string::npos;  // fail, fail? (suspected)
    for (std::string range; in >> range;) {
      if (range.starts_with("[")) continue;  // a slot being migrated or imported
      const auto dash = range.find('-');
      const int first = std::atoi(range.c_str());
      const int last = dash == std::string::npos ? first : std::atoi(range.c_str() + dash + 1);
      node.slots.emplace_back(first, last);
    }
    return node;
  }

  bool Serves(int slot) const {
    return std::any_of(slots.begin(), slots.end(),
                       [slot](auto r) { return r.first <= slot && slot <= r.second; });
  }
};

std::unique_ptr<RedisCluster> RedisCluster::Start(int masters, int replicas_per_master) {
  std::unique_ptr<RedisCluster> cluster(new RedisCluster());
  cluster->masters_ = masters;
  const int nodes = masters * (1 + replicas_per_master);
  std::vector<std::string> create = {"--cluster", "create"};
  for (int i = 0; i < nodes; ++i) {
    auto server = StartNode();
    if (server == nullptr) return nullptr;
    create.push_back("127.0.0.1:" + std::to_string(server->port()));
    cluster->servers_.push_back(std::move(server));
  }
  create.insert(create.end(),
                {"--cluster-replicas", std::to_string(replicas_per_master), "--cluster-yes"});
  const std::string out = cluster->servers_.front()->Cli(create);
  if (out.find("[OK] All 16384 slots covered") == std::string::npos) {
    std::fprintf(stderr, "RedisCluster: redis-cli --cluster create failed:\n%s\n", out.c_str());
    return nullptr;
  }
  if (!cluster->WaitHealthy(30s, masters)) {
    std::fprintf(stderr, "RedisCluster: the cluster did not become healthy within 30 s\n");
    return nullptr;
  }
  if (!cluster->WaitReplicasKnown(10s, masters * replicas_per_master)) {
    std::fprintf(stderr, "RedisCluster: the cluster did not list its replicas within 10 s\n");
    return nullptr;
  }
  return cluster;
}

std::string RedisCluster::url() const {
  std::string url = "redis+cluster://";
  for (size_t i = 0; i < servers_.size(); ++i) {
    url += (i == 0 ? "" : ",") + std::string("127.0.0.1:") + std::to_string(servers_[i]->port());
  }
  return url;
}

std::vector<int> RedisCluster::ports() const {
  std::vector<int> ports;
  for (const auto& s : servers_) ports.push_back(s->port());
  return ports;
}

const RedisServer* RedisCluster::Server(int port) const {
  for (const auto& s : servers_) {
    if (s->port() == port) return s.get();
  }
  return nullptr;
}

std::string RedisCluster::Cli(int port, const std::vector<std::string>& args) const {
  const RedisServer* server = Server(port);
  return server == nullptr ? "no such node" : server->Cli(args);
}

// From the first live node that answers.
std::vector<RedisCluster::NodeLine> RedisCluster::Nodes() const {
  for (const auto& s : servers_) {
    if (s->pid() <= 0) continue;
    const std::string out = s->Cli({"CLUSTER", "NODES"});
    if (out.find("myself") == std::string::npos) continue;
    std::vector<NodeLine> nodes;
    for (const auto& line : Lines(out)) nodes.push_back(NodeLine::Parse(line));
    return nodes;
  }
  return {};
}

std::vector<int> RedisCluster::MasterPorts() const {
  std::vector<int> ports;
  for (const auto& n : Nodes()) {
    if (n.master && !n.failed && !n.slots.empty()) ports.push_back(n.port);
  }
  return ports;
}

int RedisCluster::MasterOfSlot(int slot) const {
  for (const auto& n : Nodes()) {
    if (n.master && !n.failed && n.Serves(slot)) return n.port;
  }
  return 0;
}

int RedisCluster::ReplicaOf(int master_port) const {
  const auto nodes = Nodes();
  const std::string id = IdOf(master_port);
  for (const auto& n : nodes) {
    if (!n.master && !n.failed && n.master_id == id) return n.port;
  }
  return 0;
}

std::string RedisCluster::IdOf(int port) const { return Cli(port, {"CLUSTER", "MYID"}); }

bool RedisCluster::BeginSlotMigration(int slot, int to_port) {
  const int from = MasterOfSlot(slot);
  if (from == 0 || from == to_port) {
    std::fprintf(stderr, "RedisCluster: slot %d is served by %d, cannot move it to %d\n", slot,
                 from, to_port);
    return false;
  }
  migration_ = {slot, from, to_port};
  const std::string s = std::to_string(slot);
  const std::string importing = Cli(to_port, {"CLUSTER", "SETSLOT", s, "IMPORTING", IdOf(from)});
  const std::string migrating = Cli(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", IdOf(to_port)});
  if (importing != "OK" || migrating != "OK") {
    std::fprintf(stderr, "RedisCluster: SETSLOT IMPORTING/MIGRATING: %s / %s\n", importing.c_str(),
                 migrating.c_str());
    return false;
  }
  return true;
}

bool RedisCluster::Migrate(const std::vector<std::string>& keys) {
  std::vector<std::string> migrate = {
      "MIGRATE", "127.0.0.1", std::to_string(migration_.to), "", "0", "5000", "KEYS"};
  migrate.insert(migrate.end(), keys.begin(), keys.end());
  const std::string out = Cli(migration_.from, migrate);
  // NOKEY: the keys expired or were deleted since they were listed.
  if (out != "OK" && out != "NOKEY") {
    std::fprintf(stderr, "RedisCluster: MIGRATE: %s\n", out.c_str());
    return false;
  }
  return true;
}

bool RedisCluster::MigrateSlotKeys(int slot) {
  if (migration_.slot != slot) return false;
  const std::string s = std::to_string(slot);
  for (int batch = 0; batch < 10'000; ++batch) {
    const auto keys = Lines(Cli(migration_.from, {"CLUSTER", "GETKEYSINSLOT", s, "100"}));
    if (keys.empty()) return true;
    if (!Migrate(keys)) return false;
  }
  return false;
}

bool RedisCluster::MigrateKeys(const std::vector<std::string>& keys) {
  if (migration_.slot < 0 || keys.empty()) return false;
  return Migrate(keys);
}

bool RedisCluster::EndSlotMigration(int slot) {
  if (migration_.slot != slot) return false;
  const std::vector<std::string> assign = {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE",
                                           IdOf(migration_.to)};
  // The target first, then the source (so it stops redirecting with ASK), then the others.
  std::vector<int> order = {migration_.to, migration_.from};
  for (int port : MasterPorts()) {
    if (port != migration_.to && port != migration_.from) order.push_back(port);
  }
  for (int port : order) {
    const std::string out = Cli(port, assign);
    // A master that gave away its last slot may already have turned into a replica of the node
    // that took it (cluster-allow-replica-migration); it learns the new owner by gossip.
    if (port != migration_.to && out.find("only with masters") != std::string::npos) continue;
    if (out != "OK") {
      std::fprintf(stderr, "RedisCluster: SETSLOT NODE on %d: %s\n", port, out.c_str());
      return false;
    }
  }
  migration_ = {};
  return true;
}

bool RedisCluster::Failover(int replica_port) {
  const std::string out = Cli(replica_port, {"CLUSTER", "FAILOVER"});
  if (out != "OK") {
    std::fprintf(stderr, "RedisCluster: CLUSTER FAILOVER: %s\n", out.c_str());
    return false;
  }
  const auto until = Steady::now() + 15s;
  while (Steady::now() < until) {
    const auto role = Lines(Cli(replica_port, {"ROLE"}));
    if (!role.empty() && role.front() == "master") {
      return WaitHealthy(
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Steady::now()), masters_);
    }
    std::this_thread::sleep_for(20ms);
  }
  std::fprintf(stderr, "RedisCluster: %d did not become a master\n", replica_port);
  return false;
}

void RedisCluster::Kill(int port) {
  for (auto& s : servers_) {
    if (s->port() == port) s->Kill();
  }
}

int RedisCluster::AddMaster() {
  auto server = StartNode();
  if (server == nullptr) return 0;
  const int port = server->port();
  const std::string joined = "127.0.0.1:" + std::to_string(port);
  int existing = 0;
  for (const auto& s : servers_) {
    if (s->pid() > 0) existing = s->port();
  }
  const std::string out =
      server->Cli({"--cluster", "add-node", joined, "127.0.0.1:" + std::to_string(existing)});
  if (out.find("[OK] New node added correctly") == std::string::npos) {
    std::fprintf(stderr, "RedisCluster: add-node failed:\n%s\n", out.c_str());
    return 0;
  }
  servers_.push_back(std::move(server));
  const std::string id = IdOf(port);
  const auto until = Steady::now() + 10s;
  while (Steady::now() < until) {
    const auto nodes = Nodes();
    const bool known = std::any_of(nodes.begin(), nodes.end(),
                                   [&](const NodeLine& n) { return n.id == id && n.master; });
    if (known && Cli(port, {"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos) {
      return port;
    }
    std::this_thread::sleep_for(50ms);
  }
  std::fprintf(stderr, "RedisCluster: the cluster did not take in %d within 10 s\n", port);
  return 0;
}

bool RedisCluster::RemoveNode(int port) {
  int other = 0;
  for (const auto& s : servers_) {
    if (s->pid() > 0 && s->port() != port) other = s->port();
  }
  const std::string out =
      Cli(other, {"--cluster", "del-node", "127.0.0.1:" + std::to_string(other), IdOf(port)});
  if (out.find("Sending CLUSTER FORGET") == std::string::npos) {
    std::fprintf(stderr, "RedisCluster: del-node failed:\n%s\n", out.c_str());
    return false;
  }
  Kill(port);
  return true;
}

bool RedisCluster::WaitReplicasKnown(std::chrono::milliseconds timeout, int replicas) const {
  const auto until = Steady::now() + timeout;
  while (true) {
    const auto nodes = Nodes();
    const auto attached = std::count_if(nodes.begin(), nodes.end(), [&nodes](const NodeLine& n) {
      return !n.master && !n.failed &&
             std::any_of(nodes.begin(), nodes.end(), [&n](const NodeLine& m) {
               return m.master && !m.failed && m.id == n.master_id;
             });
    });
    if (attached == replicas) return true;
    if (Steady::now() >= until) return false;
    std::this_thread::sleep_for(50ms);
  }
}

bool RedisCluster::WaitHealthy(std::chrono::milliseconds timeout, int masters) {
  const auto until = Steady::now() + timeout;
  while (true) {
    bool healthy = static_cast<int>(MasterPorts().size()) == masters;
    for (const auto& s : servers_) {
      if (!healthy) break;
      if (s->pid() <= 0) continue;
      healthy = s->Cli({"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos;
      const std::string replication = s->Cli({"INFO", "replication"});
      if (healthy && replication.find("role:slave") != std::string::npos) {
        healthy = replication.find("master_link_status:up") != std::string::npos;
      }
    }
    if (healthy) return true;
    if (Steady::now() >= until) return false;
    std::this_thread::sleep_for(50ms);
  }
}

}  // namespace sluice::testing
