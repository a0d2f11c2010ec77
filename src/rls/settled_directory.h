// Tells when a configuration directory has changed and settled, so that a file is never applied
// while it is being written. A write in place (an editor saving over the file, a configuration
// tool writing it in several steps) passes through states that may parse: the beginning of a
// descriptor without its rate_limit (every call answered OK, uncounted), a number cut short
// (a limit of 2 for 2000000). The directory counts as settled when:
//   - its files (each entry's name, size, modification time and a hash of its content) are the
//     same at two polls in a row, and
//   - no file that was written has been left open by its writer (inotify: a write not yet
//     followed by its writer's close), however long the writer pauses.
// A writer that closes the file between steps and pauses longer than the poll interval is taken
// as done: write through a temporary file and a rename to change a file in one step.
//
// Thread safety: none; used by one thread at a time.
#pragma once

#include <set>
#include <string>

namespace sluice::rls {

class SettledDirectory {
 public:
  // What is in `directory` now counts as applied.
  explicit SettledDirectory(std::string directory);
  ~SettledDirectory();
  SettledDirectory(const SettledDirectory&) = delete;
  SettledDirectory& operator=(const SettledDirectory&) = delete;

  // Called once per poll interval: whether the directory differs from what was last applied and
  // has settled (see above). When it returns true, load the directory, then call Unchanged.
  bool ChangedAndSettled();
  // Whether the directory is still as ChangedAndSettled last saw it (nothing was written while
  // it was loaded); either way, that state counts as applied from now on.
  bool Unchanged();

 private:
  // Each entry's name, size, modification time and content hash.
  std::string Fingerprint() const;
  // Reads the pending inotify events into writing_.
  void ReadEvents();

  const std::string directory_;
  std::string applied_;
  std::string previous_;  // at the last poll
  int inotify_ = -1;      // -1: writers are not seen, only the two polls count
  // Files written and not yet closed by their writer.
  std::set<std::string> writing_;
};

}  // namespace sluice::rls
