#include "rls/settled_directory.h"

#include <spdlog/spdlog.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::rls {
namespace {

// Files the loader reads (LoadConfigDirectory): an editor's swap file, open for writing as long
// as the file is edited, is not one.
bool IsConfigFile(std::string_view name) {
  return !name.starts_with('.') && (name.ends_with(".yaml") || name.ends_with(".yml"));
}

// The loader refuses larger files; beyond, their size and time tell a change.
constexpr size_t kMaxHashedBytes = 16 << 20;

// FNV-1a of the file's content: any change of its bytes, even one that keeps its size and its
// modification time (within the file system's resolution).
uint64_t ContentHash(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 64 * 1024> chunk;
  uint64_t hash = 14695981039346656037ull;
  for (size_t read = 0;
       read <= kMaxHashedBytes && (in.read(chunk.data(), chunk.size()) || in.gcount() > 0);
       read += static_cast<size_t>(in.gcount())) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      hash = (hash ^ static_cast<unsigned char>(chunk[static_cast<size_t>(i)])) * 1099511628211ull;
    }
  }
  return hash;
}

}  // namespace

SettledDirectory::SettledDirectory(std::string directory) : directory_(std::move(directory)) {
  inotify_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_ >= 0 &&
      inotify_add_watch(inotify_, directory_.c_str(),
                        IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM) < 0) {
    close(inotify_);
    inotify_ = -1;
  }
  if (inotify_ < 0) {
    spdlog::warn(
        "rls: cannot watch {} for writers ({}); a file is reloaded once unchanged for a poll",
        directory_, std::strerror(errno));
  }
  applied_ = previous_ = Fingerprint();
}

SettledDirectory::~SettledDirectory() {
  if (inotify_ >= 0) close(inotify_);
}

std::string SettledDirectory::Fingerprint() const {
  namespace fs = std::filesystem;
  std::vector<std::string> files;  // in name order: the directory's own may change
  std::error_code error;
  for (fs::directory_iterator it(directory_, error), end; !error && it != end;
       it.increment(error)) {
    if (!IsConfigFile(it->path().filename().string())) continue;
    std::error_code ignored;
    const auto time = fs::last_write_time(it->path(), ignored);  // follows links, as loading does
    const auto size = fs::file_size(it->path(), ignored);
    files.push_back(it->path().filename().string() + '\0' +
                    std::to_string(time.time_since_epoch().count()) + '\0' + std::to_string(size) +
                    '\0' + std::to_string(ContentHash(it->path())) + '\n');
  }
  if (error) return "unreadable: " + error.message();
  std::sort(files.begin(), files.end());
  std::string print;
  for (const std::string& file : files) print += file;
  return print;
}

void SettledDirectory::ReadEvents() {
  if (inotify_ < 0) return;
  alignas(inotify_event) std::array<char, 16 * 1024> events;
  for (;;) {
    const ssize_t n = read(inotify_, events.data(), events.size());
    if (n <= 0) return;  // EAGAIN: none pending
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(events.data() + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if (event->mask & IN_Q_OVERFLOW) {
        writing_.clear();  // events were lost: the two polls still count
        continue;
      }
      if (event->len == 0) continue;
      const std::string name(event->name);  // NUL-padded
      if (!IsConfigFile(name)) continue;
      if (event->mask & IN_MODIFY) {
        writing_.insert(name);
      } else {
        writing_.erase(name);  // closed by its writer, deleted, or moved away
      }
    }
  }
}

bool SettledDirectory::ChangedAndSettled() {
  ReadEvents();
  std::string now = Fingerprint();
  const bool settled = now == previous_ && writing_.empty();
  previous_ = std::move(now);
  return settled && previous_ != applied_;
}

bool SettledDirectory::Unchanged() {
  ReadEvents();
  applied_ = previous_;
  return writing_.empty() && Fingerprint() == previous_;
}

}  // namespace sluice::rls
