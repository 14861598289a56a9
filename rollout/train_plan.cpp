// rollout/train_plan.cpp: see train_plan.hpp.
#include "rollout/train_plan.hpp"

#include <fstream>
#include <sstream>
#include <utility>

#include "rollout/run_plan.hpp"

namespace caf_agent::rollout {

namespace {

using nlohmann::json;

/// The dotted path of the first difference between two JSON values ("" when equal).
std::string first_difference(const json& a, const json& b, const std::string& path, std::string& detail) {
  if (a.is_object() && b.is_object()) {
    for (auto& [k, v] : a.items()) {
      const auto sub = path.empty() ? k : path + "." + k;
      if (!b.contains(k)) {
        detail = v.dump() + ", this config: (none)";
        return sub;
      }
      if (auto d = first_difference(v, b.at(k), sub, detail); !d.empty()) return d;
    }
    for (auto& [k, v] : b.items())
      if (!a.contains(k)) {
        detail = "(none), this config: " + v.dump();
        return path.empty() ? k : path + "." + k;
      }
    return {};
  }
  if (a == b) return {};
  detail = a.dump() + ", this config: " + b.dump();
  return path.empty() ? "(settings)" : path;
}

}  // namespace

json to_json(const train_state& s) {
  json consumed = json::array();
  for (auto& c : s.consumed)
    consumed.push_back({{"iteration", c.iteration},
                        {"stage", c.stage},
                        {"policy_version", c.policy_version},
                        {"episode_ids", c.episode_ids},
                        {"kept", c.kept},
                        {"dropped", c.dropped}});
  json stages = json::array();
  for (auto& o : s.stages_done)
    stages.push_back({{"stage", o.stage},
                      {"steps", o.steps},
                      {"outcome", to_string(o.outcome)},
                      {"explained_variance", o.explained_variance}});
  return {{"format_version", s.format_version},
          {"settings", s.settings},
          {"stage_index", s.stage_index},
          {"stage_step", s.stage_step},
          {"iteration", s.iteration},
          {"policy_version", s.policy_version},
          {"checkpoint", s.checkpoint},
          {"next_episode_id", s.next_episode_id},
          {"store_cursor", s.store_cursor},
          {"pending", s.pending},
          {"ahead", s.ahead},
          {"empty_iterations", s.empty_iterations},
          {"stage_data", s.stage_data},
          {"consumed", consumed},
          {"stages_done", stages}};
}

std::optional<std::string> from_json(const json& j, train_state& out) {
  try {
    out.format_version = j.at("format_version").get<uint32_t>();
    if (out.format_version < 1 || out.format_version > train_state_format_version)
      return "format_version " + std::to_string(out.format_version) + " (this build reads 1 to " +
             std::to_string(train_state_format_version) + ")";
    out.settings = j.at("settings");
    out.stage_index = j.at("stage_index").get<size_t>();
    out.stage_step = j.at("stage_step").get<int64_t>();
    out.iteration = j.at("iteration").get<uint64_t>();
    out.policy_version = j.at("policy_version").get<uint64_t>();
    out.checkpoint = j.at("checkpoint").get<std::string>();
    out.next_episode_id = j.at("next_episode_id").get<uint64_t>();
    out.store_cursor = j.at("store_cursor").get<int64_t>();
    out.pending = j.at("pending").get<std::vector<uint64_t>>();
    out.empty_iterations = j.at("empty_iterations").get<int64_t>();
    out.stage_data =
        out.format_version >= 2 ? j.at("stage_data").get<std::vector<uint64_t>>() : std::vector<uint64_t>{};
    out.ahead = out.format_version >= 3 ? j.at("ahead").get<std::vector<uint64_t>>() : std::vector<uint64_t>{};
    out.format_version = train_state_format_version;  // written back in this build's format
    out.consumed.clear();
    for (auto& c : j.at("consumed"))
      out.consumed.push_back({c.at("iteration").get<uint64_t>(), c.at("stage").get<std::string>(),
                              c.at("policy_version").get<uint64_t>(), c.at("episode_ids").get<std::vector<uint64_t>>(),
                              c.at("kept").get<int64_t>(), c.at("dropped").get<std::map<std::string, int64_t>>()});
    out.stages_done.clear();
    for (auto& o : j.at("stages_done")) {
      const auto outcome = o.at("outcome").get<std::string>();
      const auto end = base::parse_name<stage_end>(outcome);
      if (!end)
        return "malformed: stages_done outcome '" + outcome + "' is not one of: " + base::names_list<stage_end>();
      out.stages_done.push_back({o.at("stage").get<std::string>(), o.at("steps").get<int64_t>(), *end,
                                 o.at("explained_variance").get<double>()});
    }
  } catch (const json::exception& e) {
    return std::string("malformed: ") + e.what();
  }
  return std::nullopt;
}

std::optional<std::string> read_train_state(const std::filesystem::path& dir, std::optional<train_state>& out) {
  out.reset();
  const auto path = dir / train_state_file;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  std::ifstream in{path};
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return path.string() + ": cannot be read";
  auto j = json::parse(text.str(), nullptr, false);
  if (j.is_discarded()) return path.string() + ": not JSON";
  train_state s;
  if (auto err = from_json(j, s)) return path.string() + ": " + *err;
  out = std::move(s);
  return std::nullopt;
}

std::optional<std::string> write_train_state(const std::filesystem::path& dir, const train_state& s) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create " + dir.string() + ": " + ec.message();
  return write_file_atomically(dir / train_state_file, to_json(s).dump(1) + "\n");
}

