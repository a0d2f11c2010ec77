#include "core/waiting_lines.h"

#include <algorithm>

namespace sluice::core {

WaiterPtr WaitingLines::Join(std::string_view key) {
  auto line_it = lines_.find(std::string(key));
  const size_t key_in_progress = line_it == lines_.end() ? 0 : line_it->second.in_progress;
  if (waiters_.size() >= bounds_.max_waiters || key_in_progress >= bounds_.max_waiters_per_key) {
    return nullptr;
  }
  if (line_it == lines_.end()) line_it = lines_.try_emplace(std::string(key)).first;
  Line& line = line_it->second;
  auto waiter = std::make_shared<Waiter>();
  waiter->id = next_id_++;
  waiter->key = line_it->first;
  waiters_.emplace(waiter->id, waiter);
  ++line.in_progress;
  line.waiting.push_back(waiter);
  return waiter;
}

WaiterPtr WaitingLines::Find(AcquireId id) const {
  auto it = waiters_.find(id);
  return it == waiters_.end() ? nullptr : it->second;
}

void WaitingLines::Remove(const WaiterPtr& w) {
  auto line_it = lines_.find(w->key);
  if (w->phase == WaitPhase::kInLine) std::erase(line_it->second.waiting, w);
  --line_it->second.in_progress;
  waiters_.erase(w->id);
  EraseIfIdle(line_it);
}

std::vector<WaiterPtr> WaitingLines::RemoveAll() {
  std::vector<WaiterPtr> all;
  all.reserve(waiters_.size());
  for (auto& [id, w] : waiters_) all.push_back(std::move(w));
  waiters_.clear();
  lines_.clear();
  return all;
}

std::vector<AcquireId> WaitingLines::ids() const {
  std::vector<AcquireId> ids;
  ids.reserve(waiters_.size());
  for (const auto& [id, w] : waiters_) ids.push_back(id);
  return ids;
}

std::vector<WaiterPtr> WaitingLines::TakeTurn(const std::string& key, bool whole_line) {
  std::vector<WaiterPtr> turn;
  auto it = lines_.find(key);
  if (it == lines_.end()) return turn;
  Line& line = it->second;
  if (line.turn_taken || line.waiting.empty()) return turn;
  line.turn_taken = true;
  const size_t n = whole_line ? line.waiting.size() : 1;
  turn.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    turn.push_back(std::move(line.waiting.front()));
    line.waiting.pop_front();
    turn.back()->phase = WaitPhase::kChecking;
  }
  return turn;
}

void WaitingLines::PassTurn(const std::string& key) {
  auto it = lines_.find(key);
  if (it == lines_.end()) return;
  it->second.turn_taken = false;
  EraseIfIdle(it);
}

void WaitingLines::ReturnToFront(const WaiterPtr& w) {
  Line& line = lines_.at(w->key);
  w->phase = WaitPhase::kInLine;
  line.waiting.push_front(w);
  line.turn_taken = false;
}

void WaitingLines::NoteDenial(const std::string& key, const Decision& denial) {
  lines_.at(key).last_denial = denial;
}

const Decision& WaitingLines::LastDenial(const std::string& key) const {
  return lines_.at(key).last_denial;
}

void WaitingLines::EraseIfIdle(std::unordered_map<std::string, Line>::iterator it) {
  if (it->second.in_progress == 0 && !it->second.turn_taken) lines_.erase(it);
}

}  // namespace sluice::core
