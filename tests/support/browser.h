// A headless Chromium driven through chromedriver with the W3C WebDriver protocol (plain HTTP and
// JSON, here over cpp-httplib), for end-to-end tests of pages: chromedriver on a free loopback
// port, one browser session with a fresh profile and every background connection of Chromium's
// turned off (the machine may have no network: it must not try to reach anything but the page).
// Every call is bounded (10 s; 30 s to start the session). Destroying the Browser ends the
// session, which ends Chromium, then stops chromedriver (SIGTERM, SIGKILL after 5 s), then kills
// what is left of chromedriver's process group (Chromium is in it). A guard process does that
// last step too if the test process dies without destroying the Browser, so no browser outlives
// the test.
// Not thread-safe: one owner.
#pragma once

#include <httplib.h>
#include <sys/types.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "support/serve_process.h"

namespace sluice::testing {

struct BrowserOptions {
  std::string chromedriver;  // the path of chromedriver
  std::string chromium;      // the path of the browser's binary
  std::string dir;           // for the profile and chromedriver's log; must exist
  int width = 1400;
  int height = 1100;
};

class Browser {
 public:
  explicit Browser(const BrowserOptions& options);
  ~Browser();
  Browser(const Browser&) = delete;
  Browser& operator=(const Browser&) = delete;

  // Whether the session started; error() tells why not, or why the last call failed.
  bool ok() const { return !session_.empty(); }
  const std::string& error() const { return error_; }
  // chromedriver's log, for a failure's message.
  std::string Log() const { return driver_ ? driver_->Log() : ""; }

  bool Navigate(const std::string& url);
  // Runs `body` (a function body: `return ...;`) in the page, in one task, so what it reads of
  // the page is one consistent state; nullopt (and error()) if it throws or the call fails.
  std::optional<nlohmann::json> Execute(const std::string& body);
  // The text of the first element matching `css`, as rendered (WebDriver's Get Element Text).
  std::optional<std::string> Text(const std::string& css);
  // Writes a PNG of the window to `path`.
  bool Screenshot(const std::string& path);
  // The message of the page's open dialog (window.prompt, alert, confirm); nullopt when none is
  // open. A dialog stays open until answered: other calls meanwhile fail.
  std::optional<std::string> DialogText();
  // Types `text` into the open prompt and accepts it.
  bool AnswerPrompt(const std::string& text);

 private:
  // A WebDriver command; the answer's "value", or nullopt with error_ set.
  std::optional<nlohmann::json> Command(const std::string& method, const std::string& path,
                                        const nlohmann::json& body = nullptr);

  std::unique_ptr<Process> driver_;
  pid_t guard_ = -1;  // kills chromedriver's process group once guard_pipe_ closes
  int guard_pipe_ = -1;
  std::unique_ptr<httplib::Client> client_;
  std::string session_;
  std::string error_;
};

}  // namespace sluice::testing
