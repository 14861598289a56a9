// The agent-shaped workload of `policy_model_tool agent-bench` (E conversations x T turns, a
// first prompt of S tokens, each turn an R-token sampled reply and an O-token observation of
// random tokens), written against the generation engine's oldest interface (open, submit, step,
// idle; generation_request's prompt, max_new_tokens, sampling.temperature and seed), so that it
// builds against the engine as it was before the KV cache was kept across turns (every turn a
// new request that prefills the whole conversation) as well as against today's.
// bench/policy/run_baseline_h200.sh builds it into a `git archive` of that older tree.
//
//   agent_workload MODEL_DIR DEVICE DTYPE EPISODES TURNS SYSTEM OBS REPLY VOCAB MAX_CONTEXT
//
// stderr: {"turn": j, "seconds": s} when the last episode finishes turn j (unbuffered, so a
// run stopped by a timeout keeps its progress); stdout: one JSON line at the end.
#include <torch/cuda.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "policy/model/engine.hpp"

namespace {

using caf_agent::policy::engine_options;
using caf_agent::policy::generation_engine;
using caf_agent::policy::generation_request;

// The same draw as policy_model_tool's random_tokens: ids in [3, vocab).
std::vector<int32_t> random_tokens(std::mt19937& gen, int count, int vocab) {
  std::uniform_int_distribution<int32_t> pick(3, std::max(4, vocab) - 1);
  std::vector<int32_t> out(static_cast<size_t>(std::max(count, 1)));
  for (auto& t : out) t = pick(gen);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 11) {
    std::cerr << "usage: agent_workload MODEL_DIR DEVICE DTYPE EPISODES TURNS SYSTEM OBS REPLY VOCAB MAX_CONTEXT\n";
    return 2;
  }
  engine_options options;
  options.model_dir = argv[1];
  options.device = argv[2];
  options.dtype = argv[3];
  const int episodes = std::stoi(argv[4]), turns = std::stoi(argv[5]), system = std::stoi(argv[6]);
  const int obs = std::stoi(argv[7]), reply = std::stoi(argv[8]), vocab = std::stoi(argv[9]);
  options.max_batch = episodes;
  options.max_context = std::stoi(argv[10]);
  auto opened = generation_engine::open(options);
  if (!opened) {
    std::cerr << opened.error().message << "\n";
    return 1;
  }
  auto& engine = *opened.value();
  const bool cuda = options.device != "cpu";
  std::mt19937 gen(0);
  std::vector<std::vector<int32_t>> history(static_cast<size_t>(episodes));
  std::vector<int> turn(static_cast<size_t>(episodes), 0);
  std::map<uint64_t, size_t> owner;
  auto submit = [&](size_t e) {
    generation_request r;
    r.prompt = history[e];
    r.max_new_tokens = reply;
    r.sampling.temperature = 1.0f;
    r.seed = e * 1000 + static_cast<uint64_t>(turn[e]);
    auto id = engine.submit(std::move(r));
    if (!id) {
      std::cerr << "submit: " << id.error().message << "\n";
      std::exit(1);
    }
    owner[id.value()] = e;
  };
  {  // Warm-up outside the timing, as agent-bench does: one prompt as long as the first ones.
    generation_request warm;
    warm.prompt = random_tokens(gen, system, vocab);
    warm.max_new_tokens = 4;
    if (auto id = engine.submit(warm); !id) {
      std::cerr << "warm-up: " << id.error().message << "\n";
      return 1;
    }
    if (auto w = engine.run_until_idle(); !w) {
      std::cerr << "warm-up: " << w.error().message << "\n";
      return 1;
    }
    if (cuda) torch::cuda::synchronize();
  }
  const auto start = std::chrono::steady_clock::now();
  for (size_t e = 0; e < history.size(); ++e) {
    history[e] = random_tokens(gen, system, vocab);
    submit(e);
  }
  uint64_t generated = 0, prompt_tokens = 0;
  std::vector<int> finished(static_cast<size_t>(turns) + 1, 0);
  while (!engine.idle()) {
    auto done = engine.step();
    if (!done) {
      std::cerr << "step: " << done.error().message << "\n";
      return 1;
    }
    for (auto& r : done.value()) {
      const size_t e = owner.at(r.id);
      generated += r.tokens.size();
      prompt_tokens += history[e].size();
      ++turn[e];
      if (++finished[static_cast<size_t>(turn[e])] == episodes)
        std::cerr << "{\"turn\":" << turn[e]
                  << ",\"seconds\":" << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                  << "}" << std::endl;
      if (turn[e] >= turns) continue;
      history[e].insert(history[e].end(), r.tokens.begin(), r.tokens.end());
      auto more = random_tokens(gen, obs, vocab);
      history[e].insert(history[e].end(), more.begin(), more.end());
      submit(e);
    }
  }
  if (cuda) torch::cuda::synchronize();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "{\"seconds\":" << seconds << ",\"generated\":" << generated << ",\"prompt_tokens\":" << prompt_tokens
            << "}" << std::endl;
  return 0;
}
