#pragma once
/// policy/config.hpp: [policy], which backend answers generate requests and how (defaults, the
/// field list that runtime/ reads TOML through and prints config/defaults.toml from, checks).
/// No torch, CAF or Boost types: every layer may include it.

#include <cstdint>
#include <string>

#include "base/config_fields.hpp"
#include "base/named_enum.hpp"
#include "policy/model/engine_choices.hpp"

namespace caf_agent::policy {

/// Which backend answers generate requests ([policy] backend): recorded turns, simulated
/// latency (load tests), the in-process LibTorch engine, or an OpenAI-compatible server.
enum class backend_kind : uint8_t { replay, sim, libtorch, openai };
CAF_AGENT_ENUM_NAMES(backend_kind, "replay", "sim", "libtorch", "openai")

/// [policy]: what each member means is said once, in fields().
struct policy_config {
  backend_kind backend = backend_kind::replay;
  std::string replay_path = "skills/replay/default.jsonl";
  std::string model_dir;
  std::string base_url;
  std::string model_name;
  double temperature = 1.0;
  double top_p = 1.0;
  int32_t max_new_tokens = 2048;
  int32_t top_k = 0;
  uint64_t seed = 0;
  int32_t max_batch = 64;
  int32_t max_context = 0;
  std::string device = "cpu";
  model_dtype dtype = model_dtype::float32;
  bool prefix_cache = true;
  int32_t prefill_chunk = 16384;
  int32_t prefill_wait_steps = 0;
  cache_attention_choice cache_attention = cache_attention_choice::automatic;
  kv_layout_kind kv_layout = kv_layout_kind::slots;
  int32_t kv_block_size = 256;
  int64_t kv_cache_tokens = 0;
  kv_cache_dtype_kind kv_cache_dtype = kv_cache_dtype_kind::automatic;
  bool cuda_graphs = true;
  bool overlap = false;
  int32_t flash_decode_shares = 64;
  int32_t decode_gemv_rows = 1;
  int32_t decode_mma_rows = 0;
  bool programmatic_launch = true;
  std::string script;
  int64_t request_timeout_ms = 120000;
  int32_t max_retries = 2;
  int32_t concurrency = 16;
  std::string api_key_env;
  std::string serve_host = "127.0.0.1";
  int32_t serve_port = 8000;
  double sim_latency_ms_mean = 200;
  double sim_eval_ms_mean = 2000;

