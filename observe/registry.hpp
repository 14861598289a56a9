#pragma once
/// observe/registry.hpp: the node-local registry of actors and what they work on.
///
/// One registry per process (`metrics_registry::process()`): instrumented actors
/// (actors/instrument.hpp) each own an `actor_cell` they update on their own thread
/// without contention; kinds keep the totals of actors that ended. Episodes, GPU
/// pools and finished turns post their state to boards here. `snapshot()` is what the
/// node agent sends with each heartbeat; the coordinator aggregates (observe/cluster_view).
///
/// Cost: a handled message costs two clock reads, a few relaxed atomic adds and one
/// uncontended lock of the actor's own cell (bench/results/2026-12-01-observability.md).

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "messages/cluster.hpp"
#include "observe/histogram.hpp"

namespace caf_agent::observe {

/// Identifies a message type cheaply: its C++ type and, for atoms, the atom's value.
struct type_key {
  const void* type = nullptr;
  uint64_t atom = 0;
  friend bool operator==(const type_key&, const type_key&) = default;
};

/// Live counters of one actor. `handled` runs on the actor's thread; snapshots read.
class actor_cell {
 public:
  actor_cell(std::string kind, uint64_t id) : kind_(std::move(kind)), id_(id) {}
  /// One message handled: `name` is called only the first time this cell sees `key`.
  void handled(type_key key, std::string (*name)(const void*), const void* ctx, int64_t mailbox, int64_t ns);
  const std::string& kind() const { return kind_; }
  uint64_t id() const { return id_; }
  messages::actor_top top() const;
  /// Adds this cell's counters to `out` (the kind's view).
  void add_to(messages::actor_kind_metrics& out, histogram& hist) const;

 private:
  struct per_type {
    type_key key;
    std::string name;
    int64_t count = 0;
    int64_t ns = 0;
  };
  std::string kind_;
  uint64_t id_ = 0;
  std::atomic<int64_t> mailbox_{0}, mailbox_peak_{0}, processed_{0}, busy_ns_{0};
  mutable std::mutex mutex_;  // types_ and hist_: the actor's thread and snapshots
  std::vector<per_type> types_;
  histogram hist_;
};

/// The process's registry.
class metrics_registry {
 public:
  /// The registry of this process.
  static metrics_registry& process();

  /// Off: instrument() wraps nothing and boards ignore updates (for the cost benchmark).
  void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  /// A new actor of `kind`; keep the cell and pass it to remove() when it exits.
  std::shared_ptr<actor_cell> add(const std::string& kind, uint64_t id);
  /// The actor exited; `error` is empty for a normal exit.
  void remove(const std::shared_ptr<actor_cell>& cell, const std::string& error);
  /// Something an actor of `kind` owns was restarted (an eval worker, a builder).
  void note_restart(const std::string& kind, const std::string& reason);

  /// Updates (creating) the progress of episode `id`.
  void episode_update(uint64_t id, const std::function<void(messages::episode_progress&)>& f);
  /// The episode ended (its record was sent).
  void episode_done(uint64_t id);
  /// A turn ended after `us` microseconds (for the median a stuck turn is measured against).
  void turn_finished(int64_t us);
  /// A GPU pool's current slots and queue (its wait buckets are kept from pool_wait).
  void pool_update(const messages::pool_metrics& m);
  /// A job of pool `name` waited `us` microseconds for a slot.
  void pool_wait(const std::string& name, int64_t us);

  /// What the process reports: kinds, the `top_n` busiest actors, episodes, turns, pools.
  messages::node_metrics snapshot(size_t top_n = 10) const;

  /// Forgets everything (tests).
  void reset();

 private:
  struct kind_totals {
    int64_t spawned = 0, running = 0, errors = 0, restarts = 0;
    messages::actor_kind_metrics ended;  // counters of actors that exited
    histogram ended_hist;
    std::deque<std::string> reasons;
  };
  std::atomic<bool> enabled_{true};
  mutable std::mutex mutex_;  // everything below
  std::map<std::string, kind_totals> kinds_;
  std::map<const actor_cell*, std::shared_ptr<actor_cell>> live_;
  std::map<uint64_t, messages::episode_progress> episodes_;
  histogram turns_;
  std::map<std::string, messages::pool_metrics> pools_;
  std::map<std::string, histogram> pool_waits_;
};

/// The process key of a node (host:pid).
std::string process_key();

}  // namespace caf_agent::observe
