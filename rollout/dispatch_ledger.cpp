// rollout/dispatch_ledger.cpp: see dispatch_ledger.hpp.
#include "rollout/dispatch_ledger.hpp"

#include <algorithm>

namespace caf_agent::rollout {

void dispatch_ledger::plan(uint64_t episode_id, int32_t attempt) {
  if (episodes_.contains(episode_id)) return;
  episodes_[episode_id] = {phase::queued, "", attempt};
  queue_.push_back(episode_id);
  ++queued_count_;
  ++planned_;
}

void dispatch_ledger::node_up(const std::string& node, int32_t limit) {
  nodes_[node].limit = std::max<int32_t>(0, limit);
}

std::vector<ledger_assignment> dispatch_ledger::assign() {
  std::vector<ledger_assignment> out;
  while (queued_count_ > 0) {
    // The node with room and the smallest share of its limit in use.
    node_entry* best = nullptr;
    const std::string* best_name = nullptr;
    for (auto& [name, n] : nodes_) {
      auto held = static_cast<int64_t>(n.holding.size());
      if (held >= n.limit) continue;
      if (best && held * best->limit >= static_cast<int64_t>(best->holding.size()) * n.limit) continue;
      best = &n;
      best_name = &name;
    }
    if (!best) break;
    while (!queue_.empty() && episodes_.at(queue_.front()).state != phase::queued) queue_.pop_front();
    if (queue_.empty()) break;  // unreachable while queued_count_ is consistent
    auto id = queue_.front();
    queue_.pop_front();
    auto& e = episodes_.at(id);
    e.state = phase::sent;
    e.node = *best_name;
    best->holding.insert(id);
    --queued_count_;
    out.push_back({id, *best_name, e.attempt});
  }
  return out;
}

void dispatch_ledger::started(const std::string& node, uint64_t episode_id) {
  auto it = episodes_.find(episode_id);
  if (it == episodes_.end()) return;
  if (it->second.state == phase::sent && it->second.node == node) it->second.state = phase::started;
}

record_outcome dispatch_ledger::record(const std::string& node, uint64_t episode_id) {
  auto it = episodes_.find(episode_id);
  if (it == episodes_.end()) return record_outcome::unknown;
  auto& e = it->second;
  // The sender's place frees whatever the episode's state: it no longer runs it.
  if (auto n = nodes_.find(node.empty() ? e.node : node); n != nodes_.end()) n->second.holding.erase(episode_id);
  if (e.state == phase::done) return record_outcome::duplicate;
  if (e.state == phase::queued) --queued_count_;  // a lost node's late record: no re-run needed
  // A record from another node than the current holder (a lost node that was only
  // frozen) ends the episode; the holder keeps its place until its own record.
  e.state = phase::done;
  ++done_;
  return record_outcome::stored;
}

ledger_loss dispatch_ledger::node_lost(const std::string& node) {
  ledger_loss loss;
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return loss;
  for (auto id : it->second.holding) {
    auto& e = episodes_.at(id);
    if (e.state == phase::done || e.node != node) continue;
    if (e.state == phase::started && !retry_aborted_) {
      loss.aborted.push_back({id, node, e.attempt});
      e.state = phase::done;
      ++done_;
      continue;
    }
    if (e.state == phase::started) ++e.attempt;
    e.state = phase::queued;
    e.node.clear();
    loss.requeued.push_back(id);
  }
  nodes_.erase(it);
  // Back at the front, in their original order: they were due before what still waits.
  for (auto r = loss.requeued.rbegin(); r != loss.requeued.rend(); ++r) queue_.push_front(*r);
  queued_count_ += loss.requeued.size();
  return loss;
}

std::vector<uint64_t> dispatch_ledger::drop_queue() {
  std::vector<uint64_t> dropped;
  for (auto id : queue_) {
    auto it = episodes_.find(id);
    if (it == episodes_.end() || it->second.state != phase::queued) continue;
    dropped.push_back(id);
    episodes_.erase(it);
    --planned_;
  }
  queue_.clear();
  queued_count_ = 0;
  return dropped;
}

std::vector<ledger_assignment> dispatch_ledger::outstanding() const {
  std::vector<ledger_assignment> out;
  for (auto& [id, e] : episodes_)
    if (e.state == phase::sent || e.state == phase::started) out.push_back({id, e.node, e.attempt});
  return out;
}

int32_t dispatch_ledger::in_flight(const std::string& node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? 0 : static_cast<int32_t>(it->second.holding.size());
}

int32_t dispatch_ledger::limit(const std::string& node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? 0 : it->second.limit;
}

std::vector<std::string> dispatch_ledger::nodes() const {
  std::vector<std::string> out;
  for (auto& [name, n] : nodes_) out.push_back(name);
  return out;
}

int32_t dispatch_ledger::attempt(uint64_t episode_id) const {
  auto it = episodes_.find(episode_id);
  return it == episodes_.end() ? 0 : it->second.attempt;
}

}  // namespace caf_agent::rollout
