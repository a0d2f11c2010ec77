#include "support/browser.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/redis_server.h"

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// The key under which WebDriver names an element.
constexpr const char* kElement = "element-6066-11e4-a52e-4f735466cecf";

std::optional<std::string> DecodeBase64(const std::string& text) {
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (const char c : text) {
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    if (c >= '0' && c <= '9') v = c - '0' + 52;
    if (c == '+') v = 62;
    if (c == '/') v = 63;
    if (c == '=') break;
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<uint32_t>(v);
    if (++count % 4 == 0) {
      out.push_back(static_cast<char>(bits >> 16));
      out.push_back(static_cast<char>(bits >> 8));
      out.push_back(static_cast<char>(bits));
      bits = 0;
    }
  }
  if (count % 4 == 2) out.push_back(static_cast<char>(bits >> 4));
  if (count % 4 == 3) {
    out.push_back(static_cast<char>(bits >> 10));
    out.push_back(static_cast<char>(bits >> 2));
  }
  return out;
}

// Starts a process that kills process group `group` once `*write_end` is closed: by this process,
// or by the kernel when this process dies without closing it (a crash, a sanitizer's abort,
// ctest's SIGKILL at a timeout). Returns its pid, or -1.
pid_t StartGroupGuard(pid_t group, int* write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;  // no process spawned later holds the pipe open
  const pid_t guard = fork();
  if (guard == 0) {
    // Only async-signal-safe calls here: the test has other threads.
    close(fds[1]);
    char byte;
    while (read(fds[0], &byte, 1) < 0 && errno == EINTR) {
    }
    kill(-group, SIGKILL);
    _exit(0);
  }
  close(fds[0]);
  *write_end = fds[1];
  if (guard < 0) close(fds[1]);
  return guard;
}

}  // namespace

Browser::Browser(const BrowserOptions& options) {
  const int port = FreeLoopbackPort();
  driver_ = Process::OfProgram(options.chromedriver, {"--port=" + std::to_string(port)},
                               options.dir + "/chromedriver.log");
  if (!driver_->started()) {
    error_ = "cannot start " + options.chromedriver;
    return;
  }
  guard_ = StartGroupGuard(driver_->pid(), &guard_pipe_);
  client_ = std::make_unique<httplib::Client>("127.0.0.1", port);
  client_->set_connection_timeout(2s);
  client_->set_read_timeout(10s);

  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    if (auto status = Command("GET", "/status"); status && status->value("ready", false)) break;
    if (driver_->Exited() || std::chrono::steady_clock::now() > deadline) {
      error_ = "chromedriver did not become ready: " + error_;
      return;
    }
    std::this_thread::sleep_for(20ms);
  }

  const json capabilities = {
      {"browserName", "chrome"},
      {"pageLoadStrategy", "normal"},
      // A dialog the page opens stays open until the test answers it (DialogText, AnswerPrompt);
      // other commands meanwhile fail rather than dismiss it.
      {"unhandledPromptBehavior", "ignore"},
      {"timeouts", {{"pageLoad", 20'000}, {"script", 10'000}}},
      {"goog:chromeOptions",
       {{"binary", options.chromium},
        {"args",
         {"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--disable-dev-shm-usage", "--disable-crash-reporter", "--disable-breakpad",
          "--user-data-dir=" + options.dir + "/profile",
          "--window-size=" + std::to_string(options.width) + "," +
              std::to_string(options.height)}}}}};
  client_->set_read_timeout(30s);
  auto session = Command("POST", "/session", {{"capabilities", {{"alwaysMatch", capabilities}}}});
  client_->set_read_timeout(10s);
  if (session && session->contains("sessionId")) session_ = (*session)["sessionId"];
}

Browser::~Browser() {
  if (!session_.empty()) Command("DELETE", "/session/" + session_);
  if (driver_ && driver_->started()) driver_->Stop(5s);
  // The guard kills whatever of the group is left (a browser that would not quit).
  if (guard_ > 0) {
    close(guard_pipe_);
    waitpid(guard_, nullptr, 0);
  }
}

std::optional<json> Browser::Command(const std::string& method, const std::string& path,
                                     const json& body) {
  httplib::Result result =
      method == "GET" ? client_->Get(path)
      : method == "DELETE"
          ? client_->Delete(path)
          : client_->Post(path, body.is_null() ? "{}" : body.dump(), "application/json");
  if (!result) {
    error_ = method + " " + path + ": " + httplib::to_string(result.error());
    return std::nullopt;
  }
  json answer = json::parse(result->body, nullptr, false);
  if (answer.is_discarded() || !answer.contains("value")) {
    error_ = method + " " + path + ": not a WebDriver answer: " + result->body.substr(0, 300);
    return std::nullopt;
  }
  if (result->status != 200) {
    error_ = method + " " + path + ": " + answer["value"].dump().substr(0, 1000);
    return std::nullopt;
  }
  return answer["value"];
}

bool Browser::Navigate(const std::string& url) {
  client_->set_read_timeout(30s);
  const bool navigated =
      Command("POST", "/session/" + session_ + "/url", {{"url", url}}).has_value();
  client_->set_read_timeout(10s);
  return navigated;
}

std::optional<json> Browser::Execute(const std::string& body) {
  return Command("POST", "/session/" + session_ + "/execute/sync",
                 {{"script", body}, {"args", json::array()}});
}

std::optional<std::string> Browser::Text(const std::string& css) {
  auto element = Command("POST", "/session/" + session_ + "/element",
                         {{"using", "css selector"}, {"value", css}});
  if (!element || !element->contains(kElement)) return std::nullopt;
  auto text = Command("GET", "/session/" + session_ + "/element/" +
                                 (*element)[kElement].get<std::string>() + "/text");
  if (!text || !text->is_string()) return std::nullopt;
  return text->get<std::string>();
}

std::optional<std::string> Browser::DialogText() {
  auto text = Command("GET", "/session/" + session_ + "/alert/text");
  if (!text || !text->is_string()) return std::nullopt;
  return text->get<std::string>();
}

bool Browser::AnswerPrompt(const std::string& text) {
  return Command("POST", "/session/" + session_ + "/alert/text", {{"text", text}}).has_value() &&
         Command("POST", "/session/" + session_ + "/alert/accept", json::object()).has_value();
}

bool Browser::Screenshot(const std::string& path) {
  auto png = Command("GET", "/session/" + session_ + "/screenshot");
  if (!png || !png->is_string()) return false;
  const auto bytes = DecodeBase64(png->get<std::string>());
  if (!bytes) {
    error_ = "the screenshot is not base64";
    return false;
  }
  const std::string temp = path + ".tmp";
  std::ofstream(temp, std::ios::binary) << *bytes;
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  return !ec;
}

}  // namespace sluice::testing
