// actors/run_driver.cpp: see run_driver.hpp.
#include "actors/run_driver.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include <caf/all.hpp>

#include "actors/observed_actor.hpp"
#include "actors/rollout_manager.hpp"
#include "base/log.hpp"
#include "messages/type_ids.hpp"
#include "observe/run_board.hpp"
#include "rollout/dispatch_ledger.hpp"
#include "rollout/trajectory_store.hpp"

namespace caf_agent {

namespace {

using namespace messages;

struct driver_state {
  run_driver_options opts;
  std::shared_ptr<rollout::trajectory_store> store;
  rollout::dispatch_ledger ledger;
  std::map<uint64_t, start_episode> episodes;             // every planned episode without a record at start
  std::map<std::string, rollout_manager_actor> managers;  // by node id
  run_summary summary;
  bool finished = false;
  static inline const char* name = "run_driver";
};

using driver_actor = observed_actor<driver_state>;

std::string kept_text(const rollout::trajectory_store& store) {
  auto ids = store.episode_ids();
  return std::to_string(ids.size()) + " records" +
         (ids.empty() ? std::string{} : " (episodes " + format_id_ranges(ids) + ")");
}

void finish(driver_actor* self) {
  auto& st = self->state;
  st.finished = true;
  st.summary.kept = kept_text(*st.store);
  if (st.summary.storage_error.empty())
    log_info("driver", "run finished: " + std::to_string(st.summary.recorded) + " records (" +
                           std::to_string(st.summary.aborted) + " aborted) in " + st.summary.store_dir);
  // Evaluations per pool come from the rollout managers that routed them; a manager that
  // does not answer in time is left out of the count, not waited for.
  auto managers = std::make_shared<size_t>(st.managers.size());
  auto done = [self] {
    if (self->state.opts.on_finished) self->state.opts.on_finished(self->state.summary);
  };
  if (st.managers.empty()) return done();
  for (auto& [node, handle] : st.managers)
    self->request(handle, std::chrono::seconds(2), atoms::stats::value, std::string{"evaluations"})
        .then(
            [=](std::string& lines) {
              std::istringstream in{lines};
              std::string pool;
              int64_t n = 0;
              while (in >> pool >> n) self->state.summary.evaluations_per_pool[pool] += n;
              if (--*managers == 0) done();
            },
            [=](caf::error&) {
              if (--*managers == 0) done();
            });
}

void maybe_finish(driver_actor* self) {
  auto& st = self->state;
  if (!st.finished && st.ledger.open_episodes() == 0) finish(self);
}

/// The store failed: admission closes and the run ends now, loudly, with what was kept.
void storage_failed(driver_actor* self, const std::string& err) {
  auto& st = self->state;
  if (st.finished) return;
  st.ledger.drop_queue();
  st.summary.storage_error = err;
  log_error("driver", "storage failed: " + err + "; admission closed; kept " + kept_text(*st.store) + " in " +
                          st.summary.store_dir);
  finish(self);
}

/// Writes a record the ledger has accepted; counts and logs it.
void append_record(driver_actor* self, trajectory_record& rec) {
  auto& st = self->state;
  if (st.finished) return;  // the store already failed
  if (auto err = st.store->append(rec); !err.empty()) {
    ++st.summary.store_errors;
    return storage_failed(self, "episode " + std::to_string(rec.episode_id) + ": " + err);
  }
  ++st.summary.recorded;
  st.summary.aborted += rec.termination == episode_end::aborted;
  observe::run_board::process().on_record(rec);
  // Rationale: every episode is worth a line in small runs; at thousands, a line
  // per percent keeps the log readable.
  auto every = std::max(1, st.summary.planned / 100);
  auto done = st.summary.recorded + st.summary.resumed;
  if (st.summary.planned <= 200 || done % every == 0 || rec.termination == episode_end::aborted)
    log_info("driver", "episode " + std::to_string(rec.episode_id) + " " + rec.task_id + ": " +
                           to_string(rec.termination) +
                           (rec.abort_reason.empty() ? "" : " (" + rec.abort_reason + ")") + ", reward " +
                           std::to_string(rec.reward) + ", " + std::to_string(rec.turns) + " turns [" +
                           std::to_string(done) + "/" + std::to_string(st.summary.planned) + "]");
}

/// A record from `from` (empty: the driver's own): stored if it is the episode's first.
void store_record(driver_actor* self, trajectory_record& rec, const std::string& from) {
  auto& st = self->state;
  auto outcome = st.ledger.record(from, rec.episode_id);
  if (outcome == rollout::record_outcome::stored) return append_record(self, rec);
  if (outcome == rollout::record_outcome::duplicate) ++st.summary.duplicates;
  log_error("driver",
            std::string{outcome == rollout::record_outcome::duplicate ? "dropped a second" : "dropped an unplanned"} +
                " record for episode " + std::to_string(rec.episode_id) + (from.empty() ? "" : " from " + from));
}

void dispatch(driver_actor* self) {
  auto& st = self->state;
  if (st.finished) return;
  for (auto& a : st.ledger.assign()) {
    auto start = st.episodes.at(a.episode_id);
    start.attempt = a.attempt;
    self->send(st.managers.at(a.node), std::move(start));
  }
  maybe_finish(self);
}

trajectory_record aborted_record(const start_episode& start, int32_t attempt, const std::string& node,
                                 const std::string& why) {
  trajectory_record rec;
  rec.episode_id = start.episode_id;
  rec.attempt = attempt;
  rec.task_id = start.task.task_id;
  rec.mode = start.mode;
  rec.node_id = node;
  rec.termination = episode_end::aborted;
  rec.abort_reason = why;
  rec.started_at_ms = rec.ended_at_ms = unix_ms();
  return rec;
}

void on_node_lost(driver_actor* self, const std::string& node, const std::string& reason) {
  auto& st = self->state;
  st.managers.erase(node);
  if (!st.ledger.has_node(node)) return;
  auto loss = st.ledger.node_lost(node);
  if (!loss.requeued.empty()) {
    st.summary.requeued += static_cast<int>(loss.requeued.size());
    log_info("driver", "rollout node " + node + " lost (" + reason + "): episodes " + format_id_ranges(loss.requeued) +
                           " go back to the queue");
  }
  // The ledger already counts these as ended; a record of the node's own that arrives
  // after all is dropped as a second one.
  for (auto& a : loss.aborted) {
    auto rec = aborted_record(st.episodes.at(a.episode_id), a.attempt, node,
                              "rollout node " + node + " lost (" + reason + ")");
    append_record(self, rec);
  }
  dispatch(self);
}

void on_rollout_service(driver_actor* self, const std::string& node, const caf::actor& service) {
  auto& st = self->state;
  auto handle = rollout_manager_of(service);
  auto it = st.managers.find(node);
  if (it != st.managers.end() && it->second != handle)  // a new incarnation: the old one is gone
    on_node_lost(self, node, "replaced by a new rollout manager");
  st.managers[node] = handle;
  if (!st.ledger.has_node(node)) st.ledger.node_up(node, 1);  // room for one until it reports
  dispatch(self);
}

caf::behavior driver(driver_actor* self, run_driver_options opts,
                     std::shared_ptr<rollout::trajectory_store> store_holder) {
  auto& st = self->state;
  st.opts = std::move(opts);
  st.store = std::move(store_holder);
  st.ledger = rollout::dispatch_ledger{st.opts.retry_aborted};
  st.summary.store_dir = st.opts.store_dir;
  auto plan = st.opts.planned.empty() ? plan_episodes(st.opts) : st.opts.planned;
  st.summary.planned = static_cast<int>(plan.size());
  observe::run_board::process().start(st.opts.store_dir, to_string(st.opts.mode), st.summary.planned);
  for (auto& s : plan) {
    if (st.store->contains(s.episode_id)) {
      ++st.summary.resumed;
      continue;
    }
    st.ledger.plan(s.episode_id, s.attempt);
    st.episodes[s.episode_id] = std::move(s);
  }
  if (st.summary.resumed > 0)
    log_info("driver", "resuming: " + std::to_string(st.summary.resumed) + " of " + std::to_string(st.summary.planned) +
                           " planned episodes have a record; " + std::to_string(st.ledger.open_episodes()) + " to run");
  if (st.opts.coordinator) self->send(st.opts.coordinator, atoms::subscribe::value);
  maybe_finish(self);
  return {
      [=](service_announce& svc, caf::actor handle) {
        if (is_service(svc.name, service_kind::rollout)) on_rollout_service(self, svc.node_id, handle);
      },
      [=](rollout_capacity& cap) {
        // Only the limit is taken: the counts are the driver's own.
        auto& s = self->state;
        if (!s.ledger.has_node(cap.node_id) || cap.limit <= 0) return;
        s.ledger.node_up(cap.node_id, cap.limit);
        dispatch(self);
      },
      [=](episode_started& es) {
        self->state.ledger.started(es.node_id, es.episode_id);
        observe::run_board::process().on_started();
      },
      [=](trajectory_record& rec) {
        auto from = rec.node_id;
        store_record(self, rec, from);
        dispatch(self);
      },
      [=](node_lost& lost) { on_node_lost(self, lost.node_id, lost.reason); },
      [=](atoms::stop, const std::string& why) -> bool {
        // Interrupted: episodes not yet sent need no record; sent ones get one.
        auto& s = self->state;
        if (s.finished) return true;
        auto dropped = s.ledger.drop_queue();
        s.summary.planned -= static_cast<int>(dropped.size());
        for (auto& a : s.ledger.outstanding()) {
          auto rec = aborted_record(s.episodes.at(a.episode_id), a.attempt, a.node, "run interrupted (" + why + ")");
          store_record(self, rec, "");
        }
        return true;
      },
      [=](atoms::stats) -> std::map<std::string, double> {
        auto& s = self->state;
        std::map<std::string, double> out{{"planned", double(s.summary.planned)},
                                          {"recorded", double(s.summary.recorded)},
                                          {"aborted", double(s.summary.aborted)},
                                          {"requeued", double(s.summary.requeued)},
                                          {"resumed", double(s.summary.resumed)},
                                          {"duplicates", double(s.summary.duplicates)},
                                          {"outstanding", double(s.ledger.outstanding().size())},
                                          {"queued", double(s.ledger.queued())}};
        for (auto& node : s.ledger.nodes()) {
          out["in_flight@" + node] = s.ledger.in_flight(node);
          out["limit@" + node] = s.ledger.limit(node);
        }
        return out;
      },
  };
}

}  // namespace

std::vector<start_episode> plan_episodes(const run_driver_options& opts) {
  std::vector<start_episode> out;
  for (int i = 0; i < opts.episodes && !opts.tasks.empty(); ++i) {
    start_episode s;
    s.episode_id = static_cast<uint64_t>(i + 1);
    s.task = opts.tasks[static_cast<size_t>(i) % opts.tasks.size()];
    s.mode = opts.mode;
    s.max_turns = opts.max_turns;
    s.wall_limit_ms = opts.wall_limit_ms;
    s.seed = opts.seed * 1000003 + static_cast<uint64_t>(i);
    out.push_back(std::move(s));
  }
  return out;
}

std::string format_id_ranges(std::vector<uint64_t> ids) {
  std::sort(ids.begin(), ids.end());
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(ids[i]) + (j > i ? "-" + std::to_string(ids[j]) : "");
    i = j + 1;
  }
  return out;
}

caf::actor spawn_run_driver(caf::actor_system& sys, run_driver_options opts, std::string& error) {
  if (opts.tasks.empty() && opts.episodes > 0 && opts.planned.empty()) {
    error = "no tasks to run";
    return nullptr;
  }
  std::unique_ptr<rollout::trajectory_store> store;
  if (auto err = rollout::trajectory_store::open(opts.store_dir, store)) {
    error = *err;
    return nullptr;
  }
  auto holder = std::shared_ptr<rollout::trajectory_store>(store.release());
  return sys.spawn(driver, std::move(opts), holder);
}

}  // namespace caf_agent
