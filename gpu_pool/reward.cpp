/// gpu_pool/reward.cpp: the robust reward; mirrored by skills/eval_worker/caf_agent_eval/reward.py.
#include "gpu_pool/reward.hpp"

#include <cmath>

namespace caf_agent::gpu_pool {
namespace {

bool valid_time(double t) {
  return std::isfinite(t) && t > 0;
}

}  // namespace

bool beats(double t, double t0) {
  return (t0 - t) / t0 > speedup_margin;
}

reward_result robust_reward(const reward_input& in) {
  if (!in.correct) return {-1, "verification failed"};
  const struct {
    const char* name;
    double value;
  } times[] = {{"candidate", in.candidate_ms}, {"eager", in.eager_ms}, {"compile", in.compile_ms}};
  for (const auto& t : times)
    if (!valid_time(t.value)) return {-1, std::string("invalid ") + t.name + " time (NaN, infinite or not positive)"};
  const bool eager = beats(in.candidate_ms, in.eager_ms);
  if (eager && beats(in.candidate_ms, in.compile_ms)) return {3, "more than 5% faster than eager and torch.compile"};
  if (eager) return {2, "more than 5% faster than eager only"};
  return {1, "correct, not more than 5% faster than eager"};
}

double speedup_reward(const reward_input& in) {
  if (!in.correct || !valid_time(in.candidate_ms) || !valid_time(in.eager_ms)) return -1.0;
  return in.eager_ms / in.candidate_ms;
}

}  // namespace caf_agent::gpu_pool
