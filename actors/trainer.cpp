// actors/trainer.cpp: see trainer.hpp.
#include "actors/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include <caf/all.hpp>

#include "actors/policy_server.hpp"
#include "actors/run_driver.hpp"
#include "base/log.hpp"
#include "messages/type_ids.hpp"
#include "rollout/run_plan.hpp"
#include "rollout/shard_batches.hpp"
#include "rollout/train_plan.hpp"
#include "rollout/training_set.hpp"
#include "rollout/trajectory_store.hpp"

namespace caf_agent {

namespace {

namespace fs = std::filesystem;
using namespace messages;
using nlohmann::json;
using steady = std::chrono::steady_clock;

enum class phase { idle, rollout, evaluating, waiting_shards, training, publishing, finished };

struct shard_ref {
  std::string node;
  caf::actor handle;
};

/// The iteration an asynchronous run plays ahead (train.async) while the step of the one in
/// progress runs; its driver is the trainer's `driver` meanwhile.
struct play_ahead {
  bool playing = false;  ///< its driver plays and the iteration is not the current one yet
  bool done = false;     ///< its driver finished first; `summary` says how
  run_summary summary;
  steady::time_point start, end;
};

/// What an iteration's records say about the policy (its log line).
struct iteration_stats {
  int64_t episodes = 0, aborted = 0, correct = 0;
  double reward_sum = 0;
  std::map<int32_t, int64_t> tiers;
};

struct trainer_state {
  trainer_options opts;
  rollout::train_state st;
  phase ph = phase::idle;
  caf::actor driver;
  std::map<int32_t, shard_ref> shards;           // by rank
  std::map<std::string, policy_actor> policies;  // by node
  train_batch batch;                             // the step in progress: its header, no trajectories
  std::vector<train_batch> slices;               // each shard's part of it, by rank (resent on retry)
  rollout::consumed_batch consumed;              // what committing it consumes
  iteration_stats stats;
  std::map<int32_t, train_step_done> replies;
  int32_t attempt = 0;
  uint64_t generation = 1;
  steady::time_point step_start;
  steady::time_point rollout_start;      // the iteration's episodes were planned
  json phases;                           // the iteration's phase times so far (null: none)
  bool reuse = false;                    // the iteration trains on the stage's data set
  play_ahead ahead;                      // the next iteration, played while this one's step runs
  bool played_ahead = false;             // the iteration in progress was played ahead
  std::vector<uint64_t> new_stage_data;  // a demonstration play's kept ids (saved with the commit)
  bool awaiting_weights = false;         // resumed: wait until a policy service holds the version
  std::string eval_name;                 // the evaluation round in progress
  bool open_once = false;
  static inline const char* name = "trainer";
};

using trainer_actor = caf::stateful_actor<trainer_state>;

std::string store_dir(const trainer_state& s) {
  return (fs::path{s.opts.train.run_dir} / "trajectories").string();
}
std::string checkpoint_root(const std::string& run_dir) {
  return (fs::path{run_dir} / "checkpoints").string();
}

const rollout::train_stage_config& current_stage(const trainer_state& s) {
  return s.opts.train.stage(s.opts.train.stages.at(s.st.stage_index));
}

/// An evaluation round's turn limit ([train.eval] max_turns, else rollout.max_turns_eval).
int32_t eval_turns(const trainer_state& s) {
  return s.opts.train.eval.turn_limit(s.opts.rollout.max_turns_eval);
}

std::string fmt(double x, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

std::string fmt_lr(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

/// "1 stale, 2 infrastructure failure": why records were not trained on.
std::string dropped_text(const std::map<std::string, int64_t>& dropped) {
  std::string out;
  for (auto& [why, n] : dropped) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + why;
  return out;
}

/// Appends one JSON line to iterations.jsonl (the run's outcome log); a failure is logged, not fatal.
void record_event(trainer_state& s, json event) {
  std::ofstream out(fs::path{s.opts.train.run_dir} / "iterations.jsonl", std::ios::app);
  out << event.dump() << "\n";
  if (!out) log_error("train", "cannot append to " + s.opts.train.run_dir + "/iterations.jsonl");
}

void finish(trainer_actor* self, int code, const std::string& summary) {
  auto& s = self->state;
  if (s.ph == phase::finished) return;
  s.ph = phase::finished;
  if (s.driver) caf::anon_send_exit(s.driver, caf::exit_reason::user_shutdown);
  s.driver = nullptr;
  (code == 0 ? log_info : log_error)("train", summary);
  if (s.opts.on_finished) s.opts.on_finished(code, summary);
}

bool persist(trainer_actor* self) {
  if (auto err = rollout::write_train_state(self->state.opts.train.run_dir, self->state.st)) {
    finish(self, trainer_storage, "cannot write the stage state: " + *err);
    return false;
  }
  return true;
}

void start_iteration(trainer_actor* self);
void send_batch(trainer_actor* self);
bool start_playing_ahead(trainer_actor* self);

/// The records' own clocks (trajectory_record::timings_ms), summed over the iteration's
/// episodes: waiting for the policy (generation), the judge (evaluations) and the tools. The
/// episodes run side by side, so the sums can exceed the rollout's wall time.
void add_episode_times(json& phases, const std::vector<const trajectory_record*>& recs) {
  double policy = 0, eval = 0, tools = 0, longest = 0;
  auto at = [](const trajectory_record& r, const char* key) {
    auto it = r.timings_ms.find(key);
    return it == r.timings_ms.end() ? 0.0 : it->second / 1000.0;
  };
  for (const auto* r : recs) {
    policy += at(*r, "policy");
    eval += at(*r, "eval");
    tools += at(*r, "tools");
    longest = std::max(longest, at(*r, "total"));
  }
  phases["generation_s"] = policy;
  phases["judging_s"] = eval;
  phases["tools_s"] = tools;
  phases["longest_episode_s"] = longest;
  phases["episodes"] = recs.size();
}

/// The step's phases from the shards' reports (the slowest shard's of each), then one line and
/// one "phases" event once the weights are published (publish_s: every service answered).
void add_step_times(json& phases, const std::map<int32_t, train_step_done>& replies) {
  double old_lp = 0, update = 0, prepare = 0, step = 0, save = 0, stage = 0;
  for (auto& [rank, r] : replies) {
    auto report = json::parse(r.report_json, nullptr, false);
    if (report.is_object()) {
      old_lp = std::max(old_lp, report.value("old_logprob_seconds", 0.0));
      update = std::max(update, report.value("update_seconds", 0.0));
    }
    prepare = std::max(prepare, r.prepare_s);
    step = std::max(step, r.step_s);
    save = std::max(save, r.save_s);
    stage = std::max(stage, r.stage_s);
  }
  phases["learner_prepare_s"] = prepare;
  phases["old_logprob_s"] = old_lp;
  phases["update_s"] = update;
  phases["learner_step_s"] = step;
  phases["checkpoint_save_s"] = save;
  phases["weight_stage_s"] = stage;
}

void record_phases(trainer_state& s, uint64_t version, double publish_s) {
  if (!s.phases.is_object()) return;
  auto& p = s.phases;
  p["publish_s"] = publish_s;
  p["weight_sync_s"] = p.value("weight_stage_s", 0.0) + publish_s;
  std::string text;
  for (const char* k : {"rollout_wall_s", "generation_s", "judging_s", "tools_s", "old_logprob_s", "update_s",
                        "checkpoint_save_s", "weight_sync_s"})
    if (p.contains(k))
      text += (text.empty() ? "" : ", ") + std::string(k, std::strlen(k) - 2) + " " + fmt(p[k].get<double>(), 3) + " s";
  log_info("train",
           "iteration " + std::to_string(s.st.iteration) + " phases (v" + std::to_string(version) + "): " + text);
  json event = {{"event", "phases"}, {"iteration", s.st.iteration}, {"policy_version", version}};
  event.update(p);
  record_event(s, std::move(event));
  s.phases = nullptr;
}

iteration_stats stats_of(const std::vector<const trajectory_record*>& recs) {
  iteration_stats out;
  for (const auto* r : recs) {
    ++out.episodes;
    if (r->termination == messages::episode_end::aborted) {
      ++out.aborted;
      continue;
    }
    out.reward_sum += r->reward;
    out.correct += r->correct;
    ++out.tiers[r->reward];
  }
  return out;
}

std::string stats_text(const iteration_stats& st) {
  const auto judged = std::max<int64_t>(st.episodes - st.aborted, 1);
  std::string tiers;
  for (int32_t t : {-1, 1, 2, 3}) {
    auto it = st.tiers.find(t);
    tiers +=
        (tiers.empty() ? "" : " ") + std::to_string(t) + ":" + std::to_string(it == st.tiers.end() ? 0 : it->second);
  }
  return std::to_string(st.episodes) + " episodes, mean reward " + fmt(st.reward_sum / double(judged)) +
         ", pass rate " + fmt(100.0 * double(st.correct) / double(judged), 1) + "%, tiers " + tiers +
         (st.aborted ? ", aborted " + std::to_string(st.aborted) : "");
}

fs::path eval_file(const trainer_state& s, const std::string& round) {
  return fs::path{s.opts.train.run_dir} / ("eval-" + round + ".json");
}

/// The rounds in order: before training, then after each stage.
std::vector<std::string> eval_rounds(const trainer_state& s) {
  std::vector<std::string> out{"base"};
  for (auto kind : s.opts.train.stages) out.push_back(to_string(kind));
  return out;
}

/// The before/after table of every evaluation round written so far.
std::string eval_table(const trainer_state& s) {
  std::string out;
  for (auto& round : eval_rounds(s)) {
    std::ifstream in(eval_file(s, round));
    if (!in) continue;
    auto j = json::parse(in, nullptr, false);
    if (j.is_discarded()) continue;
    const auto label = round == "base" ? std::string{"before training"} : "after " + round;
    out += "\n  " + label + std::string(label.size() < 20 ? 20 - label.size() : 1, ' ') + "version " +
           std::to_string(j.value("policy_version", 0)) + ": " + j.value("summary", std::string{});
  }
  return out.empty() ? out : "\nevaluation rounds (fresh episodes, real judge):" + out;
}

/// Plays the evaluation round `round` (fresh episodes with the current weights); start_iteration
/// goes on once its summary is written.
void evaluate(trainer_actor* self, const std::string& round) {
  auto& s = self->state;
  s.ph = phase::evaluating;
  s.eval_name = round;
  run_driver_options d;
  d.tasks = s.opts.tasks;
  d.mode = messages::episode_mode::eval;
  d.store_dir = (fs::path{s.opts.train.run_dir} / ("eval-" + round)).string();
  d.retry_aborted = s.opts.rollout.retry_aborted;
  d.coordinator = s.opts.coordinator;
  for (int32_t i = 1; i <= s.opts.train.eval.episodes; ++i) {
    start_episode e;
    e.episode_id = static_cast<uint64_t>(i);
    e.task = s.opts.tasks[static_cast<size_t>(i - 1) % s.opts.tasks.size()];
    e.mode = messages::episode_mode::eval;
    e.max_turns = eval_turns(s);
    e.wall_limit_ms = s.opts.rollout.wall_limit_s * 1000;
    e.seed = s.opts.seed * 1000003 + static_cast<uint64_t>(i);
    e.temperature = static_cast<float>(s.opts.train.eval.temperature);
    d.planned.push_back(std::move(e));
  }
  d.episodes = static_cast<int>(d.planned.size());
  caf::actor me = caf::actor_cast<caf::actor>(self);
  d.on_finished = [me](const run_summary& summary) {
    caf::anon_send(me, atoms::done::value, summary.storage_error, summary.kept);
  };
  log_info("train", "evaluation round " + round + ": " + std::to_string(d.episodes) + " fresh episodes with version " +
                        std::to_string(s.st.policy_version) + " (temperature " + fmt(s.opts.train.eval.temperature) +
                        ", " + std::to_string(eval_turns(s)) + " turns)");
  std::string error;
  s.driver = spawn_run_driver(self->system(), std::move(d), error);
  if (!s.driver) finish(self, trainer_storage, "the evaluation's run driver cannot start: " + error);
}

void start_iteration(trainer_actor* self);

/// The round's records: its summary to eval-<round>.json (atomically), one log line, then on.
void evaluation_done(trainer_actor* self, const run_summary& summary) {
  auto& s = self->state;
  if (s.driver) caf::anon_send_exit(s.driver, caf::exit_reason::user_shutdown);
  s.driver = nullptr;
  const auto round = s.eval_name;
  const auto dir = fs::path{s.opts.train.run_dir} / ("eval-" + round);
  if (!summary.storage_error.empty())
    return finish(
        self, trainer_storage,
        "evaluation round " + round + ": storage failed: " + summary.storage_error + " (run again to resume)");
  auto records = rollout::trajectory_store::read_all(dir.string());
  std::vector<const trajectory_record*> all;
  json episodes = json::array();
  for (const auto& r : records) {
    all.push_back(&r);
    episodes.push_back({{"episode_id", r.episode_id},
                        {"task_id", r.task_id},
                        {"reward", r.reward},
                        {"correct", r.correct},
                        {"termination", r.termination},
                        {"turns", r.turns}});
  }
  const auto st = stats_of(all);
  const double judged = double(std::max<int64_t>(st.episodes - st.aborted, 1));
  json tiers = json::object();
  for (int32_t t : {-1, 1, 2, 3}) tiers[std::to_string(t)] = st.tiers.contains(t) ? st.tiers.at(t) : 0;
  const auto text = stats_text(st);
  json out = {{"round", round},
              {"policy_version", s.st.policy_version},
              {"checkpoint", s.st.checkpoint},
              {"temperature", static_cast<float>(s.opts.train.eval.temperature)},
              {"max_turns", eval_turns(s)},
              {"episodes", st.episodes},
              {"aborted", st.aborted},
              {"mean_reward", st.reward_sum / judged},
              {"pass_rate", double(st.correct) / judged},
              {"tiers", tiers},
              {"summary", text},
              {"store", dir.string()},
              {"records", episodes}};
  if (auto err = rollout::write_file_atomically(eval_file(s, round), out.dump(1) + "\n"))
    return finish(self, trainer_storage, "cannot write " + eval_file(s, round).string() + ": " + *err);
  record_event(s, {{"event", "evaluation"},
                   {"round", round},
                   {"policy_version", s.st.policy_version},
                   {"mean_reward", st.reward_sum / judged},
                   {"pass_rate", double(st.correct) / judged},
                   {"tiers", tiers}});
  log_info("train", "evaluation " + round + " (version " + std::to_string(s.st.policy_version) + "): " + text);
  s.ph = phase::idle;
  start_iteration(self);
}

/// Builds the step's batch from `records` (the iteration's); an empty one is committed as such.
/// `reuse`: the ids are the stage's data set (trained on again, not consumed again).
void build_batch(trainer_actor* self, const std::vector<trajectory_record>& records, std::vector<uint64_t> ids,
                 bool reuse = false) {
  auto& s = self->state;
  const auto& stage = current_stage(s);
  s.reuse = reuse;
  std::vector<const trajectory_record*> mine;
  std::set<uint64_t> wanted(ids.begin(), ids.end());
  for (const auto& r : records)
    if (wanted.contains(r.episode_id)) mine.push_back(&r);
  // Rationale: one order (by id) for every iteration, so the round robin over the data set
  // (sequence_cursor) continues where the previous iteration left off.
  std::sort(mine.begin(), mine.end(), [](auto* a, auto* b) { return a->episode_id < b->episode_id; });
  s.stats = stats_of(mine);
  if (!reuse && s.phases.is_object()) add_episode_times(s.phases, mine);
  rollout::training_filter filter{rollout::learner_stage(stage.kind), stage.max_repeats, stage.min_reward};
  // Staleness is a property of this run's own sampling: demonstrations and a store are not
  // sampled by the policy being trained, and synchronous records are all at the base version.
  if (s.opts.train.async && !reuse && stage.demonstrations.empty() && stage.store.empty())
    filter.max_policy_lag = s.opts.train.max_policy_lag;
  filter.base_version = s.st.policy_version;
  rollout::training_selection sel;
  for (const auto* r : mine) {
    auto why = rollout::training_exclusion(*r, filter);
    if (why.empty())
      sel.kept.push_back(r);
    else
      ++sel.dropped[why];
  }
  if (mine.size() < ids.size()) sel.dropped["no record"] += static_cast<int64_t>(ids.size() - mine.size());
  s.consumed = {0,
                to_string(stage.kind),
                s.st.policy_version + 1,
                reuse ? std::vector<uint64_t>{} : ids,
                static_cast<int64_t>(sel.kept.size()),
                sel.dropped};
  s.new_stage_data.clear();
  if (!stage.demonstrations.empty() && !reuse)
    for (const auto* r : sel.kept) s.new_stage_data.push_back(r->episode_id);
  if (sel.kept.empty()) {
    const auto why = dropped_text(sel.dropped);
    log_error("train", "iteration " + std::to_string(s.st.iteration + 1) + " (" + to_string(stage.kind) +
                           "): " + stats_text(s.stats) + "; no training data (" + why + "); no step taken");
    rollout::commit_iteration(s.st, s.consumed, false, {});
    if (stage.store.empty() == false) s.st.store_cursor += static_cast<int64_t>(ids.size());
    record_event(s, {{"event", "no_training_data"},
                     {"iteration", s.st.iteration},
                     {"stage", to_string(stage.kind)},
                     {"episode_ids", ids},
                     {"dropped", sel.dropped}});
    if (!persist(self)) return;
    if (s.st.empty_iterations >= s.opts.train.max_empty_iterations)
      return finish(self, trainer_no_data,
                    std::to_string(s.st.empty_iterations) +
                        " iterations in a row brought no training data; the run stopped "
                        "(the state is kept: fix the cause and run again to resume)");
    return start_iteration(self);
  }
  auto packed = rollout::packed_batch_json(sel.kept, filter.stage);
  train_batch b;
  b.batch_id = s.st.iteration + 1;
  b.stage = filter.stage;
  b.base_version = s.st.policy_version;
  b.base_checkpoint = s.st.checkpoint;
  b.new_version = s.st.policy_version + 1;
  b.stage_in_process = s.opts.stage_in_process;
  for (const auto* r : sel.kept) b.episode_ids.push_back(r->episode_id);
  b.tokens = packed["tokens"].get<std::vector<int32_t>>();
  b.seq_offsets = packed["seq_offsets"].get<std::vector<int64_t>>();
  for (float m : packed["loss_mask"].get<std::vector<float>>()) b.loss_mask.push_back(m != 0 ? 1 : 0);
  b.sampler_logp = packed["sampler_logp"].get<std::vector<float>>();
  b.rewards = packed["rewards"].get<std::vector<float>>();
  const int64_t first_step = s.st.stage_step * stage.steps_per_iteration;
  const auto schedule = stage.schedule(s.opts.learner.actor_lr);
  for (int32_t i = 0; i < stage.steps_per_iteration; ++i) b.actor_lrs.push_back(schedule.at(first_step + i));
  b.temperature = stage.temperature > 0 ? static_cast<float>(stage.temperature) : 0;
  auto slices = rollout::shard_batches(b, {stage.batch_sequences, first_step * stage.batch_sequences,
                                           s.opts.learner.max_tokens_per_microbatch, s.opts.learner.shards});
  if (!slices)
    return finish(
        self, trainer_step_failed,
        "iteration " + std::to_string(b.batch_id) + ": cannot plan the shards' batches: " + slices.error().message);
  s.slices = std::move(slices.value());
  // Rationale: only the slices travel; the header stays for the step's log and events.
  b.episode_ids.clear(), b.tokens.clear(), b.seq_offsets.clear(), b.loss_mask.clear();
  b.sampler_logp.clear(), b.rewards.clear();
  s.batch = std::move(b);
  s.attempt = 0;
  if (start_playing_ahead(self)) send_batch(self);
}

void rollout_done(trainer_actor* self, const run_summary& summary, steady::time_point end = steady::now()) {
  auto& s = self->state;
  if (s.driver) caf::anon_send_exit(s.driver, caf::exit_reason::user_shutdown);
  s.driver = nullptr;
  if (!summary.storage_error.empty())
    return finish(self, trainer_storage,
                  "storage failed: " + summary.storage_error + "; kept " + summary.kept + " (run again to resume)");
  rollout::scan_report scan;
  if (s.phases.is_object()) s.phases["rollout_wall_s"] = std::chrono::duration<double>(end - s.rollout_start).count();
  auto records = rollout::trajectory_store::read_all(store_dir(s), &scan);
  build_batch(self, records, s.st.pending);
}

bool eval_due(const trainer_state& s, std::string& round) {
  if (s.opts.train.eval.episodes <= 0 || !s.st.pending.empty() || s.st.stage_step != 0) return false;
  round = s.st.stage_index == 0 ? std::string{"base"} : to_string(s.opts.train.stages.at(s.st.stage_index - 1));
  std::error_code ec;
  return !fs::exists(eval_file(s, round), ec);
}

/// Spawns the driver that plays the training episodes `ids` of `stage` into the run's store
/// (`demos`: the rollout nodes' replay plays them). False when it cannot start (the run stopped).
bool play_episodes(trainer_actor* self, const rollout::train_stage_config& stage, const std::vector<uint64_t>& ids,
                   bool demos) {
  auto& s = self->state;
  run_driver_options d;
  d.tasks = s.opts.tasks;
  d.mode = messages::episode_mode::train;
  d.store_dir = store_dir(s);
  d.retry_aborted = s.opts.rollout.retry_aborted;
  d.coordinator = s.opts.coordinator;
  for (auto id : ids) {
    start_episode e;
    e.episode_id = id;
    e.task = s.opts.tasks[static_cast<size_t>(id - 1) % s.opts.tasks.size()];
    e.mode = messages::episode_mode::train;
    e.max_turns = stage.turn_limit(s.opts.rollout.max_turns_train);
    e.wall_limit_ms = s.opts.rollout.wall_limit_s * 1000;
    e.seed = s.opts.seed * 1000003 + id;
    if (demos)
      e.policy = messages::episode_policy::demonstrations;
    else
      e.temperature = static_cast<float>(stage.temperature);
    d.planned.push_back(std::move(e));
  }
  d.episodes = static_cast<int>(d.planned.size());
  caf::actor me = caf::actor_cast<caf::actor>(self);
  d.on_finished = [me](const run_summary& summary) {
    caf::anon_send(me, atoms::done::value, summary.storage_error, summary.kept);
  };
  std::string error;
  s.driver = spawn_run_driver(self->system(), std::move(d), error);
  if (s.driver) return true;
  finish(self, trainer_storage, "the run driver cannot start: " + error);
  return false;
}

/// train.async: the next iteration's episodes start as soon as this one's batch is built, and
/// play while its step runs and its version is published. One iteration ahead at most: they
/// start with the running step's base version, one behind the step that trains on them, so
/// max_policy_lag = 1 keeps them unless a policy service lags behind the publications. Only
/// within a stage that plays fresh episodes and has an iteration after this one: a stage
/// boundary drains, and the next stage's episodes wait for the stage's last version. False
/// when the run stopped.
bool start_playing_ahead(trainer_actor* self) {
  auto& s = self->state;
  const auto& stage = current_stage(s);
  // Rationale: value_pretrain ends when its gate opens, which is known only after the step, and
  // its actor is frozen: playing ahead would gain nothing and might cross the stage boundary.
  if (!s.opts.train.async || s.opts.train.max_policy_lag < 1 || s.reuse || !stage.demonstrations.empty() ||
      !stage.store.empty() || stage.kind == rollout::stage_kind::value_pretrain ||
      s.st.stage_step + 1 >= stage.iterations)
    return true;
  const auto& ids = rollout::plan_ahead(s.st, s.opts.train.episodes_per_iteration);
  if (!persist(self)) return false;  // the plan is on disk before any episode starts
  log_info("train", "iteration " + std::to_string(s.st.iteration + 2) + " (" + to_string(stage.kind) + " step " +
                        std::to_string(s.st.stage_step + 2) + "): playing episodes " + format_id_ranges(ids) +
                        " ahead with version " + std::to_string(s.st.policy_version) + " (the step of iteration " +
                        std::to_string(s.st.iteration + 1) + " runs meanwhile)");
  s.ahead = {true, false, {}, steady::now(), {}};
  return play_episodes(self, stage, ids, false);
}

/// The iteration played ahead becomes the one in progress; its batch is built once its records
/// are all there (now, or when its driver finishes).
void take_over_ahead(trainer_actor* self) {
  auto& s = self->state;
  const auto ahead = std::exchange(s.ahead, {});
  const auto ids = rollout::plan_iteration(s.st, s.opts.train.episodes_per_iteration);  // moves `ahead` to `pending`
  if (!persist(self)) return;
  log_info("train", "iteration " + std::to_string(s.st.iteration + 1) + " (" + to_string(current_stage(s).kind) +
                        " step " + std::to_string(s.st.stage_step + 1) + "): episodes " + format_id_ranges(ids) +
                        " played ahead" + (ahead.done ? ", all recorded" : ", waiting for their records"));
  s.played_ahead = true;
  s.rollout_start = ahead.start;
  s.phases = json::object();
  if (ahead.done) rollout_done(self, ahead.summary, ahead.end);
}

void start_iteration(trainer_actor* self) {
  auto& s = self->state;
  if (s.ph == phase::finished || s.awaiting_weights) return;
  if (std::string round; eval_due(s, round)) return evaluate(self, round);
  if (s.st.stage_index >= s.opts.train.stages.size()) {
    std::string stages;
    for (auto& o : s.st.stages_done)
      stages += (stages.empty() ? "" : "; ") + o.stage + ": " + std::to_string(o.steps) + " steps (" +
                to_string(o.outcome) + ")";
    return finish(self, trainer_ok,
                  "training finished: version " + std::to_string(s.st.policy_version) + " in " + s.st.checkpoint +
                      " after " + std::to_string(s.st.iteration) + " iterations (" + stages + "); checkpoints in " +
                      checkpoint_root(s.opts.train.run_dir) + eval_table(s));
  }
  const auto& stage = current_stage(s);
  s.ph = phase::rollout;
  if (!stage.demonstrations.empty() && !s.st.stage_data.empty() && s.st.pending.empty())
    return build_batch(self, rollout::trajectory_store::read_all(store_dir(s)), s.st.stage_data, true);
  if (!stage.store.empty()) {  // a stage over stored records: the next window of the store
    auto records = rollout::trajectory_store::read_all(stage.store);
    if (records.empty())
      return finish(self, trainer_bad_input,
                    "train." + to_string(stage.kind) + ".store '" + stage.store + "' holds no record");
    std::sort(records.begin(), records.end(), [](auto& a, auto& b) { return a.episode_id < b.episode_id; });
    std::vector<uint64_t> ids;
    for (int32_t i = 0; i < s.opts.train.episodes_per_iteration; ++i)
      ids.push_back(records[static_cast<size_t>(s.st.store_cursor + i) % records.size()].episode_id);
    return build_batch(self, records, ids);
  }
  if (s.ahead.playing || s.ahead.done) return take_over_ahead(self);
  // A demonstration stage's first iteration plays every task's recording once.
  const bool demos = !stage.demonstrations.empty();
  const auto& ids = rollout::plan_iteration(
      s.st, demos ? static_cast<int32_t>(s.opts.tasks.size()) : s.opts.train.episodes_per_iteration);
  if (!persist(self)) return;  // the plan is on disk before any episode starts
  log_info("train", "iteration " + std::to_string(s.st.iteration + 1) + " (" + to_string(stage.kind) + " step " +
                        std::to_string(s.st.stage_step + 1) + "): playing episodes " + format_id_ranges(ids) +
                        (demos ? " (the demonstrations of " + stage.demonstrations + ")"
                               : " with version " + std::to_string(s.st.policy_version)));
  s.played_ahead = false;
  s.rollout_start = steady::now();
  s.phases = json::object();
  play_episodes(self, stage, ids, demos);
}

void send_batch(trainer_actor* self) {
  auto& s = self->state;
  if (static_cast<int32_t>(s.shards.size()) < s.opts.learner.shards) {
    if (s.ph != phase::waiting_shards)
      log_info("train", "waiting for " + std::to_string(s.opts.learner.shards) + " learner shards (" +
                            std::to_string(s.shards.size()) + " joined)");
    s.ph = phase::waiting_shards;
    return;
  }
  if (++s.attempt > s.opts.train.max_step_attempts)
    return finish(self, trainer_step_failed,
                  "the step of iteration " + std::to_string(s.batch.batch_id) + " failed " +
                      std::to_string(s.opts.train.max_step_attempts) +
                      " times; the run stopped (run again to resume: no episode is lost)");
  s.batch.attempt = s.attempt;
  s.batch.generation = s.generation;
  s.replies.clear();
  s.ph = phase::training;
  s.step_start = steady::now();
  for (auto& [rank, shard] : s.shards) {
    auto& slice = s.slices.at(static_cast<size_t>(rank));
    slice.attempt = s.attempt;
    slice.generation = s.generation;
    self->send(shard.handle, slice);
  }
  log_info("train", "step of iteration " + std::to_string(s.batch.batch_id) + " sent to " +
                        std::to_string(s.shards.size()) + " shards (attempt " + std::to_string(s.attempt) + ")");
}

void step_failed(trainer_actor* self, const std::string& why) {
  auto& s = self->state;
  if (s.ph != phase::training) return;
  ++s.generation;  // every shard rendezvouses again
  s.ph = phase::waiting_shards;
  log_error("train", "step of iteration " + std::to_string(s.batch.batch_id) + " (attempt " +
                         std::to_string(s.attempt) + ") failed: " + why + "; it runs again once all " +
                         std::to_string(s.opts.learner.shards) + " shards are up");
  record_event(s, {{"event", "step_failed"},
                   {"iteration", s.batch.batch_id},
                   {"attempt", s.attempt},
                   {"reason", why},
                   {"episode_ids", s.consumed.episode_ids}});
  // Rationale: a second's pause keeps a step that fails at once (a bad checkpoint) from
  // spinning through its attempts before anyone can read the first error.
  self->delayed_send(self, std::chrono::seconds(1), atoms::run::value);
}

void publish(trainer_actor* self, uint64_t version, const std::string& path, std::function<void()> next) {
  auto& s = self->state;
  if (s.policies.empty()) {
    log_error("train", "no policy service has joined: version " + std::to_string(version) + " was not published");
    record_phases(s, version, 0);
    return next();
  }
  s.ph = phase::publishing;
  auto left = std::make_shared<size_t>(s.policies.size());
  auto lines = std::make_shared<std::vector<json>>();
  auto refused = std::make_shared<std::string>();
  const auto start = steady::now();
  for (auto& [node, handle] : s.policies) {
    auto done = [=, node = node](const std::string& error) {
      const double ms = std::chrono::duration<double, std::milli>(steady::now() - start).count();
      lines->push_back({{"node", node}, {"ok", error.empty()}, {"ms", ms}, {"error", error}});
      if (!error.empty()) *refused += (refused->empty() ? "" : "; ") + node + ": " + error;
      if (--*left > 0) return;
      std::string text;
      for (auto& l : *lines)
        text += (text.empty() ? "" : ", ") + l["node"].get<std::string>() + " " +
                (l["ok"].get<bool>() ? "ok " + fmt(l["ms"].get<double>(), 1) + " ms" : "refused");
      log_info("train", "published version " + std::to_string(version) + " (" +
                            (path.rfind("inproc:", 0) == 0 ? "in process" : path) + "): " + text);
      record_event(self->state, {{"event", "published"}, {"version", version}, {"path", path}, {"services", *lines}});
      record_phases(self->state, version, std::chrono::duration<double>(steady::now() - start).count());
      if (!refused->empty())
        return finish(self, trainer_weights_refused,
                      "policy services refused version " + std::to_string(version) + ": " + *refused +
                          "; the run stopped (the step is committed: run again to resume and republish)");
      next();
    };
    self->request(handle, std::chrono::seconds(120), weights_published{version, path})
        .then([=](std::string& error) { done(error); },
              [=](caf::error& err) { done("unreachable: " + self->system().render(err)); });
  }
}

void step_succeeded(trainer_actor* self) {
  auto& s = self->state;
  const auto& stage = current_stage(s);
  const auto& lead = s.replies.at(0);
  double policy_loss = 0, value_loss = 0, ev = 0;
  for (auto& [rank, r] : s.replies) {
    policy_loss += r.policy_loss;
    value_loss += r.value_loss;
    ev += r.explained_variance / double(s.replies.size());
  }
  const double seconds = std::chrono::duration<double>(steady::now() - s.step_start).count();
  if (!s.phases.is_object()) s.phases = json::object();  // a reused data set: the step's phases only
  add_step_times(s.phases, s.replies);
  const auto from = s.st.policy_version;
  rollout::commit_iteration(s.st, s.consumed, true, lead.checkpoint);
  if (!s.new_stage_data.empty()) s.st.stage_data = std::move(s.new_stage_data);
  s.new_stage_data.clear();
  if (!stage.store.empty()) s.st.store_cursor += static_cast<int64_t>(s.consumed.episode_ids.size());
  const auto reason = rollout::stage_stop_reason(stage.kind, s.st.stage_step, stage.iterations, ev,
                                                 stage.min_explained_variance, stage.max_steps);
  const auto steps = s.st.stage_step;
  if (reason) rollout::advance_stage(s.st, stage.kind, *reason, ev);
  if (!persist(self)) return;
  const auto& lrs = s.batch.actor_lrs;
  const std::string optimizer = lrs.empty() ? std::string{}
                                            : ", " + std::to_string(lrs.size()) + " optimizer step" +
                                                  (lrs.size() > 1 ? "s" : "") + " at lr " + fmt_lr(lrs.front()) +
                                                  (lrs.front() != lrs.back() ? " -> " + fmt_lr(lrs.back()) : "");
  log_info("train", "iteration " + std::to_string(s.st.iteration) + " (" + to_string(stage.kind) + " step " +
                        std::to_string(steps) + "): " +
                        (s.reuse ? std::to_string(s.stats.episodes) + " demonstrations (the stage's data set)"
                                 : stats_text(s.stats)) +
                        "; trained on " + std::to_string(s.consumed.kept) +
                        (s.consumed.dropped.empty() ? "" : ", dropped " + dropped_text(s.consumed.dropped)) + " (v" +
                        std::to_string(from) + " -> v" + std::to_string(s.st.policy_version) +
                        (lead.applied ? "" : ", skipped: " + lead.skip_reason) + optimizer + "): policy loss " +
                        fmt(policy_loss, 4) +
                        (s.batch.stage == messages::learner_stage::rft ? ", nll " + fmt(lead.nll, 4) : "") +
                        ", value loss " + fmt(value_loss, 4) + ", explained variance " + fmt(ev, 3) + ", step " +
                        fmt(seconds, 1) + " s" + (s.attempt > 1 ? " (attempt " + std::to_string(s.attempt) + ")" : ""));
  json shards = json::array();
  for (auto& [rank, r] : s.replies)
    shards.push_back({{"rank", rank},
                      {"node", r.node_id},
                      {"prepare_s", r.prepare_s},
                      {"step_s", r.step_s},
                      {"save_s", r.save_s},
                      {"stage_s", r.stage_s},
                      {"report", json::parse(r.report_json, nullptr, false)}});
  const double judged = double(std::max<int64_t>(s.stats.episodes - s.stats.aborted, 1));
  json tiers = json::object();
  for (auto& [t, n] : s.stats.tiers) tiers[std::to_string(t)] = n;
  record_event(s, {{"event", "step"},
                   {"iteration", s.st.iteration},
                   {"stage", to_string(stage.kind)},
                   {"stage_step", steps},
                   {"attempt", s.attempt},
                   {"policy_version", s.st.policy_version},
                   {"checkpoint", lead.checkpoint},
                   {"episode_ids", s.consumed.episode_ids},
                   {"kept", s.consumed.kept},
                   {"dropped", s.consumed.dropped},
                   {"mean_reward", s.stats.reward_sum / judged},
                   {"pass_rate", double(s.stats.correct) / judged},
                   {"tiers", tiers},
                   {"aborted", s.stats.aborted},
                   {"policy_loss", policy_loss},
                   {"value_loss", value_loss},
                   {"explained_variance", ev},
                   {"seconds", seconds},
                   {"shards", shards},
                   {"nll", lead.nll},
                   {"optimizer_steps", lead.optimizer_steps},
                   {"actor_lrs", lrs},
                   {"reused_data", s.reuse},
                   {"played_ahead", s.played_ahead}});
  if (reason)
    log_info("train",
             "stage " + to_string(stage.kind) + " done after " + std::to_string(steps) + " steps (" +
                 (reason == rollout::stage_end::gate  ? "explained variance " + fmt(ev, 3) + " reached the gate"
                  : reason == rollout::stage_end::cap ? "the step cap; explained variance " + fmt(ev, 3) +
                                                            " stayed below " + fmt(stage.min_explained_variance, 3)
                                                      : "its iterations") +
                 ")");
  const bool stop = reason == rollout::stage_end::cap && stage.stop_at_cap;
  const auto path =
      lead.in_process_path.empty() ? (fs::path{lead.checkpoint} / "actor").string() : lead.in_process_path;
  publish(self, s.st.policy_version, path, [self, stop, name = to_string(stage.kind)] {
    if (stop)
      return finish(self, trainer_gate_not_reached,
                    "stage " + name + " hit its step cap before the explained-variance gate (stop_at_cap = true)");
    start_iteration(self);
  });
}

void on_step_done(trainer_actor* self, train_step_done& d) {
  auto& s = self->state;
  if (s.ph != phase::training || d.batch_id != s.batch.batch_id || d.attempt != s.attempt) {
    log_debug("train", "ignored a late answer of shard " + std::to_string(d.rank) + " (batch " +
                           std::to_string(d.batch_id) + ", attempt " + std::to_string(d.attempt) + ")");
    return;
  }
  if (!d.error.empty())
    return step_failed(self, "shard " + std::to_string(d.rank) + " (" + d.node_id + "): " + d.error);
  s.replies[d.rank] = d;
  if (static_cast<int32_t>(s.replies.size()) == s.opts.learner.shards) step_succeeded(self);
}

/// A resumed run's first iteration starts once a policy service answered the hand-over.
void release_start(trainer_actor* self) {
  auto& s = self->state;
  if (!s.awaiting_weights) return;
  s.awaiting_weights = false;
  if (s.ph == phase::idle) start_iteration(self);
}

void on_service(trainer_actor* self, const service_announce& svc, caf::actor handle) {
  auto& s = self->state;
  const auto id = parse_service_name(svc.name);
  if (!id) return;
  if (id->kind == service_kind::policy) {
    // The coordinator announces services untyped; a "policy" service is a policy server.
    auto policy = caf::actor_cast<policy_actor>(handle);
    s.policies[svc.node_id] = policy;
    // A policy service that joins after weights moved on (a restarted node, a resumed run)
    // gets the current version from its checkpoint before it serves a new iteration's episodes.
    if (s.st.policy_version > 0 && !s.st.checkpoint.empty())
      self->request(policy, std::chrono::seconds(120),
                    weights_published{s.st.policy_version, (fs::path{s.st.checkpoint} / "actor").string()})
          .then(
              [=, node = svc.node_id](std::string& error) {
                if (error.empty())
                  log_info("train",
                           "policy service " + node + " has version " + std::to_string(self->state.st.policy_version));
                else
                  log_error("train", "policy service " + node + " refused the current weights: " + error);
                release_start(self);
              },
              [=, node = svc.node_id](caf::error& err) {
                log_error("train", "policy service " + node + " unreachable: " + self->system().render(err));
                release_start(self);
              });
    return;
  }
  if (id->kind != service_kind::learner) return;
  const int32_t rank = id->rank;
  if (rank >= s.opts.learner.shards) {
    log_error("train", "learner shard " + svc.name + " on " + svc.node_id + " ignored: ranks are 0.." +
                           std::to_string(s.opts.learner.shards - 1) +
                           " (learner.shards = " + std::to_string(s.opts.learner.shards) + ")");
    return;
  }
  auto it = s.shards.find(rank);
  if (it != s.shards.end() && it->second.handle != handle) {
    ++s.generation;
    if (s.ph == phase::training) step_failed(self, "shard " + std::to_string(rank) + " was replaced by " + svc.node_id);
  }
  s.shards[rank] = {svc.node_id, handle};
  log_info("train", "learner shard " + std::to_string(rank) + " on " + svc.node_id + " (" +
                        std::to_string(s.shards.size()) + "/" + std::to_string(s.opts.learner.shards) + ")");
  if (s.ph == phase::waiting_shards && static_cast<int32_t>(s.shards.size()) == s.opts.learner.shards) send_batch(self);
}

void on_node_lost(trainer_actor* self, const node_lost& lost) {
  auto& s = self->state;
  s.policies.erase(lost.node_id);
  for (auto it = s.shards.begin(); it != s.shards.end(); ++it) {
    if (it->second.node != lost.node_id) continue;
    const auto rank = it->first;
    s.shards.erase(it);
    ++s.generation;
    log_error("train", "learner shard " + std::to_string(rank) + " on " + lost.node_id + " lost (" + lost.reason + ")");
    if (s.ph == phase::training)
      step_failed(self,
                  "learner shard " + std::to_string(rank) + " on " + lost.node_id + " lost (" + lost.reason + ")");
    return;
  }
}

caf::behavior trainer(trainer_actor* self, trainer_options opts, rollout::train_state st) {
  auto& s = self->state;
  s.opts = std::move(opts);
  s.st = std::move(st);
  if (s.opts.coordinator) self->send(s.opts.coordinator, atoms::subscribe::value);
  log_info("train",
           "run directory " + s.opts.train.run_dir + ": stage " +
               (s.st.stage_index < s.opts.train.stages.size() ? to_string(current_stage(s).kind)
                                                              : std::string{"(all done)"}) +
               ", step " + std::to_string(s.st.stage_step) + ", version " + std::to_string(s.st.policy_version) + ", " +
               std::to_string(rollout::consumed_ids(s.st).size()) + " episodes consumed" +
               (s.st.pending.empty() ? "" : ", resuming the iteration of episodes " + format_id_ranges(s.st.pending)));
  // A resumed run's engines start from the base model: wait until a policy service holds the
  // current version before playing episodes with it (on_service hands it over).
  s.awaiting_weights = s.st.policy_version > 0 && !s.st.checkpoint.empty();
  self->send(self, atoms::open::value);
  // Rationale: a run whose policy services never confirm still goes on after a minute (the
  // log says so) instead of waiting for ever.
  if (s.awaiting_weights) self->delayed_send(self, std::chrono::seconds(60), atoms::open::value);
  return {
      [=](atoms::open) {
        auto& st2 = self->state;
        if (st2.ph != phase::idle) return;
        if (st2.awaiting_weights) {
          if (!st2.open_once) {
            st2.open_once = true;
            return;  // on_service hands the version over and starts; else the delayed open does
          }
          log_error("train", "no policy service confirmed version " + std::to_string(st2.st.policy_version) +
                                 " within a minute; going on");
          st2.awaiting_weights = false;
        }
        start_iteration(self);
      },
      [=](atoms::run) {  // retry a failed step
        if (self->state.ph == phase::waiting_shards) send_batch(self);
      },
      [=](atoms::done, std::string& storage_error, std::string& kept) {
        auto& st2 = self->state;
        if (st2.ahead.playing) {  // the iteration played ahead is recorded before it is the current one
          if (st2.driver) caf::anon_send_exit(st2.driver, caf::exit_reason::user_shutdown);
          st2.driver = nullptr;
          st2.ahead.playing = false;
          st2.ahead.done = true;
          st2.ahead.summary.storage_error = storage_error;
          st2.ahead.summary.kept = kept;
          st2.ahead.end = steady::now();
          return;
        }
        if (st2.ph != phase::rollout && st2.ph != phase::evaluating) return;
        run_summary summary;
        summary.storage_error = storage_error;
        summary.kept = kept;
        if (self->state.ph == phase::evaluating)
          evaluation_done(self, summary);
        else
          rollout_done(self, summary);
      },
      [=](train_step_done& d) { on_step_done(self, d); },
      [=](service_announce& svc, caf::actor handle) { on_service(self, svc, handle); },
      [=](node_lost& lost) { on_node_lost(self, lost); },
      [=](atoms::stop, const std::string& why) -> caf::response_promise {
        auto& st2 = self->state;
        auto text = "training interrupted (" + why + "); the stage state is kept: run again to resume";
        auto rp = self->make_response_promise();
        if (!st2.driver) {
          finish(self, 130, text);
          rp.deliver(true);
          return rp;
        }
        // Started episodes still end in one record each (the driver records them aborted).
        self->request(st2.driver, std::chrono::seconds(10), atoms::stop::value, why)
            .then(
                [=](bool) mutable {
                  finish(self, 130, text);
                  rp.deliver(true);
                },
                [=](caf::error&) mutable {
                  finish(self, 130, text);
                  rp.deliver(true);
                });
        return rp;
      },
      [=](atoms::stats) -> std::map<std::string, double> {
        auto& st2 = self->state;
        return {{"iteration", double(st2.st.iteration)},   {"stage_index", double(st2.st.stage_index)},
                {"stage_step", double(st2.st.stage_step)}, {"policy_version", double(st2.st.policy_version)},
                {"shards", double(st2.shards.size())},     {"policy_services", double(st2.policies.size())},
                {"attempt", double(st2.attempt)},          {"playing_ahead", st2.ahead.playing ? 1.0 : 0.0}};
      },
  };
}

}  // namespace

caf::actor spawn_trainer(caf::actor_system& sys, trainer_options opts, std::string& error) {
  if (opts.train.stages.empty()) {
    error = "train.stages is empty";
    return nullptr;
  }
  if (opts.tasks.empty()) {
    error = "no tasks to train on";
    return nullptr;
  }
  std::optional<rollout::train_state> saved;
  if (auto err = rollout::read_train_state(opts.train.run_dir, saved)) {
    error = *err;
    return nullptr;
  }
  rollout::train_state st;
  if (saved) {
    if (auto diff = rollout::settings_mismatch(saved->settings, opts.settings); !diff.empty()) {
      error = "the training run directory " + opts.train.run_dir + " belongs to another config (" + diff +
              "); use another train.run_dir, or the config that made it";
      return nullptr;
    }
    st = std::move(*saved);
  } else {
    st.settings = opts.settings;
    if (auto err = rollout::write_train_state(opts.train.run_dir, st)) {
      error = *err;
      return nullptr;
    }
  }
  std::error_code ec;
  fs::create_directories(checkpoint_root(opts.train.run_dir), ec);
  return sys.spawn(trainer, std::move(opts), std::move(st));
}

}  // namespace caf_agent
