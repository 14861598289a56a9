// trajectory_tool: reads a trajectory store without a cluster.
//   export --store DIR --out FILE
//         every readable record as JSON Lines (tokens and all; FILE may be /dev/stdout)
//   batch  --store DIR --stage ppo|rft|vp [--max-repeats 3] [--min-reward 1] --out FILE
//         the records the stage may learn from, packed as learner_tool reads a batch; prints
//         what was kept and why the rest was dropped (JSON on stdout)
// Exit status: 0 success, 1 failure (message on stderr), 2 usage error.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "rollout/training_set.hpp"
#include "rollout/trajectory_store.hpp"

namespace {

int usage(const std::string& why) {
  std::cerr
      << "trajectory_tool: " << why << "\n"
      << "usage: trajectory_tool export --store DIR --out FILE\n"
      << "       trajectory_tool batch --store DIR --stage ppo|rft|vp [--max-repeats N] [--min-reward R] --out FILE\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage("missing command");
  const std::string cmd = argv[1];
  std::map<std::string, std::string> opt;
  for (int i = 2; i < argc; i += 2) {
    const std::string key = argv[i];
    if (key.rfind("--", 0) != 0 || i + 1 >= argc) return usage("bad argument '" + key + "'");
    opt[key.substr(2)] = argv[i + 1];
  }
  if (!opt.count("store")) return usage("--store is required");
  if (cmd == "export") {
    if (!opt.count("out")) return usage("export needs --out");
    if (auto err = caf_agent::rollout::trajectory_store::export_jsonl(opt["store"], opt["out"])) {
      std::cerr << "trajectory_tool: " << *err << "\n";
      return 1;
    }
    return 0;
  }
  caf_agent::rollout::scan_report scan;
  const auto records = caf_agent::rollout::trajectory_store::read_all(opt["store"], &scan);
  for (const auto& p : scan.problems) std::cerr << "trajectory_tool: " << p << "\n";
  if (cmd == "batch") {
    caf_agent::rollout::training_filter f;
    if (!opt.count("stage") || !opt.count("out")) return usage("batch needs --stage and --out");
    const auto stage = caf_agent::messages::parse_name<caf_agent::messages::learner_stage>(opt["stage"]);
    if (!stage)
      return usage("--stage must be one of: " + caf_agent::messages::names_list<caf_agent::messages::learner_stage>());
    f.stage = *stage;
    try {
      if (opt.count("max-repeats")) f.max_repeats = std::stoi(opt["max-repeats"]);
      if (opt.count("min-reward")) f.min_reward = std::stoi(opt["min-reward"]);
    } catch (const std::exception&) {
      return usage("--max-repeats and --min-reward take integers");
    }
    const auto sel = caf_agent::rollout::select_for_training(records, f);
    nlohmann::json summary = {{"records", records.size()}, {"kept", sel.kept.size()}, {"dropped", sel.dropped}};
    std::cout << summary.dump() << "\n";
    if (sel.kept.empty()) {
      std::cerr << "trajectory_tool: no record of the store is training data for stage " << opt["stage"] << "\n";
      return 1;
    }
    std::ofstream out(opt["out"]);
    out << caf_agent::rollout::packed_batch_json(sel.kept, f.stage).dump();
    return out ? 0 : 1;
  }
  return usage("unknown command '" + cmd + "'");
}
