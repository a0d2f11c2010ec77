// The dashboard in a real browser: `sluice serve` (the binary under test, its path the first
// argument) on a real Redis with keys exposed, and headless Chromium, through chromedriver,
// showing its page while a load of checks (some denied) runs and acquires wait. What the page
// shows is read from its DOM and held against GET /metrics and GET /v1/top:
//   - during the load, each total the page shows lies between the /metrics values fetched just
//     before and just after its poll, and each rate is the increase between its two polls over
//     the time between them (so at most one poll's worth away from /metrics at any moment);
//   - once the load stops, every total equals /metrics exactly, and the rates fall to 0;
//   - the top denied key is the one denied most, with its exact count; a key made of HTML is
//     shown as text and runs nothing;
//   - the acquires waiting and the store's circuit breaker (closed, then open once Redis is
//     killed, with the fail_open decisions it made) are shown as /metrics has them.
//   - after a reload that hides the keys, the page says they are hidden.
// Screenshots: dashboard.png (under load) and dashboard-store-down.png in the build tree.
// With server.auth and server.admin_listen, the page is served on the admin port only, asks for a
// token once (again only when the one given is refused), keeps it in the tab's sessionStorage
// and shows the data read with it; a reload of the page asks nothing.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/browser.h"
#include "support/redis_server.h"
#include "support/serve_process.h"

namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using sluice::testing::Browser;
using sluice::testing::FreeLoopbackPort;
using sluice::testing::LocalClient;
using sluice::testing::MetricValue;
using sluice::testing::RedisServer;
using sluice::testing::Service;
using sluice::testing::TempDir;

