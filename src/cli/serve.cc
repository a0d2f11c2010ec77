#include "cli/serve.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "auth/callers.h"
#include "cli/signals.h"
#include "cli/timer_thread.h"
#include "config/admin_listen.h"
#include "config/config.h"
#include "config/example_config.h"
#include "core/fair_admission.h"
#include "http/api.h"
#include "http/connection_limit.h"
#include "http/metrics.h"
#include "http/rule_table.h"
#include "http/server.h"
#include "redis/io_threads.h"
#include "redis/url.h"
#include "rls/front_end.h"
#include "rls/json_endpoint.h"
#include "sluice/acquirer.h"
#include "sluice/leasing_store.h"
#include "sluice/memory_store.h"
#include "sluice/open_store.h"
#include "sluice/redis_store.h"
#include "sluice/resilient_store.h"
#include "sluice/store.h"
#include "tls/rotating_context.h"

namespace sluice::cli {
namespace {

int ConfigError(const std::string& message) {
  std::cerr << "sluice serve: " << message << "\n";
  return 2;
}

// The file given, or with none the example rule set built in.
Result<config::Config> LoadConfig(const ServeFlags& flags) {
  if (flags.config_path.empty()) {
    return config::ParseConfig(config::kExampleConfig, config::kExampleConfigName);
  }
  return config::LoadConfigFile(flags.config_path);
}

// `--check-config`: the file parsed as `--config` would be, and nothing opened.
int CheckConfig(const std::string& path) {
  auto config = config::LoadConfigFile(path);
  if (!config.ok()) return ConfigError(config.status().message());
  std::cout << "sluice serve: " << path << ": OK, " << config->rules.size() << " rule(s), listen "
            << config->listen.ToString() << ", store " << redis::RedactedUrl(config->store.url)
            << "\n";
  return 0;
}

// The fields that differ between the running config and a reloaded one and that only a restart
// applies, but for those a flag overrides.
std::string FieldsNeedingRestart(const ServeFlags& flags, const config::Config& running,
                                 const config::Config& reloaded) {
  std::vector<std::string_view> fields;
  const auto compare = [&](std::string_view field, bool overridden, bool changed) {
    if (!overridden && changed) fields.push_back(field);
  };
  compare("listen", !flags.listen.empty(), reloaded.listen.ToString() != running.listen.ToString());
  compare("store.url", !flags.store_url.empty(), reloaded.store.url != running.store.url);
  compare("store.timeout_ms", false, reloaded.store.timeout != running.store.timeout);
  compare("store.instances", false, reloaded.store.instances != running.store.instances);
  compare("store.max_memory", false, reloaded.store.max_memory != running.store.max_memory);
  compare("store.key_prefix", false, reloaded.store.key_prefix != running.store.key_prefix);
  compare("store.password", false, reloaded.store.password != running.store.password);
  compare("store.sentinel_user", false,
          reloaded.store.sentinel_user != running.store.sentinel_user);
  compare("store.sentinel_password", false,
          reloaded.store.sentinel_password != running.store.sentinel_password);
  compare("store.tls.server_name", false,
          reloaded.store.tls.server_name != running.store.tls.server_name);
  compare("store.tls.insecure_skip_verify", false,
          reloaded.store.tls.insecure_skip_verify != running.store.tls.insecure_skip_verify);
  compare("server.io_threads", flags.io_threads > 0,
          reloaded.server.io_threads != running.server.io_threads);
  compare("server.read_timeout", false,
          reloaded.server.read_timeout != running.server.read_timeout);
  compare("server.idle_timeout", false,
          reloaded.server.idle_timeout != running.server.idle_timeout);
  compare("server.tls", false, reloaded.server.tls != running.server.tls);
  compare("server.max_connections", false,
          reloaded.server.max_connections != running.server.max_connections);
  const auto admin_listen = [](const config::Config& c) {
    return c.server.admin_listen ? c.server.admin_listen->ToString() : "";
  };
  compare("server.admin_listen", false, admin_listen(reloaded) != admin_listen(running));
  const auto rls_fields = [](const config::RlsConfig& rls) {
    const auto tls = rls.tls.value_or(config::RlsTlsConfig{});
    return std::tuple(rls.config_dir, rls.grpc_listen ? rls.grpc_listen->ToString() : "",
                      rls.shadow_mode, rls.x_ratelimit_headers, rls.on_error, rls.watch,
                      rls.tls.has_value(), tls.cert_file, tls.key_file, tls.client_ca_file,
                      tls.client_san);
  };
  compare("rls", false, rls_fields(reloaded.rls) != rls_fields(running.rls));
  std::string list;
  for (std::string_view field : fields) {
    if (!list.empty()) list += ", ";
    list += field;
  }
  return list;
}

bool IsLoopback(std::string_view host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

int IoThreads(const ServeFlags& flags, const config::Config& config) {
  if (flags.io_threads > 0) return flags.io_threads;
  if (config.server.io_threads > 0) return config.server.io_threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// SIGHUP: the rules from the same file, atomically; the previous rules stay if the file is bad.
// `running` is the config the service started with. A Redis store over TLS (`redis`) reads its
// TLS files again for its new connections.
void Reload(const ServeFlags& flags, const config::Config& running, std::string_view source,
            Store& store, RedisStore* redis, http::Metrics& metrics, http::Api& api,
            tls::RotatingContext* tls, rls::FrontEnd* rls) {
  if (flags.config_path.empty()) {
    spdlog::warn("nothing to reload: the rules are the built-in example (no --config)");
    return;
  }
  auto reloaded = config::LoadConfigFile(flags.config_path);
  if (!reloaded.ok()) {
    spdlog::error("reload rejected, the previous rules stay in force: {}",
                  reloaded.status().message());
    return;
  }
  if (redis != nullptr && redis::IsTlsUrl(running.store.url)) {
    if (Status s = redis->ReloadTls(reloaded->store.tls); !s.ok()) {
      spdlog::error("reload rejected, the previous config stays in force: store.tls: {}",
                    s.message());
      return;
    }
  }
  api.SetRules(http::RuleTable::Build(reloaded->rules, store, metrics));
  api.SetMaxWaiters(reloaded->server.max_waiters);
  api.SetExposeKeys(reloaded->server.expose_keys);
  api.SetCallers(auth::CallerTable::Build(reloaded->server.auth));
  if (rls) rls->SetCallers(auth::CallerTable::Build(reloaded->server.auth));
  // The files just checked: a certificate rotated since start is taken now (new connections).
  if (tls != nullptr && reloaded->server.tls == running.server.tls) (void)tls->Reload();
  spdlog::info("reloaded {} rule(s) from {}", reloaded->rules.size(), source);
  if (const std::string fields = FieldsNeedingRestart(flags, running, *reloaded); !fields.empty()) {
    spdlog::warn("changed in {} but only applied on restart, still running the old values: {}",
                 source, fields);
  }
}

}  // namespace

CLI::App* AddServeCommand(CLI::App& app, ServeFlags& flags) {
  auto* serve = app.add_subcommand("serve", "Run the HTTP decision service");
  auto* config = serve->add_option("--config", flags.config_path,
                                   "YAML rule set (default: the built-in examples/sluice.yaml)");
  auto* listen =
      serve->add_option("--listen", flags.listen, "HOST:PORT to listen on; overrides the config");
  auto* store =
      serve->add_option("--store", flags.store_url,
                        "Store URL: memory://, redis[s]://HOST:PORT[/DB], unix:///PATH or "
                        "redis[s]+cluster://HOST:PORT,...; overrides the config");
  auto* io_threads =
      serve->add_option("--io-threads", flags.io_threads, "I/O threads; overrides the config")
          ->check(CLI::Range(1, 256));
  serve
      ->add_option("--check-config", flags.check_config_path,
                   "Validate FILE as --config would, print one line and exit (2 if it is bad); "
                   "opens no store and no socket")
      ->excludes(config, listen, store, io_threads);
  return serve;
}

int RunServe(const ServeFlags& flags) {
  if (!flags.check_config_path.empty()) return CheckConfig(flags.check_config_path);
  ServiceSignals signals;  // before any thread starts, so that none is interrupted by one

  spdlog::set_default_logger(spdlog::stderr_color_mt("sluice"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  const std::string source =
      flags.config_path.empty() ? std::string(config::kExampleConfigName) : flags.config_path;
  auto config = LoadConfig(flags);
  if (!config.ok()) return ConfigError(config.status().message());
  if (!flags.listen.empty()) {
    auto listen = config::ParseListenAddress(flags.listen);
    if (!listen.ok()) return ConfigError("--listen: " + listen.status().message());
    config->listen = *listen;
    if (config->server.admin_listen &&
        config::SameListenAddress(*config->server.admin_listen, config->listen)) {
      return ConfigError("--listen: " + config->listen.ToString() +
                         " is server.admin_listen's address: the two must differ");
    }
  }
  if (!flags.store_url.empty()) config->store.url = flags.store_url;

  // The I/O threads of the HTTP server and of a single Redis's connections: a check made for a
  // request goes out on a connection of the request's thread and is answered there, with no other
  // thread woken on the way. Declared before the store, whose client must be gone before them.
  const auto io_threads = std::make_shared<redis::IoThreads>(IoThreads(flags, *config));
  OpenStoreOptions store_options;
  store_options.threads = io_threads;
  store_options.timeout = config->store.timeout;
  store_options.key_prefix = config->store.key_prefix + ":";
  store_options.password = config->store.password;
  store_options.sentinel_user = config->store.sentinel_user;
  store_options.sentinel_password = config->store.sentinel_password;
  store_options.tls = config->store.tls;
  store_options.max_memory = config->store.max_memory;
  auto backend = OpenStore(config->store.url, store_options);
  if (!backend.ok()) return ConfigError(backend.status().message());
  if (config->store.tls.insecure_skip_verify) {
    spdlog::warn(
        "store.tls.insecure_skip_verify is on: the Redis server's certificate is not verified, "
        "anyone on the path to it can read and alter the limits");
  }

  // A shared store can fail; each rule's failure policy then decides, for the leases taken from
  // it as for any check: Api -> ResilientStore -> LeasingStore -> the store. The in-memory store
  // cannot fail and decides every check in this process, leased or not: it takes no detour; its
  // memory is reported.
  http::Metrics metrics;
  const auto* in_process = dynamic_cast<const MemoryStore*>(backend->get());
  if (in_process) metrics.Watch(*in_process);
  // For /v1/acquire's waits and the ends of leases; declared before the LeasingStore and the Api,
  // which must not outlive it.
  TimerThread timers;
  std::unique_ptr<LeasingStore> leasing;
  std::unique_ptr<ResilientStore> resilient;
  const StoreHealth* health = nullptr;  // a plain store has no breaker to report
  if (!in_process) {
    leasing = std::make_unique<LeasingStore>(
        **backend, timers.timers(), LeasingStoreOptions{.store_timeout = config->store.timeout});
    metrics.Watch(*leasing);
    resilient = std::make_unique<ResilientStore>(
        *leasing, ResilientStoreOptions{.instances = config->store.instances});
    health = resilient.get();
    metrics.Watch(*health);
  }
  Store& store = resilient ? *resilient : **backend;
  // Every front end's checks share the store's work in flight fairly between their callers:
  // declared before the front ends, which must not outlive it.
  core::FairAdmission admission({.target = config->store.timeout / 2});
  // Envoy's rate limit service, when configured; declared before the Api, whose /json uses it.
  std::unique_ptr<rls::FrontEnd> rls;
  if (!config->rls.config_dir.empty()) {
    auto started =
        rls::FrontEnd::Start(config->rls, store, auth::CallerTable::Build(config->server.auth));
    if (!started.ok()) {
      if (started.status().code() != StatusCode::kUnavailable) {
        return ConfigError("rls: " + started.status().message());
      }
      spdlog::error("{}", started.status().message());
      return 1;
    }
    rls = std::move(*started);
    rls->service().SetAdmission(&admission);
    spdlog::info("rls: {} domain(s) from {}, gRPC on {}", rls->domains(), config->rls.config_dir,
                 rls->grpc_port() > 0 ? std::to_string(rls->grpc_port()) : "no port");
  }
  http::Api api(store, metrics, http::RuleTable::Build(config->rules, store, metrics), health,
                &timers.timers());
  api.SetMaxWaiters(config->server.max_waiters);
  api.SetExposeKeys(config->server.expose_keys);
  api.SetCallers(auth::CallerTable::Build(config->server.auth));
  api.SetAdmission(&admission);
  if (rls) {
    api.SetJsonRoute(
        [&rls](std::string_view body, core::FairAdmission::Caller caller,
               http::Api::JsonDone done) {
          rls::AnswerJson(rls->service(), body, std::move(done), caller);
        },
        [&rls] { return rls->Exposition(); });
  }
  http::ServerOptions options;
  options.host = config->listen.host;
  options.port = config->listen.port;
  options.io_threads = io_threads->size();
  options.threads = io_threads;
  options.read_timeout = config->server.read_timeout;
  options.idle_timeout = config->server.idle_timeout;
  options.max_connections = http::SetUpConnectionLimit(config->server.max_connections);
  // HTTPS: the certificate follows its files (SIGHUP, or a change seen within a second).
  std::unique_ptr<tls::RotatingContext> tls;
  if (config->server.tls) {
    auto loaded = tls::RotatingContext::Load(*config->server.tls);
    if (!loaded.ok()) return ConfigError("server.tls: " + loaded.status().message());
    tls = std::move(*loaded);
    tls->WatchFiles();
    options.tls = tls.get();
  }
  // With server.admin_listen, the operators' endpoints have a port of their own, on one I/O
  // thread and a few connections (dashboards, scrapers, support staff), and leave this one.
  std::optional<http::ServerOptions> admin_options;
  if (const auto& admin = config->server.admin_listen) {
    options.endpoints = http::Endpoints::kDecisions;
    admin_options = options;
    admin_options->host = admin->host;
    admin_options->port = admin->port;
    admin_options->io_threads = 1;
    admin_options->threads = nullptr;
    admin_options->max_connections = std::min<size_t>(options.max_connections, 256);
    admin_options->endpoints = http::Endpoints::kAdmin;
  }
  http::Server server(options, api);
  if (Status s = server.Listen(); !s.ok()) {
    spdlog::error("{}", s.message());
    return 1;
  }
  std::optional<http::Server> admin_server;
  if (admin_options) {
    admin_server.emplace(*admin_options, api);
    if (Status s = admin_server->Listen(); !s.ok()) {
      spdlog::error("server.admin_listen: {}", s.message());
      return 1;
    }
    spdlog::info(
        "admin endpoints (/metrics, /v1/top, the dashboard, DELETE /v1/keys) on {}:{}, not on "
        "the decision port",
        admin_options->host, admin_server->port());
  }
  spdlog::info(
      "serving on {}:{}{} with {} rule(s) from {}, store {}, {} I/O thread(s), at most {} "
      "connections",
      config->listen.host, server.port(),
      !tls                                         ? ""
      : config->server.tls->client_ca_file.empty() ? " (HTTPS)"
                                                   : " (HTTPS, mTLS)",
      config->rules.size(), source, redis::RedactedUrl(config->store.url), options.io_threads,
      options.max_connections);

  if (!config->server.auth.enabled) {
    if (!IsLoopback(config->listen.host)) {
      spdlog::warn(
          "listening on {} without server.auth: anyone who can reach it may spend any rule's "
          "limits{}",
          config->listen.host, admin_options ? "" : ", read /metrics and /v1/top, reset keys");
    }
    if (admin_options && !IsLoopback(admin_options->host)) {
      spdlog::warn(
          "admin endpoints on {} without server.auth: anyone who can reach it may read /metrics "
          "and /v1/top and reset keys",
          admin_options->host);
    }
  }
  if (!tls && !IsLoopback(config->listen.host)) {
    spdlog::warn(
        "listening on {} without server.tls: requests, answers and tokens cross the network "
        "in clear",
        config->listen.host);
  }
  if (rls && config->rls.grpc_listen && !IsLoopback(config->rls.grpc_listen->host) &&
      (!config->server.auth.enabled || !config->rls.tls)) {
    spdlog::warn("rls: gRPC on {} without {}: see docs/security.md (the rate limit service port)",
                 config->rls.grpc_listen->host, config->rls.tls ? "server.auth" : "rls.tls");
  }
  if (admin_server) admin_server->Start();
  server.Start();
  while (signals.Next() == ServiceSignal::kReload) {
    Reload(flags, *config, source, store, dynamic_cast<RedisStore*>(backend->get()), metrics, api,
           tls.get(), rls.get());
    if (rls) (void)rls->Reload();  // logged either way
  }
  server.Drain();
  if (admin_server) admin_server->Drain();
  if (rls) {
    // Calls in flight end within the store's deadline; a second bounds the stop, for gRPC 1.51
    // holds Shutdown to its deadline while a C++ client keeps its channel open.
    rls->Shutdown(std::chrono::seconds(1));
    spdlog::info("rls: stopped");
  }
  return 0;
}

}  // namespace sluice::cli
