// learner_tool: the learner on one machine, without the cluster (tests, parity, benchmarks).
//   step  --model DIR --batch FILE [--stage ppo|rft|vp] [--critic DIR] [--steps N] --out DIR
//         one training step (N with --steps, over the same batch, the optimizer state carried
//         on; --batch-sequences K: each step the next K trajectories, round robin) on a stored
//         batch; --phases STEPS:LR,... sets the actor's lr by phase (--steps defaults to their
//         sum), --cosine [--warmup N] [--min-lr X] a warm-up to --lr and a cosine decay over
//         --steps (learner/lr_schedule.hpp); prints each step report (JSON, one line, with the
//         step's "lr") and writes a
//         checkpoint (step-00000001/ with actor/, critic/, optimizer state) under --out
//   grad  --model DIR --batch FILE --out FILE [--values]
//         loss = sum over sampled tokens of log p (+ the critic's values with --values; the
//         value head starts from zeros unless the checkpoint has one); writes a safetensors file
//         with "loss" [1] and "grad.<parameter>" for every parameter (fp32); --entropy adds the
//         sum of the sampled tokens' entropies to the loss
//   bench [--model DIR] [--context 8192] [--seq-len L] [--steps 5] [--peak-tflops 989]
//         RFT steps (forward, backward, AdamW) on synthetic packed batches of --context tokens
//         in sequences of --seq-len (default: one sequence); without --model a random
//         Qwen2-0.5B-shaped model. Prints tokens/s, step time, peak memory and MFU (JSON).
//         --sdpa default|flash|efficient|cudnn|math: only that attention backend of
//         scaled_dot_product_attention (an unsupported one fails the step with ATen's reason).
//         --profile FILE: one more step under the Kineto profiler; FILE gets the device time by
//         kernel (name, calls, microseconds, share) and by class (gemm, attention, elementwise,
//         reduction, optimizer, copy, other), FILE.trace.json the Chrome trace.
// Common: --device cpu|cuda[:N], --dtype float32|bfloat16 (compute; masters stay fp32),
// --checkpoint-layers, --chunk N (LM-head chunk), --no-head-recompute (keep the chunks' logits
// for the backward instead of recomputing them), --no-fused-head (the LM head as the ATen
// composite on CUDA too; learner/fused_head.hpp), --max-tokens N (micro-batch budget),
// --lr X, --critic-lr X, --temperature T.
// Batch file (JSON): {"tokens": [...], "seq_offsets": [0, ...], "loss_mask": [...],
// "rewards": [...], "sampler_logp": [...] (optional)}.
// MFU (torchtitan's definition): model FLOPs per step = 6 * N * tokens + 12 * L * H * E *
// sum_i len_i^2, N = parameters without the input embedding (the LM head counted once, tied or
// not), L layers, H query heads, E head_dim, len_i the length of packed sequence i (each
// token attends within its own sequence); MFU = FLOPs / step seconds / peak.
// Exit status: 0 success, 1 failure (message on stderr), 2 usage error.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>
#if defined(CAF_AGENT_LEARNER_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "learner/checkpoint.hpp"
#include "learner/fused_head.hpp"
#include "learner/lr_schedule.hpp"
#include "learner/trainer.hpp"
#include "policy/model/tool_args.hpp"
#include "policy/text/json.hpp"

using namespace caf_agent;
using namespace caf_agent::learner;

