#pragma once
/// observe/run_board.hpp: what the run driver knows so far (in the coordinator's process).
///
/// The driver posts the plan, each started episode and each stored record; the
/// coordinator's views, the Prometheus endpoint and the metrics JSONL read it. Rewards
/// are the judge's tiers: 3 faster than eager and torch.compile, 2 faster than eager,
/// 1 correct, -1 failed.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "messages/trajectory.hpp"

namespace caf_agent::observe {

/// A copy of the run's counters.
struct run_facts {
  bool active = false;  ///< a driver runs in this process
  std::string store_dir;
  std::string mode;
  int64_t planned = 0, started = 0, recorded = 0, aborted = 0;
  int64_t correct = 0;
  int64_t faster_eager = 0;    ///< > 5% faster than eager
  int64_t faster_compile = 0;  ///< > 5% faster than torch.compile
  int64_t turns_total = 0;
  int64_t tokens_total = 0;
  std::map<int32_t, int64_t> rewards;           ///< reward -> records (aborted ones excluded)
  std::map<std::string, int64_t> terminations;  ///< finished, turn_limit, ..., aborted
  int64_t started_at_ms = 0;
};

/// The process's run board.
class run_board {
 public:
  static run_board& process();
  void start(const std::string& store_dir, const std::string& mode, int64_t planned);
  void on_started();
  void on_record(const messages::trajectory_record& rec);
  run_facts facts() const;
  void reset();

 private:
  mutable std::mutex mutex_;
  run_facts facts_;
};

}  // namespace caf_agent::observe
