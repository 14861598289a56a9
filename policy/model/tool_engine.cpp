// tool_engine: policy_model_tool's commands that drive the generation engine (generate, bench,
// agent-bench) and profile its steps; their flags are in policy_model_tool.cpp's usage.
#include "policy/model/tool_common.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "policy/model/device_timeline.hpp"
#include "policy/model/engine.hpp"
#include "policy/model/fused_ops.hpp"

namespace caf_agent::policy::tool {

std::vector<int32_t> random_tokens(std::mt19937& gen, int count, int vocab) {
  std::uniform_int_distribution<int32_t> pick(3, std::max(4, vocab) - 1);
  std::vector<int32_t> out(static_cast<size_t>(std::max(count, 1)));
  for (auto& t : out) t = pick(gen);
  return out;
}

std::vector<generation_request> requests_of(const args& a) {
  std::vector<generation_request> out;
  std::vector<std::vector<int32_t>> prompts;
  if (a.count("random-prompts")) {
    const int count = std::stoi(get(a, "random-prompts")), length = std::stoi(get(a, "prompt-len", "16"));
    std::mt19937 gen(static_cast<uint32_t>(std::stoul(get(a, "seed", "0"))));
    for (int i = 0; i < count; ++i) prompts.push_back(random_tokens(gen, length, std::stoi(get(a, "vocab", "1000"))));
  } else {
    std::stringstream in(get(a, "prompts"));
    for (std::string prompt; std::getline(in, prompt, ';');) {
      prompts.emplace_back();
      for (int64_t id : parse_ids(prompt)) prompts.back().push_back(static_cast<int32_t>(id));
    }
  }
  uint64_t seed = std::stoull(get(a, "seed", "0"));
  for (auto& prompt : prompts) {
    generation_request r;
    r.prompt = std::move(prompt);
    r.max_new_tokens = std::stoi(get(a, "max-new-tokens", "16"));
    r.sampling.temperature = std::stof(get(a, "temperature", "0"));
    r.sampling.top_k = std::stoi(get(a, "top-k", "0"));
    r.sampling.top_p = std::stof(get(a, "top-p", "1"));
    for (int64_t id : parse_ids(get(a, "stop"))) r.stop_token_ids.push_back(static_cast<int32_t>(id));
    r.seed = seed++;
    out.push_back(std::move(r));
  }
  return out;
}

// The engine's counters accumulated between two snapshots (the values of now as they are).
engine_stats stats_since(const engine_stats& before, engine_stats now) {
  for_each_stat([&](const char*, auto member, stat_kind kind) {
    if (kind == stat_kind::count) now.*member -= before.*member;
  });
  return now;
}

// Every counter as "name":value (a few under the shorter names the bench scripts and the committed
// results read), then the prefix hit rate and whether the fused kernels were built.
void print_stats(const engine_stats& s) {
  static const std::map<std::string, std::string> short_names = {
      {"prefilled_tokens", "prefilled"},  {"reused_tokens", "reused"},         {"copied_tokens", "copied"},
      {"decoded_tokens", "decoded"},      {"recomputed_tokens", "recomputed"}, {"moved_tokens", "moved"},
      {"decode_block_runs", "block_runs"}};
  for_each_stat([&](const char* name, auto member, stat_kind) {
    const auto renamed = short_names.find(name);
    std::cout << "\"" << (renamed == short_names.end() ? std::string(name) : renamed->second) << "\":" << s.*member
              << ",";
  });
  const double looked_up = static_cast<double>(s.prefilled_tokens + s.reused_tokens);
  std::cout << "\"prefix_hit_rate\":" << (looked_up > 0 ? static_cast<double>(s.reused_tokens) / looked_up : 0.0)
            << ",\"fused_kernels_built\":" << (fused_kernels_built() ? "true" : "false");
}

// `fields`: more "key":value pairs to lead the object with, each followed by a comma.
void print_result(const generation_result& r, const std::string& fields = "") {
  std::cout << "{" << fields << "\"id\":" << r.id << ",\"reason\":\"" << finish_reason_name(r.reason)
            << "\",\"policy_version\":" << r.policy_version << ",\"tokens\":[";
  for (size_t i = 0; i < r.tokens.size(); ++i) std::cout << (i ? "," : "") << r.tokens[i];
  std::cout << "],\"logprobs\":[";
  char buf[32];
  for (size_t i = 0; i < r.logprobs.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(r.logprobs[i]));
    std::cout << (i ? "," : "") << buf;
  }
  if (!r.logits.empty()) {
    std::cout << "],\"logits\":[";
    for (size_t i = 0; i < r.logits.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(r.logits[i]));
      std::cout << (i ? "," : "") << buf;
    }
  }
  std::cout << "]}\n";
}

