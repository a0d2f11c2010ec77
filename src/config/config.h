// The configuration of `sluice serve`: where to listen, which store to use, the HTTP server's
// knobs and the rule set, read from a YAML file:
//
//   listen: 127.0.0.1:8080
//   max_sliding_log_limit: 10000                                        # optional
//   store: { url: memory://, timeout_ms: 50, instances: 1, max_memory: 256MiB,
//            key_prefix: sluice, password_file: /run/secrets/redis }   # or password_env: NAME
//   server: { io_threads: 2, read_timeout: 10s, idle_timeout: 60s,       # optional
//             max_connections: 10000, max_waiters: 100000, max_waiters_per_key: 1000,
//             expose_keys: false, shadow_mode: false, admin_listen: 127.0.0.1:9090,
//             tls: { cert_file: tls.crt, key_file: tls.key,                 # optional: HTTPS
//                    client_ca_file: clients-ca.crt },                      # (config/tls_files.h)
//             auth: { callers: [ {name: checkout, token_sha256: <64 hex>,   # optional: who may
//                                 scopes: [check], rules: [api]},        # call (auth/callers.h)
//                                {name: envoy, client_san: [envoy.mesh], scopes: [check]} ] } }
//   rls: { config_dir: /etc/ratelimit, grpc_listen: 127.0.0.1:8081,    # optional: Envoy's
//          tls: { cert_file: rls.pem, key_file: rls.key,                 # (TLS: optional)
//                 client_ca_file: ca.pem, client_san: [envoy.mesh] },
//          shadow_mode: false, quota_mode: false,                        # rate limit service
//          x_ratelimit_headers: false, on_error: fail_open, watch: true } # (rls/front_end.h)
//   rules:
//     - { name: api, algorithm: gcra, limit: 100, period: 1m, burst: 20, on_error: fail_open,
//         max_waiters: 5000, max_waiters_per_key: 100,                   # the last four
//         shadow_mode: false, lease: { units: 10, lifetime: 100ms } }     # optional
//     - { name: per_client, algorithm: fixed_window, limit: 5, period: 1h,
//         key: [forwarded_for, uri], deny_status: 403 }                 # forward auth (optional)
//   forward_auth: { trusted_proxies: [127.0.0.1, 10.0.0.0/8],            # optional
//                   client_prefixes: { ipv4: 32, ipv6: 64 } }
//
// A rule in shadow mode (its own `shadow_mode`, by default the server's) is decided and counted as
// usual, and always admits: its answers carry the would-be verdict (http/api.h).
//
// A rule with a `lease` (fixed_window, token_bucket, leaky_bucket or gcra; `units` from 1 to the
// limit's capacity, `lifetime` from 1ms to 1m, by default 100ms) takes `units` at a time from a
// shared store and decides its hot keys' next checks in this process (sluice/leasing_store.h);
// on memory:// every check is decided in this process anyway, and the lease is ignored.
//
// Parsing is strict: an unknown or repeated field, a value of the wrong type, a duplicate rule
// name, a bad duration or a limit that Limit::Create rejects is an error whose message names the
// file, the line and the field ("sluice.yaml:7: rules[1].period: bad duration '1x': ...").
// Plain values; parsing is a pure function of the text, but for the password it reads
// (store.password_file, store.password_env).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/clock.h"
#include "sluice/limit.h"
#include "sluice/middleware/middleware.h"
#include "sluice/redis_tls.h"
#include "sluice/status.h"
#include "sluice/store.h"
#include "tls/server_files.h"

