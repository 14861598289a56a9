// weight_sync_bench: how long new weights take from the learner to an engine of the same
// process, on a random model (default: the Qwen2-0.5B shape), against the disk path.
//   weight_sync_bench [--device cuda] [--engine-dtype bfloat16] [--rounds 5] [--bucket-mb 64]
//                     [--tiny] [--dir DIR] [--skip-disk] [--keep-checkpoints]
// Each round changes the learner's fp32 masters (a small random step, as an update would), then
//   in process: stage_in_process_weights (bucketed copies of the masters), the engine's
//     load_weights("inproc:<key>") (cast to the engine's dtype on its device), and the engine's
//     next step, which swaps them in before it decodes (one 1-token request);
//   disk: decoder::save (safetensors) and load_weights(DIR) (read back, cast, staged), then the step.
// Device work is synchronised before every clock read. Prints one JSON line per round and a
// summary line (milliseconds). Exit status: 0 success, 1 failure.
#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "base/named_enum.hpp"
#include "base/remove_tree.hpp"
#include "policy/model/decoder.hpp"
#include "policy/model/engine.hpp"
#include "policy/model/tool_args.hpp"
#include "policy/model/weight_exchange.hpp"

using namespace caf_agent;
namespace fs = std::filesystem;

namespace {

policy::model_config shape(bool tiny) {
  policy::model_config c;
  c.family = policy::model_family::qwen2;
  c.vocab_size = tiny ? 512 : 151936;
  c.hidden_size = tiny ? 64 : 896;
  c.intermediate_size = tiny ? 128 : 4864;
  c.num_hidden_layers = tiny ? 2 : 24;
  c.num_attention_heads = tiny ? 2 : 14;
  c.num_key_value_heads = 2;
  c.head_dim = tiny ? 32 : 64;
  c.max_position_embeddings = 4096;
  c.rope.theta = 1000000.0;
  c.attention_bias = true;
  c.tie_word_embeddings = true;
  return c;
}

void sync(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize();
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// Where the process was when it crashed: the faulting address, the instruction pointer and the
// mapping it lies in (for addr2line), then the frames the unwinder finds (no core needed).
void print_crash(int sig, siginfo_t* info, void* context) {
  char line[256];
  const auto* uc = static_cast<const ucontext_t*>(context);
  const auto pc = static_cast<unsigned long>(uc->uc_mcontext.gregs[REG_RIP]);
  int n = std::snprintf(line, sizeof(line), "weight_sync_bench: signal %d at address %p, pc 0x%lx\n", sig,
                        info->si_addr, pc);
  (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
  if (FILE* maps = std::fopen("/proc/self/maps", "r")) {  // the mapping holding pc
    while (std::fgets(line, sizeof(line), maps)) {
      unsigned long lo = 0, hi = 0;
      if (std::sscanf(line, "%lx-%lx", &lo, &hi) == 2 && pc >= lo && pc < hi)
        (void)!write(STDERR_FILENO, line, std::strlen(line));
    }
    std::fclose(maps);
  }
  void* frames[64];
  const int depth = backtrace(frames, 64);
  backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// The phase each round is in, on stderr, so a crash names it.
void phase(int round, const char* what) {
  std::fprintf(stderr, "round %d: %s\n", round, what);
}

int fail(const std::string& why) {
  std::cerr << "weight_sync_bench: " << why << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  struct sigaction crash {};
  crash.sa_sigaction = print_crash;
  crash.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &crash, nullptr);
  sigaction(SIGABRT, &crash, nullptr);
  policy::tool_args a;
  if (!policy::parse_tool_args(argc, argv, 1, a)) return 2;
  const torch::Device device(policy::tool_arg(a, "device", torch::cuda::is_available() ? "cuda" : "cpu"));
  const int rounds = std::stoi(policy::tool_arg(a, "rounds", "5"));
  const int64_t bucket = std::stoll(policy::tool_arg(a, "bucket-mb", "64")) << 20;
  const auto dir = fs::path(policy::tool_arg(a, "dir", (fs::temp_directory_path() / "weight_sync_bench").string()));
  const auto config = shape(a.count("tiny") != 0);
  const bool skip_disk = a.count("skip-disk") != 0;                // the in-process path alone
  const bool keep_checkpoints = a.count("keep-checkpoints") != 0;  // no removal between rounds
  torch::manual_seed(0);
  policy::tensor_map tensors;
  for (const auto& [key, sh] : policy::expected_parameter_shapes(config))
    tensors[key] = key.find("norm") != std::string::npos ? torch::ones(sh) : 0.02 * torch::randn(sh);
  auto learner = policy::decoder::from_tensors(config, tensors, device, torch::kFloat32, policy::value_head_mode::none);
  if (!learner) return fail(learner.error().message);
  base::remove_tree(dir.string());
  if (auto ok = learner.value().save((dir / "base").string()); !ok) return fail(ok.error().message);
  policy::engine_options eo;
  eo.model_dir = (dir / "base").string();
  eo.device = device.str();
  const auto engine_dtype = policy::tool_arg(a, "engine-dtype", device.is_cuda() ? "bfloat16" : "float32");
  const auto dtype = base::parse_name<policy::model_dtype>(engine_dtype);
  if (!dtype)
    return fail("--engine-dtype '" + engine_dtype + "' is not one of: " + base::names_list<policy::model_dtype>());
  eo.dtype = *dtype;
  eo.max_batch = 8;
  eo.max_context = 1024;
  auto engine = policy::generation_engine::open(eo);
  if (!engine) return fail(engine.error().message);
  int64_t bytes = 0;
  for (const auto& [n, p] : learner.value().named_parameters()) bytes += p.numel() * p.element_size();
  auto one_step = [&]() -> std::string {  // the swap happens at the start of the next step
    policy::generation_request r;
    r.prompt = {1, 2, 3};
    r.max_new_tokens = 1;
    if (auto id = engine.value()->submit(r); !id) return id.error().message;
    auto done = engine.value()->run_until_idle();
    return done ? std::string{} : done.error().message;
  };
  if (auto err = one_step(); !err.empty()) return fail(err);  // warm-up
  double sum_inproc = 0, sum_disk = 0, max_inproc = 0;
  uint64_t version = 0;
  for (int round = 0; round < rounds; ++round) {
    phase(round, "update the masters");
    {
      at::NoGradGuard no_grad;
      for (const auto& [n, p] : learner.value().named_parameters()) p.add_(torch::randn_like(p), 1e-4);
    }
    sync(device);
    auto t0 = std::chrono::steady_clock::now();
    const auto key = "bench" + std::to_string(round);
    phase(round, "stage in process");
    policy::stage_in_process_weights(key, learner.value().named_parameters(), bucket);
    sync(device);
    const double stage_ms = ms_since(t0);
    phase(round, "engine load_weights inproc");
    auto t1 = std::chrono::steady_clock::now();
    if (auto ok = engine.value()->load_weights(std::string(policy::in_process_weights_prefix) + key, ++version); !ok)
      return fail(ok.error().message);
    sync(device);
    const double load_ms = ms_since(t1);
    phase(round, "engine step after the in-process swap");
    auto t2 = std::chrono::steady_clock::now();
    if (auto err = one_step(); !err.empty()) return fail(err);
    sync(device);
    const double step_ms = ms_since(t2);
    const double inproc_ms = ms_since(t0);
    if (engine.value()->policy_version() != version) return fail("the engine did not switch to the new version");
    if (skip_disk) {
      std::printf(
          "{\"round\":%d,\"bytes\":%lld,\"inproc_ms\":%.2f,\"stage_ms\":%.2f,\"engine_load_ms\":%.2f,"
          "\"swap_step_ms\":%.2f}\n",
          round, static_cast<long long>(bytes), inproc_ms, stage_ms, load_ms, step_ms);
      std::fflush(stdout);
      sum_inproc += inproc_ms;
      max_inproc = std::max(max_inproc, inproc_ms);
      continue;
    }
    // The disk path: a checkpoint written and read back.
    phase(round, "save the checkpoint");
    auto t3 = std::chrono::steady_clock::now();
    const auto ckpt = (dir / ("step-" + std::to_string(round))).string();
    if (auto ok = learner.value().save(ckpt); !ok) return fail(ok.error().message);
    const double save_ms = ms_since(t3);
    phase(round, "engine load_weights from disk and step");
    auto t4 = std::chrono::steady_clock::now();
    if (auto ok = engine.value()->load_weights(ckpt, ++version); !ok) return fail(ok.error().message);
    if (auto err = one_step(); !err.empty()) return fail(err);
    sync(device);
    const double disk_ms = ms_since(t3), reload_ms = ms_since(t4);
    std::printf(
        "{\"round\":%d,\"bytes\":%lld,\"inproc_ms\":%.2f,\"stage_ms\":%.2f,\"engine_load_ms\":%.2f,"
        "\"swap_step_ms\":%.2f,\"disk_ms\":%.2f,\"save_ms\":%.2f,\"reload_and_step_ms\":%.2f}\n",
        round, static_cast<long long>(bytes), inproc_ms, stage_ms, load_ms, step_ms, disk_ms, save_ms, reload_ms);
    std::fflush(stdout);  // a line per round survives a crash later on
    sum_inproc += inproc_ms;
    sum_disk += disk_ms;
    max_inproc = std::max(max_inproc, inproc_ms);
    phase(round, "remove the checkpoint");
    if (!keep_checkpoints) base::remove_tree(ckpt);
  }
  std::printf(
      "{\"summary\":true,\"device\":\"%s\",\"engine_dtype\":\"%s\",\"bytes\":%lld,\"rounds\":%d,"
      "\"inproc_mean_ms\":%.2f,\"inproc_max_ms\":%.2f,\"disk_mean_ms\":%.2f}\n",
      device.str().c_str(), to_string(eo.dtype).c_str(), static_cast<long long>(bytes), rounds, sum_inproc / rounds,
      max_inproc, sum_disk / rounds);
  base::remove_tree(dir.string());
  return 0;
}