std::string settings_mismatch(const json& saved, const json& current) {
  std::string detail;
  auto key = first_difference(saved, current, "", detail);
  return key.empty() ? std::string{} : key + ": the run directory's " + detail;
}

const std::vector<uint64_t>& plan_iteration(train_state& s, int32_t count) {
  if (s.pending.empty()) std::swap(s.pending, s.ahead);
  if (s.pending.empty())
    for (int32_t i = 0; i < count; ++i) s.pending.push_back(s.next_episode_id++);
  return s.pending;
}

const std::vector<uint64_t>& plan_ahead(train_state& s, int32_t count) {
  if (s.ahead.empty())
    for (int32_t i = 0; i < count; ++i) s.ahead.push_back(s.next_episode_id++);
  return s.ahead;
}

std::vector<uint64_t> consumed_ids(const train_state& s) {
  std::vector<uint64_t> out;
  for (auto& c : s.consumed) out.insert(out.end(), c.episode_ids.begin(), c.episode_ids.end());
  return out;
}

void commit_iteration(train_state& s, consumed_batch batch, bool stepped, const std::string& checkpoint) {
  batch.iteration = ++s.iteration;
  if (stepped) {
    ++s.stage_step;
    s.policy_version = batch.policy_version;
    s.checkpoint = checkpoint;
    s.empty_iterations = 0;
  } else {
    batch.policy_version = s.policy_version;
    ++s.empty_iterations;
  }
  s.consumed.push_back(std::move(batch));
  s.pending.clear();
}

std::optional<stage_end> stage_stop_reason(stage_kind stage, int64_t steps, int32_t iterations,
                                           double explained_variance, double min_explained_variance,
                                           int32_t max_steps) {
  if (stage == stage_kind::value_pretrain) {
    if (steps > 0 && explained_variance >= min_explained_variance) return stage_end::gate;
    if (steps >= max_steps) return stage_end::cap;
    return std::nullopt;
  }
  if (steps >= iterations) return stage_end::iterations;
  return std::nullopt;
}

void advance_stage(train_state& s, stage_kind stage, stage_end outcome, double explained_variance) {
  s.stages_done.push_back({to_string(stage), s.stage_step, outcome, explained_variance});
  ++s.stage_index;
  s.stage_step = 0;
  s.store_cursor = 0;
  s.stage_data.clear();
}

messages::learner_stage learner_stage(stage_kind stage) {
  if (stage == stage_kind::rft) return messages::learner_stage::rft;
  if (stage == stage_kind::value_pretrain) return messages::learner_stage::vp;
  return messages::learner_stage::ppo;
}

}  // namespace caf_agent::rollout