namespace {

using args = caf_agent::policy::tool_args;

std::string get(const args& a, const std::string& key, const std::string& fallback = "") {
  return caf_agent::policy::tool_arg(a, key, fallback);
}

torch::ScalarType compute_dtype(const args& a) {
  const std::string d = get(a, "dtype", "float32");
  return d == "bfloat16" || d == "bf16" ? torch::kBFloat16 : d == "float16" ? torch::kFloat16 : torch::kFloat32;
}

trainer_options options_of(const args& a) {
  trainer_options o;
  o.forward.compute_dtype = compute_dtype(a);
  o.forward.checkpoint_layers = a.count("checkpoint-layers") != 0;
  o.forward.logprob_chunk = std::stoll(get(a, "chunk", "1024"));
  o.forward.recompute_head = a.count("no-head-recompute") == 0;
  o.forward.fused_head = a.count("no-fused-head") == 0;
  o.forward.temperature = std::stod(get(a, "temperature", "1"));
  o.max_tokens_per_microbatch = std::stoll(get(a, "max-tokens", "0"));
  o.actor_optimizer.lr = std::stod(get(a, "lr", std::to_string(default_actor_lr)));
  o.critic_optimizer.lr = std::stod(get(a, "critic-lr", std::to_string(default_critic_lr)));
  return o;
}

result<torch::Tensor> json_tensor(const policy::json_value& root, const char* key, torch::ScalarType dtype,
                                  bool required = true) {
  const auto* v = root.find(key);
  if (!v) return required ? result<torch::Tensor>(fail(std::string("batch lacks '") + key + "'")) : torch::Tensor();
  if (!v->is_array()) return fail(std::string("batch: '") + key + "' must be an array of numbers");
  std::vector<double> values;
  for (const auto& x : v->as_array()) {
    if (!x.is_number()) return fail(std::string("batch: '") + key + "' must be an array of numbers");
    values.push_back(x.as_double());
  }
  return torch::tensor(values, torch::kFloat64).to(dtype);
}

result<rollout_batch> read_batch(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("cannot read batch file " + path);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  auto root = policy::parse_json(text);
  if (!root || !root.value().is_object()) return fail(path + ": not a JSON object");
  rollout_batch b;
  std::pair<const char*, torch::Tensor*> fields[] = {{"tokens", &b.tokens_t},
                                                     {"seq_offsets", &b.seq_offsets_n1},
                                                     {"loss_mask", &b.loss_mask_t},
                                                     {"rewards", &b.rewards_n}};
  for (auto [key, out] : fields) {
    const bool integral = std::string(key) == "tokens" || std::string(key) == "seq_offsets";
    auto t = json_tensor(root.value(), key, integral ? torch::kInt64 : torch::kFloat32);
    if (!t) return fail(path + ": " + t.error().message);
    *out = t.value();
  }
  auto s = json_tensor(root.value(), "sampler_logp", torch::kFloat32, false);
  if (!s) return fail(path + ": " + s.error().message);
  b.sampler_logp_t = s.value();
  if (auto ok = b.validate(); !ok) return fail(path + ": " + ok.error().message);
  return b;
}

result<policy::decoder> load_model(const std::string& dir, const args& a, policy::value_head_mode heads) {
  if (dir.empty()) return fail("--model is required");
  auto m = policy::decoder::load(dir, torch::Device(get(a, "device", "cpu")), torch::kFloat32, heads);
  if (!m) return m.error();
  for (const auto& [name, p] : m.value().named_parameters()) p.requires_grad_(true);
  return m;
}

int report_error(const std::string& message) {
  std::cerr << "learner_tool: " << message << "\n";
  return 1;
}

int run_step(const args& a) {
  auto stage = parse_stage(get(a, "stage", "ppo"));
  if (!stage) return report_error(stage.error().message);
  auto batch = read_batch(get(a, "batch"));
  if (!batch) return report_error(batch.error().message);
  auto actor = load_model(get(a, "model"), a, policy::value_head_mode::none);
  if (!actor) return report_error(actor.error().message);
  std::optional<policy::decoder> critic;
  if (stage.value() != train_stage::rft) {
    auto c = load_model(get(a, "critic", get(a, "model")), a, policy::value_head_mode::init_if_missing);
    if (!c) return report_error(c.error().message);
    critic = c.value();
  }
  auto t = trainer::create(actor.value(), critic, options_of(a));
  if (!t) return report_error(t.error().message);
  // --steps N: N steps over the same batch in one process (the optimizer state carries over),
  // one report line each; the recipe's RFT epochs (docs/TRAINING.md).
  // --batch-sequences K: each step takes the next K trajectories of the batch (round robin, in
  // batch order), so one pass over the batch is several optimizer steps.
  // --phases STEPS:LR,...: the actor's lr by phase (steps default to the phases' sum);
  // --cosine: warm-up (--warmup N) to --lr, then cosine to --min-lr over --steps.
  lr_schedule schedule{.lr = options_of(a).actor_optimizer.lr};
  if (a.count("phases")) {
    auto phases = parse_lr_phases(get(a, "phases"));
    if (!phases) return report_error("--phases: " + phases.error().message);
    schedule.kind = lr_schedule_kind::phases;
    schedule.phases = phases.value();
  }
  const int64_t steps = std::stoll(get(a, "steps", std::to_string(std::max<int64_t>(1, schedule.phase_steps()))));
  if (steps < 1) return report_error("--steps must be >= 1");
  if (a.count("cosine")) {
    if (a.count("phases")) return report_error("--cosine and --phases exclude each other");
    schedule.kind = lr_schedule_kind::cosine;
    schedule.warmup_steps = std::stoll(get(a, "warmup", "0"));
    schedule.min_lr = std::stod(get(a, "min-lr", "0"));
    schedule.total_steps = steps;
  }
  if (auto ok = schedule.validate(); !ok) return report_error(ok.error().message);
  const int64_t n = batch.value().sequences();
  const int64_t per_step = std::stoll(get(a, "batch-sequences", std::to_string(n)));
  if (per_step < 1) return report_error("--batch-sequences must be >= 1");
  result<step_report> r = fail("no step ran");
  for (int64_t i = 0; i < steps; ++i) {
    std::vector<int64_t> pick;
    for (int64_t k = 0; k < std::min(per_step, n); ++k) pick.push_back((i * per_step + k) % n);
    t.value().set_actor_lr(schedule.at(i));
    r = t.value().step(per_step >= n ? batch.value() : batch.value().select(pick), stage.value());
    if (!r) return report_error(r.error().message);
    std::cout << r.value().to_json() << std::endl;
  }
  if (a.count("out")) {
    auto saved = save_checkpoint(get(a, "out"), {t.value().steps(), 1}, t.value().checkpoint_parts());
    if (!saved) return report_error(saved.error().message);
  }
  return r.value().applied ? 0 : 1;
}

int run_grad(const args& a) {
  auto batch = read_batch(get(a, "batch"));
  if (!batch) return report_error(batch.error().message);
  const bool values = a.count("values") != 0;
  auto model =
      load_model(get(a, "model"), a, values ? policy::value_head_mode::init_if_missing : policy::value_head_mode::none);
  if (!model) return report_error(model.error().message);
  auto o = options_of(a).forward;
  o.want_values = values;
  o.want_entropy = a.count("entropy") != 0;
  const auto device = model.value().device();
  auto f = train_forward(model.value(), batch.value().tokens_t.to(device), batch.value().seq_offsets_n1, o);
  if (!f) return report_error(f.error().message);
  auto mask_t = batch.value().loss_mask_t.to(device);
  auto loss = (f.value().logp_t * mask_t).sum();
  if (values) loss = loss + (f.value().values_t * mask_t).sum();
  if (a.count("entropy")) loss = loss + (f.value().entropy_t * mask_t).sum();
  loss.backward();
  policy::tensor_map out{{"loss", loss.detach().reshape({1}).to(torch::kCPU)}};
  for (const auto& [name, p] : model.value().named_parameters())
    out["grad." + name] = p.grad().defined() ? p.grad().to(torch::kCPU) : torch::zeros_like(p).to(torch::kCPU);
  auto ok = policy::write_safetensors(get(a, "out"), out);
  if (!ok) return report_error(ok.error().message);
  return 0;
}

policy::model_config qwen2_05b_shape() {
  policy::model_config c;
  c.family = policy::model_family::qwen2;
  c.vocab_size = 151936;
  c.hidden_size = 896;
  c.intermediate_size = 4864;
  c.num_hidden_layers = 24;
  c.num_attention_heads = 14;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  // Rationale: Qwen2-0.5B's 32k context stretched to the 131,072-token trajectories to train.
  c.max_position_embeddings = 131072;
  c.rope.theta = 1000000.0;
  c.attention_bias = true;
  c.tie_word_embeddings = true;
  return c;
}

int64_t peak_memory_bytes(torch::Device device) {
#if defined(CAF_AGENT_LEARNER_CUDA)
  if (device.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  }
#endif
  return -1;
}

/// Restricts scaled_dot_product_attention to one backend ("default" leaves ATen's choice).
bool select_sdpa(const std::string& backend) {
  if (backend == "default") return true;
  static const std::set<std::string> known = {"flash", "efficient", "cudnn", "math"};
  if (known.count(backend) == 0) return false;
  auto& ctx = at::globalContext();
  ctx.setSDPUseFlash(backend == "flash");
  ctx.setSDPUseMemEfficient(backend == "efficient");
  ctx.setSDPUseCuDNN(backend == "cudnn");
  ctx.setSDPUseMath(backend == "math");
  return true;
}

/// The class of a device kernel by its name (what the step's time goes to).
std::string kernel_class(const std::string& name) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("flash") || has("fmha") || has("attention") || has("cudnn")) return "attention";
  if (has("gemm") || has("xmma") || has("cutlass") || has("nvjet") || has("sm90_") || has("cublas")) return "gemm";
  if (has("multi_tensor") || has("adam") || has("Adam")) return "optimizer";
  if (has("Memcpy") || has("Memset") || has("copy") || has("Copy")) return "copy";
  if (has("reduce") || has("Reduce") || has("softmax") || has("norm") || has("logsumexp")) return "reduction";
  if (has("elementwise") || has("Elementwise") || has("vectorized") || has("unrolled")) return "elementwise";
  return "other";
}

