// actors/run_driver.cpp: see run_driver.hpp.
#include "actors/run_driver.hpp"

#include <deque>
#include <map>

#include <caf/all.hpp>

#include "actors/log.hpp"
#include "messages/type_ids.hpp"
#include "rollout/trajectory_store.hpp"

namespace caf_agent {

namespace {

using namespace messages;

struct manager_entry {
  caf::actor handle;
  std::string node_id;
  int free = 1;  // until it reports, assume room for one
};

struct driver_state {
  run_driver_options opts;
  std::shared_ptr<rollout::trajectory_store> store;
  std::deque<start_episode> plan;
  std::map<std::string, manager_entry> managers;  // by node id
  std::map<uint64_t, std::pair<std::string, start_episode>> outstanding;
  run_summary summary;
  bool finished = false;
  static inline const char* name = "run_driver";
};

using driver_actor = caf::stateful_actor<driver_state>;

void maybe_finish(driver_actor* self) {
  auto& st = self->state;
  if (st.finished || !st.plan.empty() || !st.outstanding.empty()) return;
  st.finished = true;
  log_info("driver", "run finished: " + std::to_string(st.summary.recorded) + " records (" +
                         std::to_string(st.summary.aborted) + " aborted) in " + st.summary.store_dir);
  if (st.opts.on_finished) st.opts.on_finished(st.summary);
}

void store_record(driver_actor* self, trajectory_record& rec) {
  auto& st = self->state;
  auto it = st.outstanding.find(rec.episode_id);
  if (it == st.outstanding.end()) {
    ++st.summary.duplicates;
    log_error("driver", "dropped a second record for episode " + std::to_string(rec.episode_id));
    return;
  }
  st.outstanding.erase(it);
  auto err = st.store->append(rec);
  if (!err.empty()) {
    ++st.summary.store_errors;
    log_error("driver", "episode " + std::to_string(rec.episode_id) + ": " + err);
  }
  ++st.summary.recorded;
  st.summary.aborted += rec.termination == "aborted";
  // Rationale: every episode is worth a line in small runs; at thousands, a line
  // per percent keeps the log readable.
  auto every = std::max(1, st.summary.planned / 100);
  if (st.summary.planned > 200 && st.summary.recorded % every != 0 && rec.termination != "aborted")
    return maybe_finish(self);
  log_info("driver", "episode " + std::to_string(rec.episode_id) + " " + rec.task_id + ": " +
                         rec.termination + (rec.abort_reason.empty() ? "" : " (" + rec.abort_reason + ")") +
                         ", reward " + std::to_string(rec.reward) + ", " +
                         std::to_string(rec.turns) + " turns [" + std::to_string(st.summary.recorded) +
                         "/" + std::to_string(st.summary.planned) + "]");
  maybe_finish(self);
}

void dispatch(driver_actor* self) {
  auto& st = self->state;
  for (auto& [node, m] : st.managers) {
    while (m.free > 0 && !st.plan.empty()) {
      auto start = std::move(st.plan.front());
      st.plan.pop_front();
      --m.free;
      st.outstanding[start.episode_id] = {node, start};
      self->send(m.handle, std::move(start));
    }
  }
}

/// Records every outstanding episode of `node_id` (all nodes when empty) as aborted.
void abort_outstanding(driver_actor* self, const std::string& node_id, const std::string& why) {
  auto& st = self->state;
  std::vector<uint64_t> ids;
  for (auto& [id, entry] : st.outstanding)
    if (node_id.empty() || entry.first == node_id) ids.push_back(id);
  for (auto id : ids) {
    auto& start = st.outstanding.at(id).second;
    trajectory_record rec;
    rec.episode_id = id;
    rec.attempt = start.attempt;
    rec.task_id = start.task.task_id;
    rec.mode = start.mode;
    rec.node_id = st.outstanding.at(id).first;
    rec.termination = "aborted";
    rec.abort_reason = why;
    rec.started_at_ms = rec.ended_at_ms = unix_ms();
    store_record(self, rec);
  }
}

void on_node_lost(driver_actor* self, const node_lost& lost) {
  self->state.managers.erase(lost.node_id);
  abort_outstanding(self, lost.node_id,
                    "rollout node " + lost.node_id + " lost (" + lost.reason + ")");
}

caf::behavior driver(driver_actor* self, run_driver_options opts,
                     std::shared_ptr<rollout::trajectory_store> store_holder) {
  auto& st = self->state;
  st.opts = std::move(opts);
  st.store = std::move(store_holder);
  st.summary.store_dir = st.opts.store_dir;
  for (int i = 0; i < st.opts.episodes; ++i) {
    start_episode s;
    s.episode_id = static_cast<uint64_t>(i + 1);
    s.task = st.opts.tasks[static_cast<size_t>(i) % st.opts.tasks.size()];
    s.mode = st.opts.mode;
    s.max_turns = st.opts.max_turns;
    s.wall_limit_ms = st.opts.wall_limit_ms;
    s.seed = st.opts.seed * 1000003 + static_cast<uint64_t>(i);
    st.plan.push_back(std::move(s));
  }
  st.summary.planned = st.opts.episodes;
  if (st.opts.coordinator) self->send(st.opts.coordinator, atoms::subscribe::value);
  maybe_finish(self);
  return {
      [=](service_announce& svc, caf::actor handle) {
        if (svc.name != "rollout") return;
        self->state.managers[svc.node_id] = {handle, svc.node_id, 1};
        dispatch(self);
      },
      [=](rollout_capacity& cap) {
        auto it = self->state.managers.find(cap.node_id);
        if (it == self->state.managers.end()) return;
        it->second.free = cap.free_slots;
        dispatch(self);
      },
      [=](trajectory_record& rec) { store_record(self, rec); },
      [=](node_lost& lost) { on_node_lost(self, lost); },
      [=](atoms::stop, const std::string& why) -> bool {
        // Interrupted: episodes not yet started need no record; started ones get one.
        self->state.plan.clear();
        self->state.summary.planned = self->state.summary.recorded +
                                      static_cast<int>(self->state.outstanding.size());
        abort_outstanding(self, "", "run interrupted (" + why + ")");
        return true;
      },
      [=](atoms::stats) -> std::map<std::string, double> {
        auto& s = self->state;
        return {{"planned", double(s.summary.planned)}, {"recorded", double(s.summary.recorded)},
                {"aborted", double(s.summary.aborted)}, {"outstanding", double(s.outstanding.size())},
                {"queued", double(s.plan.size())}};
      },
  };
}

}  // namespace

caf::actor spawn_run_driver(caf::actor_system& sys, run_driver_options opts, std::string& error) {
  std::unique_ptr<rollout::trajectory_store> store;
  if (auto err = rollout::trajectory_store::open(opts.store_dir, store)) {
    error = *err;
    return nullptr;
  }
  if (opts.tasks.empty() && opts.episodes > 0) {
    error = "no tasks to run";
    return nullptr;
  }
  auto holder = std::shared_ptr<rollout::trajectory_store>(store.release());
  return sys.spawn(driver, std::move(opts), holder);
}

}  // namespace caf_agent