engine_options engine_options_of(const args& a) {
  engine_options options;
  options.model_dir = get(a, "model");
  options.device = get(a, "device", "cpu");
  options.dtype = model_dtype_of(a);
  options.max_batch = std::stoi(get(a, "max-batch", "8"));
  options.max_context = std::stoi(get(a, "max-context", "0"));
  options.cuda_graphs = !a.count("no-cuda-graphs");
  options.fused_kernels = !a.count("no-fused-kernels");
  options.prefix_cache = !a.count("no-prefix-cache");
  options.overlap = a.count("overlap") > 0;
  options.report_logits = a.count("report-logits") > 0;
  options.programmatic_launch = a.count("no-programmatic-launch") == 0;
  options.cache_attention = named_arg(a, "cache-attention", options.cache_attention);
  options.prefill_chunk = std::stoi(get(a, "prefill-chunk", std::to_string(options.prefill_chunk)));
  options.kv_layout = named_arg(a, "kv-layout", options.kv_layout);
  options.kv_cache_dtype = named_arg(a, "kv-cache-dtype", options.kv_cache_dtype);
  options.kv_block_size = std::stoi(get(a, "kv-block-size", std::to_string(options.kv_block_size)));
  options.kv_cache_tokens = std::stoll(get(a, "kv-cache-tokens", "0"));
  options.flash_decode_shares =
      std::stoi(get(a, "flash-decode-shares", std::to_string(engine_options{}.flash_decode_shares)));
  options.decode_gemv_rows = std::stoi(get(a, "decode-gemv-rows", std::to_string(engine_options{}.decode_gemv_rows)));
  options.prefill_wait_steps = std::stoi(get(a, "prefill-wait-steps", std::to_string(options.prefill_wait_steps)));
  options.decode_mma_rows = std::stoi(get(a, "decode-mma-rows", std::to_string(engine_options{}.decode_mma_rows)));
  return options;
}

void synchronize(const engine_options& options) {
  if (options.device != "cpu") torch::cuda::synchronize();
}

// Engine steps under the Kineto profiler (CPU and CUDA activity) from its construction; finish()
// after the last writes FILE with, per step, the wall time, the device's busy time
// (kernels and copies summed) and their count, the prefill passes and tokens among the steps, and
// the kernels by total device time. Shows whether a step is bound by its kernels' count (many
// short ones), by the host between steps, or by a few long ones. With programmatic launch a kernel
// starts before the one ahead of it ends and its time includes that wait, so the summed times
// overlap: each kernel's `us_added_per_step` is instead the part of its events that no
// earlier-starting event covers (the time it adds to the device's timeline), and
// `device_span_us_per_step` their sum (the busy time counted once). The profiler's own recording
// adds host time to every op, so the wall time overstates an unprofiled step's host part
// (engine_stats::prefill_host_seconds has it without the profiler).
class profiled_steps {
 public:
  profiled_steps(const generation_engine& engine, const engine_options& options) : options_(options) {
    if (options.device != "cpu") activities_.insert(torch::profiler::impl::ActivityType::CUDA);
    torch::autograd::profiler::prepareProfiler(config_, activities_);
    synchronize(options);
    before_ = engine.stats();
    torch::autograd::profiler::enableProfiler(config_, activities_);
    start_ = std::chrono::steady_clock::now();
  }

