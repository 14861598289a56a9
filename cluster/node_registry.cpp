// cluster/node_registry.cpp: see node_registry.hpp.
#include "cluster/node_registry.hpp"

namespace caf_agent::cluster {

using messages::node_state;

std::optional<std::string> node_registry::check(const messages::register_node& msg) const {
  if (msg.version != messages::protocol_version)
    return "protocol version " + std::to_string(msg.version) + " does not match coordinator's " +
           std::to_string(messages::protocol_version);
  if (msg.info.node_id.empty()) return "empty node id";
  // Rationale: CAF carries the role's number; a peer of another build may send one this build
  // has no name for.
  if (messages::name_of(msg.info.role) == "?")
    return "unknown role value " + std::to_string(static_cast<int>(msg.info.role));
  return std::nullopt;
}

node_event node_registry::add(const messages::node_info& info, int64_t now_ms) {
  auto& entry = nodes_[info.node_id];
  const node_state from = entry.state;
  entry.info = info;
  entry.state = node_state::up;
  entry.reason.clear();
  entry.last_seen_ms = now_ms;
  return {info.node_id, from, node_state::up, "registered"};
}

std::optional<node_event> node_registry::heartbeat(const messages::node_heartbeat& hb, int64_t now_ms) {
  auto it = nodes_.find(hb.node_id);
  if (it == nodes_.end()) return std::nullopt;
  it->second.last_seen_ms = now_ms;
  it->second.counters = hb.counters;
  if (it->second.state == node_state::stale) return transition(hb.node_id, node_state::up, "heartbeat resumed");
  return std::nullopt;
}

std::optional<node_event> node_registry::down(const std::string& node_id, const std::string& reason) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.state == node_state::left || it->second.state == node_state::down)
    return std::nullopt;
  return transition(node_id, node_state::down, reason);
}

std::optional<node_event> node_registry::left(const std::string& node_id, const std::string& reason) {
  if (!nodes_.contains(node_id)) return std::nullopt;
  return transition(node_id, node_state::left, reason);
}

std::vector<node_event> node_registry::expire(int64_t now_ms) {
  std::vector<node_event> events;
  for (auto& [id, st] : nodes_) {
    if (st.state == node_state::up && now_ms - st.last_seen_ms > timeout_ms_) {
      auto silent = std::to_string(now_ms - st.last_seen_ms);
      if (auto ev = transition(id, node_state::stale, "no heartbeat for " + silent + " ms")) events.push_back(*ev);
    }
  }
  return events;
}

std::vector<messages::node_status> node_registry::snapshot(bool include_left) const {
  std::vector<messages::node_status> out;
  for (auto& [id, st] : nodes_)
    if (include_left || st.state != node_state::left) out.push_back(st);
  return out;
}

size_t node_registry::up_count() const {
  size_t n = 0;
  for (auto& [id, st] : nodes_) n += st.state == node_state::up;
  return n;
}

std::optional<node_event> node_registry::transition(const std::string& node_id, node_state to,
                                                    const std::string& reason) {
  auto& st = nodes_.at(node_id);
  if (st.state == to) return std::nullopt;
  node_event ev{node_id, st.state, to, reason};
  st.state = to;
  st.reason = reason;
  return ev;
}

}  // namespace caf_agent::cluster