  /// The field list (base/config_fields.hpp).
  template <class F, class Self>
  static void fields(F& f, Self& c) {
    using namespace base;
    f("backend", c.backend, "libtorch, openai, replay (recorded turns), sim (load tests)");
    f("replay_path", c.replay_path, "replay: the recorded episodes (JSON lines)");
    f("model_dir", c.model_dir, "libtorch: a Hugging Face checkpoint directory");
    f("base_url", c.base_url, "openai: http://HOST:PORT/v1");
    f("model_name", c.model_name,
      "openai: the model to ask for; inference role: the name it serves (empty: model_dir's)");
    // Rationale: temperatures above 10 sample noise; a larger value is a mistake.
    f("temperature", c.temperature, "sampling temperature", range(0, 10));
    f("top_p", c.top_p, "nucleus sampling", above_within(0, 1, "must be in (0, 1]"));
    f("max_new_tokens", c.max_new_tokens, "tokens one turn may generate", positive());
    f("top_k", c.top_k, "0 = off", at_least(0, "must be >= 0"));
    f("seed", c.seed, "base seed of every request (reproducible runs)");
    f("max_batch", c.max_batch, "libtorch: sequences decoded together (the cache holds max_batch x max_context tokens)",
      positive());
    f("max_context", c.max_context, "libtorch: tokens per sequence; 0 = the model's, capped at 4096",
      at_least(0, "must be >= 0 (0: from the model)"));
    f("device", c.device, "libtorch: cpu, cuda, cuda:N");
    f("dtype", c.dtype, "libtorch: float32, bfloat16, float16");
    f("prefix_cache", c.prefix_cache,
      "libtorch: keep a finished turn's keys; the next turn prefills only its new tokens");
    f("prefill_chunk", c.prefill_chunk,
      "libtorch: prompt tokens prefilled per step while the others decode; 0 = whole prompts",
      at_least(0, "must be >= 0 (0: whole prompts)"));
    f("prefill_wait_steps", c.prefill_wait_steps,
      "libtorch: while others decode, hold arriving prompts up to this many steps so one prefill pass takes "
      "several (at once when they fill prefill_chunk); 0 = prefill what arrived every step (off: no faster than chunks "
      "of 8192 on an H100)",
      at_least(0, "must be >= 0 (0: no wait)"));
    f("cache_attention", c.cache_attention,
      "libtorch: auto (flash on CUDA in bf16/fp16, else sdpa), sdpa, matmul, flash");
    f("kv_layout", c.kv_layout,
      "libtorch: slots (a preallocated row of max_context tokens per sequence) or paged (blocks taken as "
      "sequences grow, admission by KV capacity; flash reads them in place, with CUDA graphs)");
    // Rationale: see policy/model/engine.hpp engine_options::kv_block_size.
    f("kv_block_size", c.kv_block_size, "libtorch, paged: tokens per KV block", positive());
    f("kv_cache_tokens", c.kv_cache_tokens,
      "libtorch, paged: tokens of KV storage in all; 0 = max_batch x max_context in whole blocks",
      at_least(0, "must be >= 0 (0: max_batch x max_context in whole blocks)"));
    // Rationale: see policy/model/engine.hpp engine_options::kv_cache_dtype.
    f("kv_cache_dtype", c.kv_cache_dtype,
      "libtorch: the KV cache's element type: auto (the model's dtype) or fp8_e4m3 (half the bytes; keys and "
      "values rounded to e4m3, needs bfloat16 or float16)");
    f("cuda_graphs", c.cuda_graphs,
      "libtorch: replay decode steps from CUDA graphs on a CUDA device; false = eager (debugging)");
    f("overlap", c.overlap,
      "libtorch: launch each decode step from the last one's tokens on the device while the host lands "
      "them (slots and paged; same tokens; off: no gain at the 0.5B shape on the H200, docs/POLICY_MODEL.md)");
    f("flash_decode_shares", c.flash_decode_shares,
      "libtorch, flash: decode steps of few long rows cut each row's keys into shares making this many "
      "sequences, merged by log-sum-exp; 0 = no cut (64 with decode_gemv_rows 1: 131k decode 441 -> 532 tok/s on the "
      "H200)",
      at_least(0, "must be >= 0 (0: no cut)"));
    f("decode_gemv_rows", c.decode_gemv_rows,
      "libtorch, CUDA: decode steps of at most this many rows (0-8) run the projections as matrix-vector "
      "kernels instead of cuBLAS; 0 = cuBLAS (1: 131k decode 439 -> 459 tok/s on the H200)",
      within(0, 8, "must be in 0..8 (0: cuBLAS)"));
    f("decode_mma_rows", c.decode_mma_rows,
      "libtorch, CUDA, bf16/fp16: decode steps of more rows than decode_gemv_rows and at most this many (0-64) run "
      "the projections as tensor-core kernels of our own instead of cuBLAS; 0 = cuBLAS (off: slower than cuBLAS on an "
      "H100)",
      within(0, 64, "must be in 0..64 (0: cuBLAS)"));
    // Rationale: see policy/model/engine.hpp engine_options::programmatic_launch.
    f("programmatic_launch", c.programmatic_launch,
      "libtorch, CUDA (Hopper): the fused kernels launch as programmatic dependents, each starting during the "
      "last one's tail (the same tokens; 131k decode 663 -> 724 tok/s on the H200)");
    f("script", c.script,
      "libtorch: recorded replies (JSONL like replay_path) teacher-forced through the engine (its real passes, "
      "the model's log-probs); empty: sample");
    f("request_timeout_ms", c.request_timeout_ms, "a generate request not answered by then fails the episode",
      positive());
    f("max_retries", c.max_retries, "openai: retries on connection errors, 429 and 5xx", at_least(0, "must be >= 0"));
    f("concurrency", c.concurrency, "openai: requests in flight per node", positive());
    f("api_key_env", c.api_key_env, "openai: environment variable holding the API key; empty: none");
    f("serve_host", c.serve_host, "inference role: where the OpenAI-compatible HTTP endpoint listens");
    f("serve_port", c.serve_port, "inference role: its port; 0 = any free port (the URL is logged)",
      within(0, 65535, "must be in [0, 65535]"));
    f("sim_latency_ms_mean", c.sim_latency_ms_mean, "sim: mean policy latency per turn", range(0, 3600000));
    f("sim_eval_ms_mean", c.sim_eval_ms_mean, "sim: mean evaluation latency", range(0, 3600000));
  }

  /// Rules between fields.
  void validate(base::config_errors& e) const {
    if (backend == backend_kind::libtorch && model_dir.empty())
      e.error("model_dir", "is required when backend = \"libtorch\"");
    if (backend == backend_kind::openai && base_url.empty())
      e.error("base_url", "is required when backend = \"openai\"");
    if (backend == backend_kind::replay && replay_path.empty())
      e.error("replay_path", "is required when backend = \"replay\"");
    if (!script.empty() && backend != backend_kind::libtorch)
      e.error("script",
              "teacher-forces replies through the libtorch engine; backend is \"" + to_string(backend) + "\"");
    if (kv_layout == kv_layout_kind::slots && kv_cache_tokens != 0)
      e.error("kv_cache_tokens", "applies to kv_layout = \"paged\" only (slots hold max_batch x max_context)");
    if (kv_cache_dtype == kv_cache_dtype_kind::fp8_e4m3 && dtype == model_dtype::float32)
      e.error("kv_cache_dtype", "fp8_e4m3 needs dtype = \"bfloat16\" or \"float16\"");
    if (device != "cpu" && device != "cuda" && device.rfind("cuda:", 0) != 0)
      e.error("device", "must be cpu, cuda or cuda:N, got '" + device + "'");
  }
};

}  // namespace caf_agent::policy
