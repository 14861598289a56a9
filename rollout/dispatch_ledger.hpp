#pragma once
/// rollout/dispatch_ledger.hpp: which planned episode is where, without actors.
///
/// The run driver's bookkeeping as a pure class. A node's load is counted from what
/// the driver sent it and what the node recorded, never from the node's capacity
/// reports (a report computed before later sends arrived would over-count its room).
/// Invariants (tests/rollout/dispatch_ledger_test.cpp checks them over random
/// interleavings): no node holds more episodes than its limit; every planned episode
/// ends done exactly once; an episode of a lost node that never started goes back to
/// the queue, one that started is aborted (or re-queued when `retry_aborted`).

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace caf_agent::rollout {

/// One episode handed to a node.
struct ledger_assignment {
  uint64_t episode_id = 0;
  std::string node;
  int32_t attempt = 0;  ///< 0 first, then one more per re-run of a started episode
};

/// What a node's loss did to its episodes.
struct ledger_loss {
  std::vector<uint64_t> requeued;          ///< never started (or retried): will run again
  std::vector<ledger_assignment> aborted;  ///< started: record them as aborted
};

/// How a record was taken.
enum class record_outcome {
  stored,     ///< the episode's first record: store it
  duplicate,  ///< the episode already ended: drop it
  unknown,    ///< not a planned episode
};

/// Bookkeeping of one run's episodes across rollout nodes.
class dispatch_ledger {
 public:
  /// `retry_aborted`: started episodes of a lost node run again instead of being aborted.
  explicit dispatch_ledger(bool retry_aborted = false) : retry_aborted_(retry_aborted) {}

  /// Adds an episode to the end of the queue (an id already planned is ignored).
  void plan(uint64_t episode_id, int32_t attempt = 0);

  /// A node joined (or changed its limit). A node id not seen before starts empty.
  void node_up(const std::string& node, int32_t limit);

  /// True while `node` is known (joined and not lost).
  bool has_node(const std::string& node) const { return nodes_.contains(node); }

  /// Hands queued episodes to nodes with room, the least loaded (in flight / limit) first.
  std::vector<ledger_assignment> assign();

  /// The node says the episode began there.
  void started(const std::string& node, uint64_t episode_id);

  /// A record of `episode_id` came from `node`; frees the node's place for it.
  record_outcome record(const std::string& node, uint64_t episode_id);

  /// The driver records an episode itself (aborted: the run was interrupted or failed).
  record_outcome record_here(uint64_t episode_id) { return record("", episode_id); }

  /// `node` is gone: its unstarted episodes go back to the queue (front, in order).
  ledger_loss node_lost(const std::string& node);

  /// Drops the queue (admission closed for good); returns the episodes that were in it.
  std::vector<uint64_t> drop_queue();

  /// Every episode sent and not yet recorded, with its node.
  std::vector<ledger_assignment> outstanding() const;

  /// Episodes on `node` now (sent, not recorded); 0 for unknown nodes.
  int32_t in_flight(const std::string& node) const;
  /// The node's limit; 0 for unknown nodes.
  int32_t limit(const std::string& node) const;
  /// Every known node.
  std::vector<std::string> nodes() const;
  /// Episodes waiting to be sent.
  size_t queued() const { return queued_count_; }
  /// Planned episodes that have not ended.
  size_t open_episodes() const { return planned_ - done_; }
  /// Attempt number of `episode_id` (0 when unknown).
  int32_t attempt(uint64_t episode_id) const;

 private:
  enum class phase { queued, sent, started, done };
  struct episode {
    phase state = phase::queued;
    std::string node;
    int32_t attempt = 0;
  };
  struct node_entry {
    int32_t limit = 0;
    std::set<uint64_t> holding;  // sent to it and not recorded by it
  };
  bool retry_aborted_;
  std::map<uint64_t, episode> episodes_;
  std::deque<uint64_t> queue_;  // may hold ids that ended meanwhile; skipped on assign
  size_t queued_count_ = 0;
  size_t planned_ = 0;
  size_t done_ = 0;
  std::map<std::string, node_entry> nodes_;
};

}  // namespace caf_agent::rollout