// gcra admits a key's first 5 at once and its sixth 12 minutes later: a fixed window would admit
// 5 more at the top of the hour, were the test running then.
constexpr char kConfig[] = R"(server: {expose_keys: true}
rules:
  - {name: api, algorithm: gcra, limit: 5, period: 1h}
  - {name: jobs, algorithm: gcra, limit: 1, period: 2m}
)";
// Attacker-controlled bytes as a key: markup that would run if it were parsed as HTML, a quote,
// and a right-to-left override.
const std::string kHostileKey = "<img src=x onerror=\"window.pwned=1\">\"\u202e";
const std::string kHostileKeyShown = "<img src=x onerror=\"window.pwned=1\">\"\\u{202e}";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Polls until `done` (bounded by `timeout`); returns whether it got there.
template <typename Done>
bool WaitFor(Done done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// GET /metrics every 50 ms, each answer kept with when it was asked for and received (ms since
// the epoch, the clock the page's Date.now() reads), for bracketing what the page showed.
class MetricsSampler {
 public:
  explicit MetricsSampler(int port) : thread_([this, port] { Run(port); }) {}
  ~MetricsSampler() {
    stop_.store(true);
    thread_.join();
  }

  // The value of `series` in the last answer received 2 ms or more before `t_ms`: the value
  // then was at least this.
  std::optional<int64_t> Before(std::string_view series, int64_t t_ms) const {
    std::lock_guard lock(mu_);
    std::optional<int64_t> value;
    for (const Sample& s : samples_) {
      if (s.received_ms + 2 <= t_ms) value = MetricValue(s.text, series);
    }
    return value;
  }
  // The value of `series` in the first answer asked for 2 ms or more after `t_ms`, waiting for
  // it up to 3 s: the value then was at most this.
  std::optional<int64_t> After(std::string_view series, int64_t t_ms) const {
    std::optional<int64_t> value;
    WaitFor(
        [&] {
          std::lock_guard lock(mu_);
          for (const Sample& s : samples_) {
            if (s.asked_ms >= t_ms + 2) {
              value = MetricValue(s.text, series);
              return true;
            }
          }
          return false;
        },
        3s);
    return value;
  }

 private:
  struct Sample {
    int64_t asked_ms;
    int64_t received_ms;
    std::string text;
  };

  void Run(int port) {
    httplib::Client client = LocalClient(port);
    while (!stop_.load()) {
      const int64_t asked = NowMs();
      if (auto r = client.Get("/metrics"); r && r->status == 200) {
        std::lock_guard lock(mu_);
        samples_.push_back({asked, NowMs(), r->body});
      }
      std::this_thread::sleep_for(50ms);
    }
  }

  mutable std::mutex mu_;
  std::vector<Sample> samples_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Checks on rule api, about 250 a second until stopped: half for "user:heavy", a tenth each for
// "user:medium" and the hostile key, the rest for keys of their own. The limit is 5 an hour per
// key, so the first three are denied from their sixth check on.
class Load {
 public:
  explicit Load(int port) : thread_([this, port] { Run(port); }) {}
  ~Load() { Stop(); }

  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  int sent(const std::string& key) const { return sent_.at(key); }
  int failures() const { return failures_; }

 private:
  void Run(int port) {
    httplib::Client client = LocalClient(port);
    auto next = std::chrono::steady_clock::now();
    for (int i = 0; !stop_.load() && i < 20'000; ++i) {
      std::string key = "user:" + std::to_string(i);
      if (i % 2 == 0) key = "user:heavy";
      if (i % 10 == 1) key = "user:medium";
      if (i % 10 == 3) key = kHostileKey;
      const json body = {{"rule", "api"}, {"key", key}};
      if (auto r = client.Post("/v1/check", body.dump(), "application/json");
          r && r->status == 200) {
        ++sent_[key];
      } else {
        ++failures_;
      }
      next += 4ms;
      std::this_thread::sleep_until(next);
    }
  }

  std::map<std::string, int> sent_ = {{"user:heavy", 0}, {"user:medium", 0}, {kHostileKey, 0}};
  int failures_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// What the page shows, read in one task of the page, so from one state of it.
constexpr char kReadPage[] = R"(
const data = document.getElementById('dashboard').dataset;
const field = (row, name) => {
  const cell = row.querySelector(`[data-field="${name}"]`);
  if (!cell) return null;
  return { text: cell.textContent, value: cell.dataset.value ?? null,
           delta: cell.dataset.delta ?? null, hidden: cell.hidden };
};
const rules = {};
for (const row of document.querySelectorAll('#rules tbody tr')) {
  rules[row.dataset.rule] = {};
  for (const name of ['rate', 'allowed-rate', 'denied-rate', 'shadow-rate', 'allowed-total',
                      'denied-total', 'degraded-total', 'waiters']) {
    rules[row.dataset.rule][name] = field(row, name);
  }
}
const nodes = {};
for (const row of document.querySelectorAll('#nodes tbody tr')) {
  nodes[row.dataset.node] = { state: row.querySelector('[data-field="state"]').dataset.state,
                              opens: field(row, 'opens') };
}
const sources = {};
for (const row of document.querySelectorAll('#sources tbody tr')) sources[row.dataset.source] = field(row, 'total');
const top = {};
for (const block of document.querySelectorAll('#top section[data-rule]')) {
  top[block.dataset.rule] = [...block.querySelectorAll('tbody tr')].map((row) => ({
    key: row.querySelector('[data-field="key"]').dataset.key,
    shown: row.querySelector('.key-text').textContent,
    denied: field(row, 'denied'),
    error: field(row, 'error'),
  }));
}
return {
  polls: Number(data.polls), pollStart: Number(data.pollStart), pollEnd: Number(data.pollEnd),
  prevPollStart: Number(data.prevPollStart ?? 0), prevPollEnd: Number(data.prevPollEnd ?? 0),
  intervalMs: Number(data.intervalMs ?? 0),
  status: document.getElementById('status').dataset.state,
  breaker: document.getElementById('breaker').dataset.state,
  storeErrors: document.getElementById('store-errors').dataset.value,
  shadowShown: !document.querySelector('#rules th.shadow').hidden,
  topHidden: document.getElementById('top').dataset.hidden,
  images: document.images.length, title: document.title, pwned: window.pwned ?? null,
  rules, nodes, sources, top,
};
)";

// A number as the page writes it, "1,234" or "12.5", read back.
double Shown(const json& cell) {
  std::string text = cell.at("text").get<std::string>();
  std::erase(text, ',');
  return std::stod(text);
}
int64_t Value(const json& cell) { return std::stoll(cell.at("value").get<std::string>()); }

class DashboardBrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_ = RedisServer::Start();
    ASSERT_NE(redis_, nullptr);
    service_ = std::make_unique<Service>(kConfig, redis_->url());
    ASSERT_TRUE(service_->up()) << service_->process().Log();
    sampler_ = std::make_unique<MetricsSampler>(service_->port());
    ASSERT_TRUE(dir_.ok());
    browser_ = std::make_unique<Browser>(sluice::testing::BrowserOptions{
        .chromedriver = SLUICE_CHROMEDRIVER, .chromium = SLUICE_CHROMIUM, .dir = dir_.path()});
    ASSERT_TRUE(browser_->ok()) << browser_->error() << "\n" << browser_->Log();
  }

  void TearDown() override {
    if (load_) load_->Stop();
    browser_.reset();
    sampler_.reset();
    // Drains: the acquires still waiting are answered "cancelled", and their threads end.
    if (service_) service_->process().Stop(10s);
    for (std::thread& t : acquires_) t.join();
  }

  json ReadPage() {
    auto page = browser_->Execute(kReadPage);
    EXPECT_TRUE(page.has_value()) << browser_->error();
    return page.value_or(json::object());
  }

  // Reads the page once it has polled after `t_ms` (twice if `both_polls`), bounded by 10 s.
  json ReadPageAfter(int64_t t_ms, bool both_polls = false) {
    json page;
    EXPECT_TRUE(WaitFor(
        [&] {
          page = ReadPage();
          return page.value(both_polls ? "prevPollStart" : "pollStart", int64_t{0}) > t_ms + 2;
        },
        10s))
        << page.dump();
    return page;
  }

  std::string Metrics() {
    auto r = LocalClient(service_->port()).Get("/metrics");
    return r ? r->body : "";
  }

  void StartAcquire() {
    acquires_.emplace_back([port = service_->port()] {
      httplib::Client client = LocalClient(port);
      client.set_read_timeout(310s);
      client.Post("/v1/acquire", R"({"rule":"jobs","key":"nightly","max_wait_ms":300000})",
                  "application/json");
    });
  }

  // Each total of rule api the page shows lies between the /metrics values just before and
  // just after the poll that fetched it, for this poll and the one before; each rate is the
  // increase between them over the time between their midpoints.
  void ExpectRatesAndTotalsFromMetrics(const json& page) {
    const json& api = page.at("rules").at("api");
    const int64_t start = page.at("pollStart"), end = page.at("pollEnd");
    const int64_t prev_start = page.at("prevPollStart"), prev_end = page.at("prevPollEnd");
    ASSERT_GT(prev_start, 0) << page.dump();
    const double interval = page.at("intervalMs");
    EXPECT_DOUBLE_EQ(interval, (start + end) / 2.0 - (prev_start + prev_end) / 2.0);
    for (const std::string result : {"allowed", "denied"}) {
      const std::string series = R"(sluice_checks_total{rule="api",result=")" + result + R"("})";
      const json& total = api.at(result + "-total");
      const json& rate = api.at(result + "-rate");
      const int64_t shown = Value(total);
      EXPECT_EQ(Shown(total), shown);
      const int64_t delta = std::stoll(rate.at("delta").get<std::string>());
      const int64_t shown_before = shown - delta;
      EXPECT_LE(sampler_->Before(series, start).value_or(-1), shown) << series;
      EXPECT_GE(sampler_->After(series, end).value_or(-1), shown) << series;
      EXPECT_LE(sampler_->Before(series, prev_start).value_or(-1), shown_before) << series;
      EXPECT_GE(sampler_->After(series, prev_end).value_or(-1), shown_before) << series;
      const double per_second = std::stod(rate.at("value").get<std::string>());
      EXPECT_NEAR(per_second, delta * 1000.0 / interval, 1e-6);
      EXPECT_NEAR(Shown(rate), per_second, 0.05 + 1e-9) << rate.dump();
    }
  }

  // Every total the page shows equals /metrics now (nothing counts any more).
  void ExpectTotalsEqualMetrics(const json& page) {
    const std::string metrics = Metrics();
    for (const std::string rule : {"api", "jobs"}) {
      const json& row = page.at("rules").at(rule);
      for (const std::string result : {"allowed", "denied"}) {
        const std::string series =
            "sluice_checks_total{rule=\"" + rule + "\",result=\"" + result + "\"}";
        EXPECT_EQ(Value(row.at(result + "-total")), MetricValue(metrics, series)) << series;
        EXPECT_EQ(Shown(row.at(result + "-total")), MetricValue(metrics, series)) << series;
      }
      EXPECT_EQ(Value(row.at("waiters")),
                MetricValue(metrics, "sluice_acquire_waiters{rule=\"" + rule + "\"}"));
    }
    for (const auto& [source, total] : page.at("sources").items()) {
      int64_t sum = 0;
      for (const std::string rule : {"api", "jobs"}) {
        sum += MetricValue(
            metrics, "sluice_decisions_total{rule=\"" + rule + "\",source=\"" + source + "\"}");
      }
      EXPECT_EQ(Value(total), sum) << source;
    }
    EXPECT_EQ(page.at("sources").size(), 5u);
    EXPECT_EQ(std::stoll(page.at("storeErrors").get<std::string>()),
              MetricValue(metrics, "sluice_store_errors_total"));
    ASSERT_EQ(page.at("nodes").size(), 1u) << page.dump();
    const std::string node = page.at("nodes").begin().key();
    const json& shown = page.at("nodes").begin().value();
    const std::string state = shown.at("state");
    EXPECT_EQ(MetricValue(metrics, "sluice_node_breaker_state{node=\"" + node + "\",state=\"" +
                                       state + "\"}"),
              1)
        << node << " " << state;
    EXPECT_EQ(page.at("breaker"), state);
    EXPECT_EQ(Value(shown.at("opens")),
              MetricValue(metrics, "sluice_node_breaker_opens_total{node=\"" + node + "\"}"));
  }

  std::string Screenshot(const std::string& name) {
    const std::string path = std::string(SLUICE_SCREENSHOT_DIR) + "/" + name;
    EXPECT_TRUE(browser_->Screenshot(path)) << browser_->error();
    return path;
  }

  TempDir dir_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<MetricsSampler> sampler_;
  std::unique_ptr<Browser> browser_;
  std::unique_ptr<Load> load_;
  std::vector<std::thread> acquires_;
};