  profiled_steps(const profiled_steps&) = delete;
  profiled_steps& operator=(const profiled_steps&) = delete;
  ~profiled_steps() {
    if (!finished_) (void)torch::autograd::profiler::disableProfiler();  // a step failed
  }

  // `ran`: the steps since the constructor.
  status finish(const generation_engine& engine, int ran, const std::string& path) {
    finished_ = true;
    synchronize(options_);
    const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count();
    auto result = torch::autograd::profiler::disableProfiler();
    const auto s = stats_since(before_, engine.stats());
    struct total {
      double us = 0;
      int64_t calls = 0;
      size_t index = 0;  // in the timeline
    };
    std::map<std::string, total> by_kernel;
    double device_us = 0;
    int64_t device_events = 0;
    std::vector<device_event> events;
    for (const auto& e : result->events()) {
      if (e.deviceType() != c10::DeviceType::CUDA) continue;
      const double us = static_cast<double>(e.durationNs()) / 1000.0;
      auto [it, added] = by_kernel.try_emplace(e.name(), total{0.0, 0, by_kernel.size()});
      it->second.us += us;
      it->second.calls += 1;
      device_us += us;
      ++device_events;
      events.push_back({e.startNs(), e.endNs(), it->second.index});
    }
    const auto timeline = read_device_timeline(std::move(events), by_kernel.size());
    std::vector<std::pair<std::string, total>> kernels(by_kernel.begin(), by_kernel.end());
    std::sort(kernels.begin(), kernels.end(), [](const auto& x, const auto& y) { return x.second.us > y.second.us; });
    const double n = std::max(ran, 1);
    std::ofstream f(path);
    f << "{\"steps\":" << ran << ",\"decode_steps\":" << s.decode_steps << ",\"graph_replays\":" << s.graph_replays
      << ",\"graph_captures\":" << s.graph_captures << ",\"prefill_passes\":" << s.prefill_passes
      << ",\"prefilled_tokens\":" << s.prefilled_tokens << ",\"wall_us_per_step\":" << wall_us / n
      << ",\"device_busy_us_per_step\":" << device_us / n << ",\"device_span_us_per_step\":" << timeline.span_us / n
      << ",\"device_events_per_step\":" << device_events / n
      << ",\"short_gaps_per_step\":" << static_cast<double>(timeline.short_gaps) / n
      << ",\"short_gap_us_per_step\":" << timeline.short_gap_us / n
      << ",\"long_gaps_per_step\":" << static_cast<double>(timeline.long_gaps) / n
      << ",\"long_gap_us_per_step\":" << timeline.long_gap_us / n << ",\"longest_gap_us\":" << timeline.longest_gap_us
      << ",\"kernels\":[";
    for (size_t i = 0; i < kernels.size(); ++i)
      f << (i ? "," : "") << "{\"name\":" << json_string(kernels[i].first)
        << ",\"calls_per_step\":" << kernels[i].second.calls / n << ",\"us_per_step\":" << kernels[i].second.us / n
        << ",\"us_added_per_step\":" << timeline.added_us[kernels[i].second.index] / n << "}";
    f << "]}\n";
    if (!f) return fail("cannot write " + path);
    std::cerr << "profile: " << ran << " steps, " << wall_us / n << " us wall, " << device_us / n << " us device busy, "
              << device_events / n << " device events per step\n";
    return {};
  }

 private:
  engine_options options_;
  std::set<torch::profiler::impl::ActivityType> activities_{torch::profiler::impl::ActivityType::CPU};
  torch::profiler::impl::ProfilerConfig config_{torch::profiler::impl::ProfilerState::KINETO};
  engine_stats before_;
  std::chrono::steady_clock::time_point start_;
  bool finished_ = false;
};

// bench --profile FILE: `steps` engine steps under the profiler (profiled_steps).
status profile_steps(generation_engine& engine, const engine_options& options, int steps, const std::string& path) {
  profiled_steps profiled(engine, options);
  int ran = 0;
  for (; ran < steps && !engine.idle(); ++ran)
    if (auto done = engine.step(); !done) return done.error();
  return profiled.finish(engine, ran, path);
}