/// Runs `step` once under the Kineto profiler; writes the per-kernel and per-class device time.
int profile_step(const std::string& path, const std::function<bool()>& step, const torch::Device& device) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const std::set<ActivityType> activities{ActivityType::CPU, ActivityType::CUDA};
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  const auto start = std::chrono::steady_clock::now();
  const bool ok = step();
  if (device.is_cuda()) torch::cuda::synchronize();
  const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  auto result = prof::disableProfiler();
  if (!ok) return report_error("the profiled step failed");
  result->save(path + ".trace.json");
  struct total {
    double us = 0;
    int64_t calls = 0;
  };
  std::map<std::string, total> by_kernel, by_class;
  double device_us = 0;
  for (const auto& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::CUDA) continue;
    const double us = static_cast<double>(e.durationNs()) / 1000.0;
    by_kernel[e.name()].us += us;
    by_kernel[e.name()].calls += 1;
    by_class[kernel_class(e.name())].us += us;
    by_class[kernel_class(e.name())].calls += 1;
    device_us += us;
  }
  std::vector<std::pair<std::string, total>> kernels(by_kernel.begin(), by_kernel.end());
  std::sort(kernels.begin(), kernels.end(), [](const auto& x, const auto& y) { return x.second.us > y.second.us; });
  auto quoted = [](const std::string& s) {
    std::string out = "\"";
    for (char ch : s) {
      if (ch == '"' || ch == '\\') out += '\\';
      if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
    }
    return out + "\"";
  };
  std::ofstream f(path);
  f << "{\"step_wall_us\":" << wall_us << ",\"device_busy_us\":" << device_us << ",\"classes\":{";
  bool first = true;
  for (const auto& [name, t] : by_class) {
    f << (first ? "" : ",") << quoted(name) << ":{\"us\":" << t.us << ",\"calls\":" << t.calls
      << ",\"share\":" << (device_us > 0 ? t.us / device_us : 0) << "}";
    first = false;
  }
  f << "},\"kernels\":[";
  for (size_t i = 0; i < kernels.size(); ++i)
    f << (i ? "," : "") << "{\"name\":" << quoted(kernels[i].first)
      << ",\"class\":" << quoted(kernel_class(kernels[i].first)) << ",\"calls\":" << kernels[i].second.calls
      << ",\"us\":" << kernels[i].second.us << "}";
  f << "]}\n";
  if (!f) return report_error("cannot write " + path);
  std::cerr << "profile: step " << wall_us / 1000 << " ms wall, device busy " << device_us / 1000 << " ms\n";
  for (const auto& [name, t] : by_class)
    std::cerr << "  " << name << ": " << t.us / 1000 << " ms in " << t.calls << " kernels\n";
  for (size_t i = 0; i < std::min<size_t>(kernels.size(), 25); ++i)
    std::cerr << "  " << kernels[i].second.us / 1000 << " ms x" << kernels[i].second.calls << " "
              << kernels[i].first.substr(0, 110) << "\n";
  return 0;
}

