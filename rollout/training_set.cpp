#include "rollout/training_set.hpp"

#include <algorithm>

#include "policy/text/tool_call_parser.hpp"

namespace caf_agent::rollout {
namespace {

/// Infrastructure, not the policy: an episode is "aborted" exactly when something other than
/// the policy ended it (its final evaluation could not run, a refused task, a lost node, the
/// policy service failing); its reward is no judgement of the policy.
bool infrastructure_failure(const messages::trajectory_record& r) {
  return r.termination == messages::episode_end::aborted;
}

/// The call's text without whitespace: two calls that differ only in spacing are one call.
std::string call_signature(const policy::parsed_tool_call& call) {
  std::string sig = call.name + "\n";
  for (char c : call.raw)
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r') sig.push_back(c);
  return sig;
}

}  // namespace

int32_t max_repeated_tool_call(const messages::trajectory_record& record) {
  std::map<std::string, int32_t> seen;
  int32_t most = 0;
  for (const auto& text : record.turn_texts)
    for (const auto& call : policy::parse_assistant_turn(text).calls)
      most = std::max(most, ++seen[call_signature(call)]);
  return most;
}

std::string training_exclusion(const messages::trajectory_record& r, const training_filter& f) {
  if (infrastructure_failure(r)) return "infrastructure failure";
  if (f.max_policy_lag >= 0 && !r.policy_versions.empty()) {
    const auto oldest = *std::min_element(r.policy_versions.begin(), r.policy_versions.end());
    if (oldest + static_cast<uint64_t>(f.max_policy_lag) < f.base_version) return "stale";
  }
  if (std::none_of(r.loss_mask.begin(), r.loss_mask.end(), [](uint8_t m) { return m != 0; }))
    return "no sampled tokens";
  if (r.tokens.size() != r.loss_mask.size() || r.tokens.size() != r.logprobs.size())
    return "tokens, loss mask and logprobs differ in length";
  if (f.stage != messages::learner_stage::rft) return {};
  if (r.reward < f.min_reward) return "reward below the RFT threshold";
  if (r.termination != messages::episode_end::finished) return "episode hit a limit (" + to_string(r.termination) + ")";
  if (r.malformed_tool_calls > 0) return "invalid tool-call pattern";
  if (max_repeated_tool_call(r) > f.max_repeats) return "redundant loop (a tool call repeated)";
  return {};
}

training_selection select_for_training(const std::vector<messages::trajectory_record>& records,
                                       const training_filter& filter) {
  training_selection out;
  for (const auto& r : records) {
    auto why = training_exclusion(r, filter);
    if (why.empty())
      out.kept.push_back(&r);
    else
      ++out.dropped[why];
  }
  return out;
}

nlohmann::json packed_batch_json(const std::vector<const messages::trajectory_record*>& kept,
                                 messages::learner_stage stage) {
  std::vector<int64_t> tokens, offsets{0}, ids;
  std::vector<float> mask, logp, rewards;
  std::vector<std::vector<uint64_t>> versions;
  for (const auto* r : kept) {
    tokens.insert(tokens.end(), r->tokens.begin(), r->tokens.end());
    for (auto m : r->loss_mask) mask.push_back(m ? 1.0f : 0.0f);
    logp.insert(logp.end(), r->logprobs.begin(), r->logprobs.end());
    offsets.push_back(static_cast<int64_t>(tokens.size()));
    rewards.push_back(static_cast<float>(r->reward));
    ids.push_back(static_cast<int64_t>(r->episode_id));
    versions.push_back(r->policy_versions);
  }
  return {{"stage", stage},       {"tokens", tokens},   {"seq_offsets", offsets}, {"loss_mask", mask},
          {"sampler_logp", logp}, {"rewards", rewards}, {"episode_ids", ids},     {"policy_versions", versions}};
}

}  // namespace caf_agent::rollout