TEST_F(DashboardBrowserTest, ShowsWhatMetricsAndTopKeysSay) {
  const int port = service_->port();
  ASSERT_TRUE(browser_->Navigate("http://127.0.0.1:" + std::to_string(port) + "/"))
      << browser_->error();

  // One acquire of rule jobs is admitted, the next two wait 2 and 4 minutes for their slots.
  for (int i = 0; i < 3; ++i) StartAcquire();
  ASSERT_TRUE(WaitFor(
      [&] { return MetricValue(Metrics(), R"(sluice_acquire_waiters{rule="jobs"})") == 2; }, 10s));

  load_ = std::make_unique<Load>(port);
  bool saw_denials = false;
  for (int i = 0; i < 3; ++i) {
    const json page = ReadPageAfter(NowMs(), true);
    ASSERT_EQ(page.at("status"), "live") << page.dump();
    ExpectRatesAndTotalsFromMetrics(page);
    saw_denials |= std::stod(page["rules"]["api"]["denied-rate"].value("value", "0")) > 0;
  }
  EXPECT_TRUE(saw_denials) << "the load was not seen";
  const std::string under_load = Screenshot("dashboard.png");
  std::cout << "screenshot under load: " << under_load << "\n";

  load_->Stop();
  EXPECT_EQ(load_->failures(), 0);
  const int64_t stopped = NowMs();
  json page = ReadPageAfter(stopped);
  ExpectTotalsEqualMetrics(page);
  EXPECT_EQ(Value(page["rules"]["jobs"]["waiters"]), 2);
  EXPECT_EQ(page.at("breaker"), "closed");
  EXPECT_FALSE(page.at("shadowShown")) << "no sluice_shadow_* metric, no shadow column";
  // Two polls after the load: nothing was decided between them.
  page = ReadPageAfter(stopped, true);
  EXPECT_EQ(page["rules"]["api"]["rate"].at("value"), "0");

  // The keys denied most: user:heavy, as many times as it was sent, but its first 5.
  auto top = LocalClient(port).Get("/v1/top?rule=api&n=10");
  ASSERT_TRUE(top && top->status == 200);
  const json expected = json::parse(top->body).at("keys");
  const json& shown = page.at("top").at("api");
  ASSERT_GE(shown.size(), 3u) << page.dump();
  EXPECT_EQ(shown[0].at("key"), "user:heavy");
  EXPECT_EQ(Value(shown[0].at("denied")), load_->sent("user:heavy") - 5);
  EXPECT_EQ(shown[0].at("error").at("text"), "exact");
  EXPECT_EQ(browser_->Text(R"(#top section[data-rule="api"] tr[data-rank="1"] .key-text)"),
            "user:heavy");
  ASSERT_EQ(shown.size(), expected.size());
  for (size_t i = 0; i < shown.size(); ++i) {
    EXPECT_EQ(shown[i].at("key"), expected[i].at("key"));
    EXPECT_EQ(Value(shown[i].at("denied")), expected[i].at("denied").get<int64_t>());
  }
  // The hostile key is shown as its text, and nothing of it ran.
  bool hostile_shown = false;
  for (const json& row : shown) {
    if (row.at("key") != kHostileKey) continue;
    hostile_shown = true;
    EXPECT_EQ(row.at("shown"), kHostileKeyShown);
    EXPECT_EQ(Value(row.at("denied")), load_->sent(kHostileKey) - 5);
  }
  EXPECT_TRUE(hostile_shown);
  EXPECT_EQ(page.at("images"), 0);
  EXPECT_TRUE(page.at("pwned").is_null());
  EXPECT_EQ(page.at("title"), "sluice");

  // Redis goes away: checks are admitted by fail_open until the breaker opens.
  redis_->Kill();
  httplib::Client client = LocalClient(port);
  int sent = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        client.Post("/v1/check", R"({"rule":"api","key":"k)" + std::to_string(sent++) + R"("})",
                    "application/json");
        return Metrics().find(R"(,state="open"} 1)") != std::string::npos;
      },
      10s));
  page = ReadPageAfter(NowMs());
  EXPECT_EQ(page.at("breaker"), "open");
  ExpectTotalsEqualMetrics(page);
  EXPECT_GT(Value(page["sources"]["fail_open"]), 0);
  EXPECT_EQ(Value(page["rules"]["api"]["degraded-total"]), Value(page["sources"]["fail_open"]));
  std::cout << "screenshot with the store down: " << Screenshot("dashboard-store-down.png") << "\n";

  // A reload that hides the keys: the page says so and shows none.
  std::string hidden = kConfig;
  hidden.replace(hidden.find("true"), 4, "false");
  service_->WriteConfig(hidden);
  service_->process().Signal(SIGHUP);
  ASSERT_TRUE(service_->process().WaitForLog("reloaded 2 rule(s)"));
  page = ReadPageAfter(NowMs());
  EXPECT_EQ(page.at("topHidden"), "true");
  EXPECT_TRUE(page.at("top").empty());
  const auto note = browser_->Text("#top-note");
  EXPECT_EQ(note.value_or("").rfind("Keys are hidden", 0), 0u) << note.value_or("");
}

