// observe/run_board.cpp: see run_board.hpp.
#include "observe/run_board.hpp"

#include <chrono>

namespace caf_agent::observe {

run_board& run_board::process() {
  static run_board instance;
  return instance;
}

void run_board::start(const std::string& store_dir, const std::string& mode, int64_t planned) {
  std::lock_guard lock{mutex_};
  facts_ = {};
  facts_.active = true;
  facts_.store_dir = store_dir;
  facts_.mode = mode;
  facts_.planned = planned;
  facts_.started_at_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
}

void run_board::on_started() {
  std::lock_guard lock{mutex_};
  ++facts_.started;
}

void run_board::on_record(const messages::trajectory_record& rec) {
  std::lock_guard lock{mutex_};
  ++facts_.recorded;
  ++facts_.terminations[to_string(rec.termination)];
  facts_.turns_total += rec.turns;
  facts_.tokens_total += static_cast<int64_t>(rec.tokens.size());
  if (rec.termination == messages::episode_end::aborted) {
    ++facts_.aborted;
    return;
  }
  ++facts_.rewards[rec.reward];
  facts_.correct += rec.correct;
  // Rationale: the judge's 5% margin (README's reward), so these rates match the tiers.
  facts_.faster_eager += rec.correct && rec.speedup_eager > 1.05;
  facts_.faster_compile += rec.correct && rec.speedup_compile > 1.05;
}

run_facts run_board::facts() const {
  std::lock_guard lock{mutex_};
  return facts_;
}

void run_board::reset() {
  std::lock_guard lock{mutex_};
  facts_ = {};
}

}  // namespace caf_agent::observe