// The wall time of each step() call, summed by what the step did (its engine counters' change):
// decode-only steps (one decode pass, no prefill) with the sums a least-squares line of seconds
// over attended keys needs (bench/policy/bench_agent.py step_split fits it), prefilling steps,
// and the rest (steps that only landed or admitted). Rationale: step() ends in the step's one
// host synchronisation, so its wall time is the step's, device and host, without another sync;
// with --overlap it is the previous step's wait and this one's launch, the same in the sums.
struct step_times {
  struct sums {
    uint64_t steps = 0;
    double seconds = 0, keys = 0, keys_sq = 0, keys_seconds = 0, rows = 0, tokens = 0;
  };
  sums decode_only, prefilling, other;

  void add(double seconds, const engine_stats& before, const engine_stats& after) {
    const double keys = static_cast<double>(after.attended_keys - before.attended_keys);
    const uint64_t prefilled = after.prefilled_tokens - before.prefilled_tokens;
    sums& s = prefilled > 0 ? prefilling : after.decode_steps - before.decode_steps == 1 ? decode_only : other;
    s.steps += 1;
    s.seconds += seconds;
    s.keys += keys;
    s.keys_sq += keys * keys;
    s.keys_seconds += keys * seconds;
    s.rows += static_cast<double>(after.decoded_tokens - before.decoded_tokens);
    s.tokens += static_cast<double>(prefilled);
  }
  void print() const {
    const auto precision = std::cout.precision(17);  // sums of squares: the fit subtracts them
    std::cout << "{";
    const std::pair<const char*, const sums*> all[] = {
        {"decode_only", &decode_only}, {"prefilling", &prefilling}, {"other", &other}};
    for (size_t i = 0; i < 3; ++i) {
      const sums& s = *all[i].second;
      std::cout << (i ? "," : "") << "\"" << all[i].first << "\":{\"steps\":" << s.steps << ",\"seconds\":" << s.seconds
                << ",\"keys\":" << s.keys << ",\"keys_sq\":" << s.keys_sq << ",\"keys_seconds\":" << s.keys_seconds
                << ",\"rows\":" << s.rows << ",\"tokens\":" << s.tokens << "}";
    }
    std::cout << "}";
    std::cout.precision(precision);
  }
};

