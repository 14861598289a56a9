#pragma once
// lr_schedule: the learning rate of each optimizer step of a stage. No torch types (the trainer
// actor computes a step's rates with it; the shard applies them). Three kinds:
//   constant  `lr` at every step;
//   phases    [[steps, lr], ...] in order: the first `steps` optimizer steps at the first lr, the
//             next ones at the second, ...; past the last phase its lr holds;
//   cosine    a linear warm-up from 0 to `lr` over `warmup_steps` steps, then a cosine decay from
//             `lr` to `min_lr` over the remaining `total_steps - warmup_steps` (then `min_lr`).
// Steps count from 0 within the stage. Header-only: the trainer actor (no LibTorch) and the
// learner both use it.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/named_enum.hpp"
#include "learner/result.hpp"

namespace caf_agent::learner {

/// The kinds of schedule ([train.<stage>] lr_schedule holds its name).
enum class lr_schedule_kind { constant, phases, cosine };
CAF_AGENT_ENUM_NAMES(lr_schedule_kind, "constant", "phases", "cosine")

/// Parses "constant", "phases" or "cosine" (an error names the others).
result<lr_schedule_kind> parse_lr_schedule_kind(const std::string& name);

/// A stage's learning-rate schedule.
struct lr_schedule {
  lr_schedule_kind kind = lr_schedule_kind::constant;
  double lr = 3e-6;                                ///< constant: the rate; cosine: the peak
  std::vector<std::pair<int64_t, double>> phases;  ///< phases: (optimizer steps, lr) in order
  int64_t warmup_steps = 0;                        ///< cosine: the linear warm-up
  int64_t total_steps = 0;                         ///< cosine: warm-up plus decay
  double min_lr = 0;                               ///< cosine: the rate at the end of the decay

  /// Checks the schedule (every rate >= 0 and finite, phases non-empty with steps >= 1, cosine
  /// total_steps >= 1 and warmup_steps in [0, total_steps]); the error names the field.
  status validate() const;
  /// The rate of optimizer step `step` (0-based within the stage).
  double at(int64_t step) const;
  /// The phases' steps summed (0 for other kinds): how long a phased stage runs.
  int64_t phase_steps() const;
};

/// Parses "STEPS:LR,STEPS:LR,..." (learner_tool --phases) into phases; errors name the entry.
result<std::vector<std::pair<int64_t, double>>> parse_lr_phases(const std::string& text);

// Implementation.

inline result<lr_schedule_kind> parse_lr_schedule_kind(const std::string& name) {
  if (auto kind = base::parse_name<lr_schedule_kind>(name)) return *kind;
  return fail("lr schedule '" + name + "': expected one of " + base::names_list<lr_schedule_kind>());
}

inline status lr_schedule::validate() const {
  auto bad_rate = [](double x) { return !std::isfinite(x) || x < 0; };
  if (bad_rate(lr)) return fail("lr schedule: lr must be finite and >= 0");
  if (kind == lr_schedule_kind::phases) {
    if (phases.empty()) return fail("lr schedule: phases is empty (give [[steps, lr], ...])");
    for (size_t i = 0; i < phases.size(); ++i) {
      if (phases[i].first < 1) return fail("lr schedule: phase " + std::to_string(i + 1) + " has steps < 1");
      if (bad_rate(phases[i].second))
        return fail("lr schedule: phase " + std::to_string(i + 1) + " has an lr that is not finite and >= 0");
    }
  }
  if (kind == lr_schedule_kind::cosine) {
    if (total_steps < 1) return fail("lr schedule: cosine needs total_steps >= 1");
    if (warmup_steps < 0 || warmup_steps > total_steps)
      return fail("lr schedule: warmup_steps must lie in [0, total_steps]");
    if (bad_rate(min_lr)) return fail("lr schedule: min_lr must be finite and >= 0");
  }
  return {};
}

inline double lr_schedule::at(int64_t step) const {
  step = std::max<int64_t>(step, 0);
  switch (kind) {
    case lr_schedule_kind::constant:
      return lr;
    case lr_schedule_kind::phases: {
      int64_t end = 0;
      for (const auto& [steps, rate] : phases) {
        end += steps;
        if (step < end) return rate;
      }
      return phases.empty() ? lr : phases.back().second;
    }
    case lr_schedule_kind::cosine: {
      // Rationale: the warm-up starts above 0 (step 0 gets lr / warmup), as in transformers'
      // get_cosine_schedule_with_warmup, so the first step moves the weights.
      if (step < warmup_steps) return lr * double(step + 1) / double(warmup_steps);
      const int64_t decay = total_steps - warmup_steps;
      if (decay <= 0 || step >= total_steps) return min_lr;
      const double progress = double(step - warmup_steps) / double(decay);
      return min_lr + (lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    }
  }
  return lr;
}

inline int64_t lr_schedule::phase_steps() const {
  if (kind != lr_schedule_kind::phases) return 0;
  int64_t n = 0;
  for (const auto& p : phases) n += p.first;
  return n;
}

inline result<std::vector<std::pair<int64_t, double>>> parse_lr_phases(const std::string& text) {
  std::vector<std::pair<int64_t, double>> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto colon = item.find(':');
    if (colon == std::string::npos) return fail("phase '" + item + "': expected STEPS:LR");
    try {
      size_t used = 0;
      const auto steps = std::stoll(item.substr(0, colon), &used);
      if (used != colon) throw std::invalid_argument("steps");
      const auto rate_text = item.substr(colon + 1);
      const double rate = std::stod(rate_text, &used);
      if (used != rate_text.size()) throw std::invalid_argument("lr");
      out.emplace_back(steps, rate);
    } catch (const std::exception&) {
      return fail("phase '" + item + "': expected STEPS:LR (an integer and a number)");
    }
  }
  if (out.empty()) return fail("no phases in '" + text + "'");
  return out;
}

}  // namespace caf_agent::learner