// The hash is SHA-256 of "ops-token" (printf %s ops-token | sha256sum).
constexpr char kAuthConfig[] = R"(server:
  expose_keys: true
  admin_listen: 127.0.0.1:ADMIN_PORT
  auth:
    callers:
      - {name: ops, token_sha256: "d9310c002af91822beb0b3487d8b04f85bf6bf1f8a5496bff7d35fc7c5a29def", scopes: [admin, metrics]}
rules:
  - {name: api, algorithm: fixed_window, limit: 5, period: 1h}
)";

constexpr char kReadAuthPage[] = R"(
return {
  status: document.getElementById('status').dataset.state,
  polls: Number(document.getElementById('dashboard').dataset.polls ?? 0),
  rules: [...document.querySelectorAll('#rules tbody tr')].map((row) => row.dataset.rule),
  stored: sessionStorage.getItem('sluice.token'),
  kept: localStorage.length + document.cookie.length,
};
)";

TEST(DashboardAuthBrowserTest, AsksForATokenOnceOnTheAdminPort) {
  std::unique_ptr<Service> service;
  int admin_port = 0;
  for (int attempt = 0; attempt < 5 && !(service && service->up()); ++attempt) {
    admin_port = FreeLoopbackPort();
    std::string config = kAuthConfig;
    config.replace(config.find("ADMIN_PORT"), 10, std::to_string(admin_port));
    service = std::make_unique<Service>(config);
  }
  ASSERT_TRUE(service->up()) << service->process().Log();
  ASSERT_TRUE(service->process().WaitForLog("on 127.0.0.1:" + std::to_string(admin_port)));
  // The decision port has no dashboard.
  EXPECT_EQ(service->Client().Get("/")->status, 404);

  TempDir dir;
  ASSERT_TRUE(dir.ok());
  Browser browser(sluice::testing::BrowserOptions{
      .chromedriver = SLUICE_CHROMEDRIVER, .chromium = SLUICE_CHROMIUM, .dir = dir.path()});
  ASSERT_TRUE(browser.ok()) << browser.error() << "\n" << browser.Log();
  const std::string page_url = "http://127.0.0.1:" + std::to_string(admin_port) + "/";
  ASSERT_TRUE(browser.Navigate(page_url)) << browser.error();

  std::optional<std::string> asked;
  const auto wait_for_prompt = [&] { return (asked = browser.DialogText()).has_value(); };
  // A token that is no caller's is refused, and the page asks again.
  ASSERT_TRUE(WaitFor(wait_for_prompt, 10s)) << browser.error();
  EXPECT_NE(asked->find("token"), std::string::npos) << *asked;
  ASSERT_TRUE(browser.AnswerPrompt("not-a-caller")) << browser.error();
  ASSERT_TRUE(WaitFor(wait_for_prompt, 10s)) << browser.error();
  ASSERT_TRUE(browser.AnswerPrompt("ops-token")) << browser.error();

  json page;
  const auto live_after = [&](int polls) {
    return WaitFor(
        [&] {
          auto read = browser.Execute(kReadAuthPage);
          if (!read) return false;  // a dialog is open: the wait fails, and the test with it
          page = *read;
          return page.at("status") == "live" && page.at("polls").get<int>() >= polls;
        },
        10s);
  };
  ASSERT_TRUE(live_after(2)) << page.dump() << " " << browser.error();
  EXPECT_EQ(page.at("rules"), json::array({"api"}));
  EXPECT_EQ(page.at("stored"), "ops-token");
  EXPECT_EQ(page.at("kept"), 0);

  // A reload of the page in the same tab: the token is still there, nothing is asked.
  ASSERT_TRUE(browser.Navigate(page_url)) << browser.error();
  ASSERT_TRUE(live_after(2)) << page.dump() << " " << browser.error();
  EXPECT_FALSE(browser.DialogText().has_value());
  EXPECT_EQ(service->process().Log().find("ops-token"), std::string::npos);
}

}  // namespace