// E conversations in flight; the "environment" answers each reply at once with O new tokens.
int run_agent_bench(const args& a) {
  const auto options = engine_options_of(a);
  auto opened = generation_engine::open(options);
  if (!opened) {
    std::cerr << opened.error().message << "\n";
    return 1;
  }
  auto& engine = *opened.value();
  const int episodes = std::stoi(get(a, "episodes", "64")), turns = std::stoi(get(a, "turns", "30"));
  const int system = std::stoi(get(a, "system", "1000")), obs = std::stoi(get(a, "obs", "500"));
  const int reply = std::stoi(get(a, "reply", "300")), vocab = std::stoi(get(a, "vocab", "1000"));
  std::mt19937 gen(static_cast<uint32_t>(std::stoul(get(a, "seed", "0"))));
  struct episode {
    std::vector<int32_t> history;
    int turn = 0;
  };
  // --from-turn J: start at turn J (1-based), the first prompt already holding the J - 1 earlier
  // turns' replies and observations (random tokens); turns J..T run. With --no-prefix-cache a
  // turn's work does not depend on the earlier ones, so one turn can be timed alone.
  const int from_turn = std::stoi(get(a, "from-turn", "1"));
  const float temperature = std::stof(get(a, "temperature", "1"));
  const bool print_turns = a.count("print") != 0;
  // --prefill-only: each turn's request generates one token (its prompt's prefill and nothing
  // else); the prompts keep their lengths (earlier replies count R tokens).
  const int max_new = a.count("prefill-only") ? 1 : reply;
  if (from_turn < 1 || from_turn > turns) {
    std::cerr << "agent-bench: --from-turn must be in [1, --turns]\n";
    return 2;
  }
  std::vector<episode> eps(static_cast<size_t>(episodes));
  std::map<uint64_t, size_t> owner;
  auto submit = [&](size_t e) {
    generation_request r;
    r.prompt = eps[e].history;
    r.max_new_tokens = max_new;
    r.sampling.temperature = temperature;
    r.seed = e * 1000 + static_cast<uint64_t>(eps[e].turn);
    auto id = engine.submit(std::move(r));
    if (!id) throw std::runtime_error(id.error().message);
    owner[id.value()] = e;
  };
  {  // Warm-up outside the timing (allocator, kernels, graphs of the small buckets): one prompt as
    // long as the first ones, so the timed prefill passes find their memory allocated.
    generation_request warm;
    warm.prompt =
        random_tokens(gen, std::min(system + (from_turn - 1) * (reply + obs), engine.max_context() - 8), vocab);
    warm.max_new_tokens = 4;
    (void)engine.submit(warm);
    if (auto w = engine.run_until_idle(); !w) throw std::runtime_error(w.error().message);
    engine.forget_prefixes();  // its random prompt is no episode's
    synchronize(options);
  }
  const auto before = engine.stats();
  const auto start = std::chrono::steady_clock::now();
  for (size_t e = 0; e < eps.size(); ++e) {
    eps[e].history = random_tokens(gen, system + (from_turn - 1) * (reply + obs), vocab);
    eps[e].turn = from_turn - 1;
    submit(e);
  }
  uint64_t generated = 0;
  // Progress on stderr (unbuffered, so a run stopped by a timeout keeps it): when the last
  // episode finishes turn j, {"turn": j, "seconds": since start}.
  std::vector<int> finished_turn(static_cast<size_t>(turns) + 1, 0);
  // --profile FILE --profile-after-turn J [--profile-steps N]: the N steps after every episode has
  // finished turn J under the profiler (the next turn's prompts arriving: prefilling steps over a
  // cached prefix among decode steps). Their times count in the run's too.
  const std::string profile_path = get(a, "profile");
  const int profile_after = std::stoi(get(a, "profile-after-turn", "0"));
  const int profile_steps_wanted = std::stoi(get(a, "profile-steps", "20"));
  if (!profile_path.empty() && (profile_after < 1 || profile_after >= turns || profile_steps_wanted < 1)) {
    std::cerr << "agent-bench: --profile needs --profile-after-turn in [1, --turns - 1] and --profile-steps >= 1\n";
    return 2;
  }
  std::optional<profiled_steps> profiling;
  int profiled = 0;
  const auto finish_profile = [&] {
    if (auto written = profiling->finish(engine, profiled, profile_path); !written)
      throw std::runtime_error(written.error().message);
    profiling.reset();
  };
  step_times times;
  auto last = before;
  while (!engine.idle()) {
    const auto begun = std::chrono::steady_clock::now();
    auto done = engine.step();
    if (!done) throw std::runtime_error(done.error().message);
    const auto now = engine.stats();
    times.add(std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count(), last, now);
    last = now;
    if (profiling && ++profiled == profile_steps_wanted) finish_profile();
    for (auto& r : done.value()) {
      const size_t e = owner.at(r.id);
      generated += r.tokens.size();
      auto& ep = eps[e];
      ++ep.turn;
      if (print_turns)
        print_result(r, "\"episode\":" + std::to_string(e) + ",\"turn\":" + std::to_string(ep.turn) + ",");
      if (++finished_turn[static_cast<size_t>(ep.turn)] == episodes) {
        std::cerr << "{\"turn\":" << ep.turn
                  << ",\"seconds\":" << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                  << "}\n";
        if (!profile_path.empty() && ep.turn == profile_after) profiling.emplace(engine, options);
      }
      if (ep.turn >= turns) continue;
      if (max_new == reply) {
        ep.history.insert(ep.history.end(), r.tokens.begin(), r.tokens.end());
      } else {  // --prefill-only: a reply of R tokens all the same, so later prompts keep their lengths
        auto filler = random_tokens(gen, reply, vocab);
        ep.history.insert(ep.history.end(), filler.begin(), filler.end());
      }
      auto more = random_tokens(gen, obs, vocab);
      ep.history.insert(ep.history.end(), more.begin(), more.end());
      submit(e);
    }
  }
  if (profiling) finish_profile();  // the run ended within the window
  synchronize(options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto s = stats_since(before, engine.stats());
  std::cout << "{\"seconds\":" << seconds << ",\"generated\":" << generated << ",";
  print_stats(s);
  std::cout << ",\"step_times\":";
  times.print();
  std::cout << "}\n";
  return 0;
}

int run_generate(const std::string& command, const args& a) {
  const auto options = engine_options_of(a);
  auto engine = generation_engine::open(options);
  if (!engine) {
    std::cerr << engine.error().message << "\n";
    return 1;
  }
  auto requests = requests_of(a);
  if (command == "bench") {  // Warm-up: one short request (allocator, kernels, pinned memory).
    // Its own prompt, so the prefix cache does not hand the timed run a prefilled first prompt.
    generation_request warm = requests.front();
    warm.prompt.assign(8, 3);
    warm.max_new_tokens = 4;
    (void)engine.value()->submit(warm);
    (void)engine.value()->run_until_idle();
    engine.value()->forget_prefixes();
    if (options.device != "cpu") torch::cuda::synchronize();
  }
  // --repeat N (bench): the same requests N times on the same engine; later runs find the CUDA
  // graphs of every bucket captured.
  const int repeat = command == "bench" ? std::max(1, std::stoi(get(a, "repeat", "1"))) : 1;
  std::vector<generation_result> results;
  for (int rep = 0; rep < repeat; ++rep) {
    results.clear();
    const auto before = engine.value()->stats();
    uint64_t prompt_tokens = 0;
    const auto start = std::chrono::steady_clock::now();
    for (auto r : requests) {
      prompt_tokens += r.prompt.size();
      if (auto id = engine.value()->submit(std::move(r)); !id) {
        std::cerr << id.error().message << "\n";
        return 1;
      }
    }
    // Step by hand to note when the last prompt's prefill ended.
    double prefill_s = 0;
    while (!engine.value()->idle()) {
      auto done = engine.value()->step();
      if (!done) {
        std::cerr << done.error().message << "\n";
        return 1;
      }
      const auto now = engine.value()->stats();
      if (prefill_s == 0 &&
          now.prefilled_tokens + now.reused_tokens - before.prefilled_tokens - before.reused_tokens >= prompt_tokens) {
        synchronize(options);
        prefill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
      for (auto& r : done.value()) results.push_back(std::move(r));
    }
    synchronize(options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (command == "bench") {
      size_t tokens = 0;
      for (const auto& r : results) tokens += r.tokens.size();
      const auto s = stats_since(before, engine.value()->stats());
      std::cout << "{\"repeat\":" << rep << ",\"seconds\":" << seconds << ",\"tokens\":" << tokens
                << ",\"prefill_seconds\":" << prefill_s << ",";
      print_stats(s);
      std::cout << "}\n";
    }
  }
  if (command == "bench" && a.count("profile")) {
    // The same requests once more; the steps after --profile-skip (default 100: past the prefill,
    // every graph captured by the runs above) are profiled, then the rest runs to the end.
    for (auto r : requests)
      if (auto id = engine.value()->submit(std::move(r)); !id) {
        std::cerr << id.error().message << "\n";
        return 1;
      }
    for (int i = std::stoi(get(a, "profile-skip", "100")); i > 0 && !engine.value()->idle(); --i)
      if (auto done = engine.value()->step(); !done) {
        std::cerr << done.error().message << "\n";
        return 1;
      }
    if (auto profiled =
            profile_steps(*engine.value(), options, std::stoi(get(a, "profile-steps", "20")), get(a, "profile"));
        !profiled) {
      std::cerr << profiled.error().message << "\n";
      return 1;
    }
    if (auto rest = engine.value()->run_until_idle(); !rest) {
      std::cerr << rest.error().message << "\n";
      return 1;
    }
  }
  if (command == "bench") return 0;
  std::sort(results.begin(), results.end(), [](const auto& x, const auto& y) { return x.id < y.id; });
  for (const auto& r : results) print_result(r);
  return 0;
}

}  // namespace caf_agent::policy::tool
