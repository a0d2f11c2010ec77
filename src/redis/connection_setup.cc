// A connection's life on its socket: connecting (TCP or a Unix socket, then TLS), the handshake
// before any caller's command (AUTH, SELECT, the role when asked), dropping with every call
// failed, and reconnecting with backoff.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "redis/backoff.h"
#include "redis/connection.h"

namespace sluice::redis {

bool IsMasterRole(const Reply& role) {
  return role.type == Reply::Type::kArray && !role.elements.empty() &&
         role.elements[0].str == "master";
}

void Connection::Connect() {
  if (stopping_) return;
  ++generation_;
  transport_.Close();
  connect_timer_.expires_after(options_.connect_timeout);
  connect_timer_.async_wait(
      [this, self = shared_from_this(), gen = generation_](boost::system::error_code ec) {
        if (ec || gen != generation_ || ConnectedOnIoThread()) return;
        resolver_.cancel();
        transport_.Close();
      });
  if (!options_.unix_path.empty()) {
    return ConnectTo({Endpoint(asio::local::stream_protocol::endpoint(options_.unix_path))});
  }
  resolver_.async_resolve(
      options_.host, std::to_string(options_.port),
      [this, self = shared_from_this(), gen = generation_](
          boost::system::error_code ec, asio::ip::tcp::resolver::results_type results) {
        if (gen != generation_) return;
        if (ec) return ConnectFailed("cannot resolve " + options_.host + ": " + ec.message());
        std::vector<Endpoint> endpoints;
        for (const auto& r : results) endpoints.emplace_back(r.endpoint());
        ConnectTo(std::move(endpoints));
      });
}

void Connection::ConnectTo(std::vector<Endpoint> endpoints, size_t next) {
  if (next >= endpoints.size()) return ConnectFailed("cannot connect to " + Address());
  transport_.Reset(options_.tls.get(), options_.tls_server_name);
  transport_.socket().async_connect(
      endpoints[next], [this, self = shared_from_this(), gen = generation_, endpoints,
                        next](boost::system::error_code ec) mutable {
        if (gen != generation_) return;
        if (ec == asio::error::operation_aborted) {
          return ConnectFailed("connecting to " + Address() + " timed out");
        }
        if (ec) return ConnectTo(std::move(endpoints), next + 1);
        Secure();
      });
}

void Connection::Secure() {
  if (options_.unix_path.empty()) {
    const int one = 1;
    setsockopt(transport_.socket().native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (!transport_.tls()) return Connected();
  transport_.AsyncHandshake(
      [this, self = shared_from_this(), gen = generation_](boost::system::error_code ec) {
        if (gen != generation_) return;
        if (ec == asio::error::operation_aborted) {
          return ConnectFailed("TLS handshake with " + Address() + " timed out");
        }
        if (ec) return ConnectFailed(transport_.HandshakeError(ec));
        Connected();
      });
}

void Connection::Connected() {
  {
    base::MutexLock lock(mu_);
    connected_ = true;
  }
  last_read_ = Steady::now();
  Read();
  Handshake();
}

// AUTH, SELECT and a PING, before any caller's command; ready once all have answered.
void Connection::Handshake() {
  std::vector<std::vector<std::string_view>> commands;
  if (!options_.password.empty()) {
    if (options_.user.empty()) {
      commands.push_back({"AUTH", options_.password});
    } else {
      commands.push_back({"AUTH", options_.user, options_.password});
    }
  }
  const std::string db = std::to_string(options_.db);
  if (options_.db != 0) commands.push_back({"SELECT", db});
  if (options_.require_master) commands.push_back({"ROLE"});
  commands.push_back({"PING"});

  std::string bytes;
  std::vector<Pending> entries(commands.size());
  const auto deadline = Steady::now() + options_.connect_timeout;
  auto failed = std::make_shared<bool>(false);
  for (size_t i = 0; i < commands.size(); ++i) {
    AppendCommand(commands[i], bytes);
    entries[i].deadline = deadline;
    entries[i].out_of_order = true;  // connect_timeout's deadline, not in the calls' order
    entries[i].done = [this, failed, gen = generation_, last = i + 1 == commands.size(),
                       what = std::string(commands[i][0])](Result<Reply> r) {
      if (gen != generation_ || *failed) return;
      const bool not_master = what == "ROLE" && r.ok() && !IsMasterRole(*r);
      if (!r.ok() || r->is_error() || not_master) {
        *failed = true;
        const std::string why = not_master ? "the server is not a master (a replica now?)"
                                : r.ok()   ? r->str
                                           : r.status().message();
        // Not from inside the reply loop: drop the connection on the next turn.
        asio::post(io_, [this, self = shared_from_this(), gen, why, what] {
          if (gen == generation_) Disconnect(what + " failed: " + why);
        });
        return;
      }
      if (last) {
        backoff_ = options_.reconnect_min;
        connects_.fetch_add(1, std::memory_order_relaxed);
        base::MutexLock lock(mu_);  // see Submit
        ready_.store(true, std::memory_order_release);
      }
    };
  }
  pending_.fetch_add(entries.size(), std::memory_order_relaxed);
  Enqueue(bytes, entries);
}

void Connection::ConnectFailed(const std::string& why) {
  SetError(why);
  connect_timer_.cancel();
  transport_.Close();
  ScheduleReconnect();
}

void Connection::Disconnect(const std::string& why) {
  SetError(why);
  Drop(Status::Unavailable("connection to Redis at " + Address() + " lost: " + why));
  ScheduleReconnect();
}

// Closes the socket and fails every call that has not been answered.
void Connection::Drop(const Status& status) {
  ++generation_;
  transport_.Close();
  reader_ = std::make_unique<ReplyReader>();
  writing_active_ = false;
  writing_.clear();
  write_failure_.clear();
  unsent_ = 0;
  holding_ = false;
  expire_after_read_ = false;
  out_of_order_in_flight_ = 0;
  loading_.clear();
  std::vector<Pending> taken;
  {
    base::MutexLock lock(mu_);
    ready_.store(false, std::memory_order_release);  // see Submit
    connected_ = false;
    CloseGroupLocked();
    taken.swap(incoming_);
    outgoing_.clear();
  }
  for (auto& p : inflight_) taken.push_back(std::move(p));
  inflight_.clear();
  FailAll(taken, status);
}

void Connection::FailAll(std::vector<Pending>& entries, const Status& status) {
  size_t slots = 0;
  for (const auto& p : entries) slots += p.slots();
  pending_.fetch_sub(slots, std::memory_order_relaxed);
  for (auto& p : entries) {
    if (p.finished || p.kind == Pending::Kind::kIgnoreReply) continue;
    if (p.members.empty()) {
      p.done(status);
      continue;
    }
    for (auto& m : p.members) {
      if (!m.finished) m.done(status);
    }
  }
}

void Connection::ScheduleReconnect() {
  if (stopping_) return;
  const ReconnectWait wait =
      NextReconnectWait(backoff_, options_.reconnect_min, options_.reconnect_max, jitter_);
  reconnect_timer_.expires_after(wait.delay);
  backoff_ = wait.backoff;
  reconnect_timer_.async_wait([this, self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) Connect();
  });
}

void Connection::SetError(const std::string& why) {
  base::MutexLock lock(error_mu_);
  last_error_ = why;
}

}  // namespace sluice::redis