namespace sluice::config {

// Rule names appear in JSON, metric labels and RateLimit headers; keeping them to [A-Za-z0-9_.:-]
// means none of those ever needs to escape one.
inline constexpr size_t kMaxRuleNameBytes = 64;
// The largest bound on /v1/acquire waiters a config may set.
inline constexpr size_t kMaxWaitersBound = 10'000'000;
// The largest server.max_connections a config may set (each connection is a file descriptor).
inline constexpr size_t kMaxConnectionsBound = 1'000'000;
// The largest limit a sliding_log rule may have unless the config raises it (up to
// Limit::kMaxSlidingLogCount): the log keeps one entry per admission, about 100 bytes each in
// Redis, so a key of such a rule holds up to 1 MB; sliding_window needs a few dozen bytes at any
// limit.
inline constexpr int64_t kDefaultMaxSlidingLogLimit = 10'000;

// Where the key of a forward-auth check (GET /v1/auth/{rule}, http/auth_handler.h) comes from:
// the headers a reverse proxy sends with its auth subrequest.
struct KeyPart {
  enum class Source {
    kForwardedFor,  // the client address: X-Forwarded-For, walked past the trusted proxies
    kRealIp,        // the client address: X-Real-IP, as the trusted proxy set it
    kHeader,        // the value of `header` (an API key, a tenant)
    kMethod,        // X-Forwarded-Method, or X-Original-Method
    kUri,           // the path of X-Original-URI, or of X-Forwarded-Uri (no query string)
  };
  Source source = Source::kForwardedFor;
  std::string header;  // kHeader only
};

// A rule's forward auth: the parts of its key (several are composed as middleware::Compose
// does), the status of a denial, and, from the config's forward_auth section, whose address
// headers are believed and how much of a client's address is its key.
struct ForwardAuth {
  std::vector<KeyPart> key;  // empty: the rule answers no /v1/auth
  int deny_status = 429;     // or 403, for nginx's auth_request
  middleware::TrustedProxies trusted_proxies;
  middleware::ClientPrefixes client_prefixes;
};

struct Rule {
  std::string name;
  Limit limit;
  // What decides when the store fails (a shared store only; memory:// cannot fail).
  FailurePolicy on_error = FailurePolicy::kFailOpen;
  // Bounds on this rule's /v1/acquire requests in progress, per key and in all; beyond either
  // an acquire is answered queue_full at once. Unless the rule sets them: the server's
  // max_waiters_per_key, and no bound of the rule's own (the server's max_waiters).
  size_t max_waiters_per_key = 1'000;
  size_t max_waiters = 100'000;
  // Decided and counted as usual, but never denies: the answers tell what the verdict would be.
  // Unless the rule sets it: the server's shadow_mode.
  bool shadow_mode = false;
  ForwardAuth auth;
  // Units taken ahead from a shared store and spent in this process (sluice/leasing_store.h);
  // off (units 0) unless the rule sets `lease`. Valid for `limit` (ValidateLeaseTerms).
  LeaseTerms lease;
};

// A rule's lease lifetime when it gives units only.
inline constexpr Duration kDefaultLeaseLifetime = std::chrono::milliseconds(100);

struct ListenAddress {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;

