// The acquires an Acquirer has in progress, and the line each key's acquires wait in: first come,
// first served, one turn at a time to check the store (a store call, or a head sleeping until
// its next check holds the key's turn). It bounds the acquires in progress, per key and in all,
// and keeps a key's line while the key has an acquire in progress or its turn is taken.
// What an acquire does with its turn is the Acquirer's (src/core/acquirer.cc).
//
// Thread safety: none; the Acquirer's mutex guards it and the Waiters it holds.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/acquirer.h"
#include "sluice/decision.h"
#include "sluice/timers.h"

namespace sluice::core {

enum class WaitPhase {
  kInLine,    // waiting for its turn to check
  kChecking,  // in a store call
  kSleeping,  // the head of its line, denied, until its retry_after
  kBooked,    // its slot is booked, until the slot comes
};

// One acquire in progress.
struct Waiter {
  AcquireId id = 0;
  std::string key;
  int64_t cost = 0;
  Time start, deadline;
  AcquireCallback done;
  WaitPhase phase = WaitPhase::kInLine;
  std::optional<Timers::Id> timer;
  bool cancelled = false;  // while kChecking
  Decision last;           // the store's last decision for it
};
using WaiterPtr = std::shared_ptr<Waiter>;

class WaitingLines {
 public:
  explicit WaitingLines(const AcquirerOptions& bounds) : bounds_(bounds) {}

  // A new acquire of `key`, with its id and key set, at the back of the key's line; null when
  // the key, or the Acquirer, has as many acquires in progress as its bound allows.
  WaiterPtr Join(std::string_view key);
  // The acquire `id`, if it is in progress.
  WaiterPtr Find(AcquireId id) const;
  // The acquire ends: it is no longer in progress, nor in its line if it was in line.
  void Remove(const WaiterPtr& w);
  // Every acquire in progress, taken out at once (for a shutdown).
  std::vector<WaiterPtr> RemoveAll();
  std::vector<AcquireId> ids() const;
  size_t size() const { return waiters_.size(); }

  // If `key`'s turn is free, takes it for the acquires at the front of its line: the whole line,
  // or only its head. They leave the line, in line order, and are kChecking. Empty, and nothing
  // taken, otherwise.
  std::vector<WaiterPtr> TakeTurn(const std::string& key, bool whole_line);
  // Gives `key`'s turn back.
  void PassTurn(const std::string& key);
  // A head that slept until its retry goes back to the front of its line, kInLine, and gives the
  // turn back.
  void ReturnToFront(const WaiterPtr& w);

  // The key's last denial by the store, for the acquires that run out of time in line.
  void NoteDenial(const std::string& key, const Decision& denial);
  const Decision& LastDenial(const std::string& key) const;

 private:
  struct Line {
    std::deque<WaiterPtr> waiting;  // kInLine, first come first
    bool turn_taken = false;
    size_t in_progress = 0;  // the key's acquires, whatever their phase
    Decision last_denial;
  };

  void EraseIfIdle(std::unordered_map<std::string, Line>::iterator it);

  const AcquirerOptions bounds_;
  AcquireId next_id_ = 1;
  std::unordered_map<AcquireId, WaiterPtr> waiters_;
  std::unordered_map<std::string, Line> lines_;
};

}  // namespace sluice::core
