// bench/rollout/scale_bench.cpp: the real rollout actors at cluster scale, with
// simulated policy, tools and GPU slots.
//
//   scale_bench [episodes=10000] [turns=150] [slots=128] [policy_ms=20] [tool_ms=5] [eval_ms=10]
//
// Runs `episodes` concurrent episodes of `turns` turns against `slots` sim GPU
// slots and reports: slot utilization while saturated (busy-slot integral over
// slot-time, sampled every 250 ms; "saturated" = jobs waiting), per-turn
// orchestration overhead (turn wall time minus policy/tool/eval waits) p50/p99,
// peak resident memory, and wall time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <caf/all.hpp>

#include "actors/gpu_pool.hpp"
#include "actors/policy_server.hpp"
#include "actors/rollout_manager.hpp"
#include "actors/run_driver.hpp"
#include "actors/tool_executor.hpp"
#include "base/log.hpp"
#include "base/remove_tree.hpp"
#include "messages/type_ids.hpp"
#include "rollout/trajectory_store.hpp"

using namespace caf_agent;

namespace {

long peak_rss_mb() {
  std::ifstream in{"/proc/self/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6) / 1024;
  return -1;
}

double arg(int argc, char** argv, int i, double def) {
  return argc > i ? std::atof(argv[i]) : def;
}

}  // namespace

int main(int argc, char** argv) {
  int episodes = static_cast<int>(arg(argc, argv, 1, 10000));
  int turns = static_cast<int>(arg(argc, argv, 2, 150));
  int slots = static_cast<int>(arg(argc, argv, 3, 128));
  double policy_ms = arg(argc, argv, 4, 20), tool_ms = arg(argc, argv, 5, 5), eval_ms = arg(argc, argv, 6, 10);
  set_log_level(log_level::quiet);
  caf::actor_system_config cfg;
  cfg.add_message_types<caf::id_block::caf_agent>();
  caf::actor_system sys{cfg};

  std::vector<std::unique_ptr<gpu_pool::slot_backend>> backends;
  for (int i = 0; i < slots; ++i) backends.push_back(gpu_pool::make_sim_slot(eval_ms, 0.7, 100 + i));
  auto pool = spawn_gpu_pool(sys, {.queue_capacity = slots * 2, .quarantine_after_failures = 3}, std::move(backends));
  tool_executor_options t;
  t.mode = tool_mode::sim;
  t.sim_latency_ms = tool_ms;
  auto tools = spawn_tool_executors(sys, t);
  rollout::sim_policy_options p;
  p.latency_ms_mean = policy_ms;
  p.finish_after = turns + 1;
  p.malformed_rate = 0.01;
  auto policy = spawn_policy_server(sys, rollout::make_sim_policy(p));
  rollout_manager_options m;
  m.rollout.max_concurrent_episodes = episodes;
  m.node_id = "bench/rollout";
  m.pool = pool;
  m.env.policy = policy;
  m.env.tools = tools;
  m.env.system_text = "sim";
  auto manager = spawn_rollout_manager(sys, m);

  auto store_dir = std::filesystem::temp_directory_path() / ("caf_agent_scale_" + std::to_string(::getpid()));
  std::atomic<bool> finished{false};
  run_driver_options d;
  messages::task_spec task;
  task.task_id = "sim";
  task.model_py = "class Model: pass\n";
  d.tasks = {task};
  d.episodes = episodes;
  d.max_turns = turns;
  d.store_dir = store_dir.string();
  d.on_finished = [&](const run_summary&) { finished = true; };
  std::string error;
  auto driver = spawn_run_driver(sys, d, error);
  if (!driver) {
    std::fprintf(stderr, "scale_bench: %s\n", error.c_str());
    return 2;
  }
  caf::anon_send(driver, messages::service_announce{"bench/rollout", "rollout"}, caf::actor_cast<caf::actor>(manager));
  caf::anon_send(driver, messages::rollout_capacity{"bench/rollout", episodes, 0, m.rollout.max_concurrent_episodes});

  auto t0 = std::chrono::steady_clock::now();
  caf::scoped_actor self{sys};
  double sat_busy = 0, sat_slot = 0, jobs = 0, run_us = 0;
  auto sample = [&] {
    self->request(pool, caf::infinite, atoms::stats::value)
        .receive(
            [&](std::map<std::string, double>& s) {
              sat_busy = s["saturated_busy_us"];
              sat_slot = s["saturated_slot_us"];
              jobs = s["jobs_done"];
              run_us = s["run_us_total"];
            },
            [](caf::error&) {});
  };
  while (!finished) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  sample();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto records = rollout::trajectory_store::read_all(store_dir);
  std::vector<uint32_t> overhead;
  size_t total_turns = 0;
  for (auto& r : records) {
    overhead.insert(overhead.end(), r.turn_overhead_us.begin(), r.turn_overhead_us.end());
    total_turns += static_cast<size_t>(r.turns);
  }
  std::sort(overhead.begin(), overhead.end());
  auto pct = [&](double q) {
    return overhead.empty() ? 0.0 : overhead[static_cast<size_t>(q * (overhead.size() - 1))] / 1000.0;
  };
  std::printf("episodes=%d records=%zu turns=%zu slots=%d wall_s=%.1f\n", episodes, records.size(), total_turns, slots,
              wall);
  std::printf("eval_jobs=%.0f slot_utilization_while_saturated=%.4f (work waiting for %.1f s of %.1f s)\n", jobs,
              sat_slot > 0 ? sat_busy / sat_slot : 0.0, sat_slot / slots / 1e6, wall);
  std::printf("slot_side_busy_fraction_of_wall=%.4f (sum of job run times / (slots x wall))\n",
              run_us / (slots * wall * 1e6));
  std::printf("turn_overhead_ms p50=%.3f p90=%.3f p99=%.3f max=%.3f\n", pct(0.5), pct(0.9), pct(0.99), pct(1.0));
  std::printf("peak_rss_mb=%ld\n", peak_rss_mb());
  caf_agent::base::remove_tree(std::filesystem::path(store_dir).string());
  self->send_exit(driver, caf::exit_reason::user_shutdown);
  for (auto& a : {caf::actor_cast<caf::actor>(manager), caf::actor_cast<caf::actor>(policy),
                  caf::actor_cast<caf::actor>(tools), caf::actor_cast<caf::actor>(pool)})
    self->send_exit(a, caf::exit_reason::user_shutdown);
  return records.size() == static_cast<size_t>(episodes) ? 0 : 1;
}
