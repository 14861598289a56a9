#include "rollout/wire_limit.hpp"

#include <string>

namespace caf_agent::rollout {
namespace {

// Rationale: a length prefix or a scalar costs at most 9 bytes in either format.
constexpr std::size_t per_item = 9;

std::size_t strings_bound(const std::vector<std::string>& v) {
  std::size_t n = per_item;
  for (const auto& s : v) n += s.size() + per_item;
  return n;
}

template <class T>
std::size_t vector_bound(const std::vector<T>& v) {
  return per_item + v.size() * (sizeof(T) + 1);  // msgpack adds a type byte per number
}

}  // namespace

std::size_t wire_bytes_bound(const messages::trajectory_record& r) {
  // Rationale: 1 KiB covers the scalars and field names of both formats.
  std::size_t n = 1024;
  n += r.task_id.size() + messages::name_of(r.mode).size() + r.node_id.size() + r.verdict.size() +
       messages::name_of(r.termination).size() + r.abort_reason.size() + 6 * per_item;
  n += vector_bound(r.tokens) + vector_bound(r.logprobs) + vector_bound(r.loss_mask) + vector_bound(r.turn_starts) +
       vector_bound(r.policy_versions) + vector_bound(r.turn_overhead_us);
  n += strings_bound(r.turn_texts) + strings_bound(r.observations);
  for (const auto& [name, stats] : r.tools) n += name.size() + sizeof(stats) + 8 * per_item;
  for (const auto& [name, ms] : r.timings_ms) n += name.size() + sizeof(ms) + 2 * per_item;
  return n;
}

bool fit_record_to_wire(messages::trajectory_record& r, std::size_t limit) {
  const std::size_t size = wire_bytes_bound(r);
  if (size <= limit) return false;
  const auto tokens = r.tokens.size();
  const auto observations = r.observations.size();
  r.tokens.clear();
  r.logprobs.clear();
  r.loss_mask.clear();
  r.turn_starts.clear();
  r.turn_texts.clear();
  r.observations.clear();
  // Rationale: 4 KiB of the verdict is enough to say what the judge saw.
  if (r.verdict.size() > 4096) r.verdict.resize(4096);
  const std::string was =
      r.termination == messages::episode_end::aborted ? " (" + r.abort_reason.substr(0, 1024) + ")" : "";
  r.abort_reason = "record too large to send: about " + std::to_string(size) + " bytes (" + std::to_string(tokens) +
                   " tokens, " + std::to_string(observations) + " observations) over the limit of " +
                   std::to_string(limit) + " bytes; its tokens, texts and observations were dropped" + was;
  r.termination = messages::episode_end::aborted;
  return true;
}

}  // namespace caf_agent::rollout