  std::string ToString() const;
};

struct StoreConfig {
  std::string url = "memory://";
  Duration timeout = std::chrono::milliseconds(50);
  // How many `sluice serve` processes share the store: a local_fallback rule gives each
  // limit/instances while the store is down.
  int64_t instances = 1;
  // The bound on the memory:// store's memory, in bytes (MemoryStoreOptions::max_memory): bytes,
  // or a whole number of KiB, MiB, GiB or TiB ("256MiB"), from kMinMaxMemory to kMaxMaxMemory.
  size_t max_memory = size_t{256} << 20;
  // A Redis store's keys are "<key_prefix>:<rule>:{<key>}", so that services or environments
  // sharing one Redis never share limits; a Redis user limited to "~<key_prefix>:*" can run them
  // (docs/redis-acl.md). 1 to kMaxKeyPrefixBytes of [A-Za-z0-9_.:-]: no '{' or '}' (each key's
  // Cluster hash tag is its own), no ACL pattern characters.
  std::string key_prefix = "sluice";
  // The Redis password, when kept out of the config: read from the file `password_file` names
  // (one trailing newline dropped), or from the environment variable `password_env` names, at
  // each load. The URL may then name only the user (redis://user@host:port). Empty: the URL's.
  std::string password;
  // A redis+sentinel:// store's sentinels' password (their requirepass), apart from the
  // master's: read from store.sentinel_password_file or store.sentinel_password_env, as the
  // password. Empty: the sentinels need none. With store.sentinel_user, the password of that user
  // of the sentinels' ACL.
  std::string sentinel_user;
  std::string sentinel_password;
  // store.tls: the TLS material of a rediss://, rediss+cluster:// or rediss+sentinel:// URL.
  RedisTlsOptions tls;
};

// The password in the file at `path`, less one trailing newline; an error never holds it.
Result<std::string> ReadPasswordFile(const std::string& path);

inline constexpr size_t kMaxKeyPrefixBytes = 64;
// The longest password file read.
inline constexpr size_t kMaxPasswordBytes = 4096;

inline constexpr size_t kMinMaxMemory = size_t{1} << 20;
inline constexpr size_t kMaxMaxMemory = size_t{1} << 40;

// What a caller may do: the scopes of server.auth.callers, as bits.
enum Scope : uint8_t {
  kScopeCheck = 1,    // /v1/check, /v1/acquire, /v1/auth, POST /json
  kScopeAdmin = 2,    // /v1/top, the dashboard's data, DELETE /v1/keys
  kScopeMetrics = 4,  // /metrics
};

// One entry of server.auth.callers: who presents the token whose SHA-256 is `token_sha256`, or
// a verified client certificate with one of the names `client_san` (mutual TLS), or either.
struct CallerConfig {
  std::string name;  // for logs and metrics; [A-Za-z0-9_.:-], unique
  std::optional<std::array<uint8_t, 32>> token_sha256;  // unique among callers
  // Matched exactly against a client certificate's DNS and URI subject alternative names; each
  // name belongs to one caller.
  std::vector<std::string> client_san;
  uint8_t scopes = 0;  // Scope bits, at least one
  // The rules it may check (names of `rules`), and the RLS domains it may use on POST /json;
  // unset: any.
  std::optional<std::vector<std::string>> rules;
  std::optional<std::vector<std::string>> domains;
};

// server.auth: when set (`enabled`), every endpoint but /healthz and /readyz needs a caller's
// token.
struct AuthConfig {
  bool enabled = false;
  std::vector<CallerConfig> callers;  // at least one when enabled; names and hashes unique
};

struct ServerConfig {
  // 0: one per hardware thread.
  int io_threads = 0;
  // The longest a request may take to arrive once its first byte has, and a response to leave.
  Duration read_timeout = std::chrono::seconds(10);
  // The longest a keep-alive connection may wait for its next request.
  Duration idle_timeout = std::chrono::seconds(60);
  // The HTTP connections open at once; beyond it new ones are refused. Unset: derived at start
  // from the process's file-descriptor limit (cli/file_limit.h).
  std::optional<size_t> max_connections;
  // The process's /v1/acquire requests in progress, over every rule.
  size_t max_waiters = 100'000;
  // The default of each rule's max_waiters_per_key.
  size_t max_waiters_per_key = 1'000;
  // Whether GET /v1/top (and so the dashboard) shows the keys denied most: keys identify clients.
  bool expose_keys = false;
  // The default of each rule's shadow_mode.
  bool shadow_mode = false;
  AuthConfig auth;
  // A second address serving only /metrics, /v1/top, the dashboard and DELETE /v1/keys (and
  // /healthz, /readyz), which the `listen` address then no longer serves; unset: `listen` serves
  // everything. Applied at start only (config/admin_listen.h).
  std::optional<ListenAddress> admin_listen;
  // server.tls (config/tls_files.h): HTTPS on `listen`, mTLS with a client_ca_file; unset: HTTP.
  std::optional<tls::ServerFiles> tls;
};

// The forward_auth section: what every rule's ForwardAuth takes from it.
struct ForwardAuthConfig {
  middleware::TrustedProxies trusted_proxies;
  bool any_trusted = false;  // a rule keyed on a client address needs a trusted proxy
  middleware::ClientPrefixes client_prefixes;
};

// TLS on the gRPC port of the rate limit service (rls.tls): its certificate chain and key (PEM
// files, re-read when they change: rls/server_tls.h), and for mutual TLS the authority whose
// certificates clients must present; with `client_san`, only a client certificate carrying one
// of these DNS or URI names may connect (envoyproxy/ratelimit's GRPC_CLIENT_TLS_SAN).
struct RlsTlsConfig {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;           // empty: no client certificate asked for
  std::vector<std::string> client_san;  // needs client_ca_file; empty: any the authority signed
};

// The Envoy rate limit service (RLS v3): envoyproxy/ratelimit's configuration files in
// `config_dir`, answered on gRPC at `grpc_listen` and on the HTTP port at POST /json.
struct RlsConfig {
  std::string config_dir;                    // empty: no rate limit service
  std::optional<ListenAddress> grpc_listen;  // unset: no gRPC, /json only
  std::optional<RlsTlsConfig> tls;           // unset: plaintext gRPC
  bool shadow_mode = false;                  // every descriptor decided and counted, never denied
  bool quota_mode = false;                   // every descriptor in quota mode (rls/service.h)
  bool x_ratelimit_headers = false;          // envoyproxy/ratelimit's X-RateLimit-* headers too
  bool watch = true;                         // reload when a file of config_dir changes
  // The failure policy of a limit that sets no on_error; nullopt (`on_error: error`): the store's
  // outage is answered with a gRPC error, for Envoy's failure_mode_deny to decide.
  std::optional<FailurePolicy> on_error = FailurePolicy::kFailOpen;
};

struct Config {
  ListenAddress listen;
  // The largest limit a sliding_log rule may have.
  int64_t max_sliding_log_limit = kDefaultMaxSlidingLogLimit;
  StoreConfig store;
  ServerConfig server;
  ForwardAuthConfig forward_auth;
  std::vector<Rule> rules;  // at least one; names unique
  RlsConfig rls;
};

// `file_name` is only used in error messages.
Result<Config> ParseConfig(std::string_view yaml, std::string_view file_name);
// Reads and parses a file (at most 1 MiB).
Result<Config> LoadConfigFile(const std::string& path);

// "HOST:PORT" or "[IPV6]:PORT".
Result<ListenAddress> ParseListenAddress(std::string_view text);

}  // namespace sluice::config