int run_bench(const args& a) {
  const torch::Device device(get(a, "device", "cpu"));
  if (!select_sdpa(get(a, "sdpa", "default")))
    return report_error("--sdpa must be default, flash, efficient, cudnn or math");
  policy::decoder model;
  if (a.count("model")) {
    auto m = load_model(get(a, "model"), a, policy::value_head_mode::none);
    if (!m) return report_error(m.error().message);
    model = m.value();
  } else {
    const auto c = qwen2_05b_shape();
    torch::manual_seed(0);
    policy::tensor_map tensors;
    auto options = torch::TensorOptions().device(device).dtype(torch::kFloat32);
    for (const auto& [name, shape] : policy::expected_parameter_shapes(c))
      tensors[name] =
          name.find("norm") != std::string::npos ? torch::ones(shape, options) : 0.02 * torch::randn(shape, options);
    auto m = policy::decoder::from_tensors(c, tensors, device, torch::kFloat32);
    if (!m) return report_error(m.error().message);
    model = m.value();
  }
  const auto& c = model.config();
  const int64_t context = std::stoll(get(a, "context", "8192"));
  const int64_t seq_len = std::stoll(get(a, "seq-len", std::to_string(context)));
  const int64_t steps = std::stoll(get(a, "steps", "5"));
  if (seq_len <= 0 || context % seq_len != 0) return report_error("--context must be a multiple of --seq-len");
  rollout_batch b;
  b.tokens_t = torch::randint(0, c.vocab_size, {context}, torch::kInt64);
  b.seq_offsets_n1 = torch::arange(0, context + 1, seq_len, torch::kInt64);
  b.loss_mask_t = torch::ones({context});
  b.loss_mask_t.index_fill_(0, b.seq_offsets_n1.narrow(0, 0, context / seq_len), 0.0);
  b.rewards_n = torch::ones({context / seq_len});
  auto opts = options_of(a);
  auto t = trainer::create(model, std::nullopt, opts);
  if (!t) return report_error(t.error().message);
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  auto warm = t.value().step(b, train_stage::rft);  // allocator, kernels, cuBLAS handles
  if (!warm) return report_error(warm.error().message);
  sync();
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) {
    auto r = t.value().step(b, train_stage::rft);
    if (!r) return report_error(r.error().message);
  }
  sync();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
  double params = 0;
  for (const auto& [name, p] : model.named_parameters())
    if (name != "model.embed_tokens.weight") params += static_cast<double>(p.numel());
  if (c.tie_word_embeddings) params += static_cast<double>(c.vocab_size * c.hidden_size);
  const double attn = 12.0 * c.num_hidden_layers * c.num_attention_heads * c.head_dim * static_cast<double>(seq_len) *
                      static_cast<double>(context);
  const double flops = 6.0 * params * static_cast<double>(context) + attn;
  const double peak = std::stod(get(a, "peak-tflops", "989")) * 1e12;
  std::cout << "{\"context\":" << context << ",\"seq_len\":" << seq_len << ",\"steps\":" << steps << ",\"dtype\":\""
            << get(a, "dtype", "float32") << "\",\"sdpa\":\"" << get(a, "sdpa", "default") << "\",\"fused_head\":"
            << (opts.forward.fused_head && fused_head_built() && device.is_cuda() &&
                        opts.forward.compute_dtype == torch::kBFloat16
                    ? "true"
                    : "false")
            << ",\"checkpoint_layers\":" << (opts.forward.checkpoint_layers ? "true" : "false")
            << ",\"step_seconds\":" << seconds << ",\"tokens_per_second\":" << static_cast<double>(context) / seconds
            << ",\"model_tflops_per_step\":" << flops / 1e12 << ",\"mfu\":" << flops / seconds / peak
            << ",\"peak_memory_bytes\":" << peak_memory_bytes(device) << ",\"params_without_embedding\":" << params
            << "}\n";
  if (a.count("profile"))
    return profile_step(
        get(a, "profile"), [&] { return t.value().step(b, train_stage::rft).ok(); }, device);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: learner_tool step|grad|bench [--model DIR] ...\n";
    return 2;
  }
  const std::string command = argv[1];
  args a;
  if (!caf_agent::policy::parse_tool_args(argc, argv, 2, a)) return 2;
  static const std::map<std::string, std::vector<std::string>> known = {
      {"step",
       {"model", "batch", "stage", "critic", "out", "steps", "batch-sequences", "phases", "cosine", "warmup",
        "min-lr"}},
      {"grad", {"model", "batch", "out", "values", "entropy"}},
      {"bench", {"model", "context", "seq-len", "steps", "peak-tflops", "sdpa", "profile"}}};
  static const std::vector<std::string> common = {
      "device",     "dtype", "checkpoint-layers", "chunk",      "no-head-recompute", "no-fused-head",
      "max-tokens", "lr",    "critic-lr",         "temperature"};
  auto allowed = known.find(command);
  if (allowed == known.end()) {
    std::cerr << "unknown command '" << command << "' (step, grad, bench)\n";
    return 2;
  }
  for (const auto& [key, value] : a) {
    if (std::find(allowed->second.begin(), allowed->second.end(), key) == allowed->second.end() &&
        std::find(common.begin(), common.end(), key) == common.end()) {
      std::cerr << "unknown option --" << key << " for " << command << "\n";
      return 2;
    }
  }
  try {
    if (command == "step") return run_step(a);
    if (command == "grad") return run_grad(a);
    if (command == "bench") return run_bench(a);
  } catch (const std::exception& e) {  // bad numbers in arguments, device errors
    std::cerr << "learner_tool: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "unknown command '" << command << "'\n";
  return 2;
}
