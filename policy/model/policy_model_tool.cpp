// policy_model_tool: the command line the Python parity tests and benchmarks drive.
//   logits   --model DIR --tokens 1,2,3 --out FILE   fp32 logits [t, v], raw little-endian
//   logprobs --model DIR --tokens 1,2,3 --out FILE [--temperature T]   fp32 [t - 1]
//   values   --model DIR --tokens 1,2,3 --out FILE   fp32 critic values [t] (needs value head)
//   save     --model DIR --out DIR2 [--value-head] [--shard-bytes N]   load, then save again
//   generate --model DIR --prompts "1,2;3,4,5" [--max-new-tokens N] [--temperature T]
//            [--top-k K] [--top-p P] [--seed S] [--stop 2,7] [--max-batch B]
//            prints one JSON line per finished sequence, in submission order
//   bench    --model DIR --prompts ... --max-new-tokens N   prints {"seconds":..,"tokens":..}
//            (or --random-prompts B --prompt-len L: B random prompts of L tokens); also prints the
//            seconds to the first token of every sequence (prefill) and the engine's counters;
//            --profile FILE [--profile-skip K] [--profile-steps N]: then the same requests once
//            more, steps K+1..K+N under the Kineto profiler (per step: wall, device busy, kernels)
//   agent-bench --model DIR --episodes E --turns T --system S --obs O --reply R
//            E agent-shaped conversations at once: a first prompt of S tokens, then per turn a
//            reply of R sampled tokens and an observation of O tokens appended, T turns; prints
//            {"seconds":..,"generated":..,"prefilled":..,"reused":..,"prefix_hit_rate":..,"step_times":..}
//            (step_times: each step() call's wall time summed by kind of step, see struct step_times);
//            --temperature T (default 1), --from-turn J (start at turn J with the earlier turns'
//            tokens in the first prompt), --print (each reply as a JSON line with its episode and
//            turn, before the summary), --prefill-only (one token per request: the prompts' prefill
//            alone); on stderr {"turn":j,"seconds":..} as each turn completes; --profile FILE
//            --profile-after-turn J [--profile-steps N]: the N steps (default 20) after every episode
//            finished turn J under the profiler, as bench's --profile, with the prefill passes among them
//   sample   --logits FILE --params FILE --rows B --vocab V --out FILE   the fused sampling kernel
//            (fused_ops.hpp's sample_rows) on raw fp32 logits [B, V] and params [4 * B] (per row:
//            temperature, uniform, greedy, forced); writes fp32 [2, B]: the tokens, the logprobs
//            --logits-dtype bfloat16|float16: the logits rounded to that dtype before sampling
//   linear-rows --rows B --in D --out-features N --x FILE --w FILE [--bias FILE] --out FILE
//            the matrix-vector kernel (fused_ops.hpp's linear_rows, B <= 8) on raw fp32 x [B, D],
//            w [N, D], bias [N] rounded to --dtype on --device (default cuda); writes fp32 y [B, N]
//            --mma: the tensor-core kernel instead (linear_rows' mma_rows, B <= 64, bf16 / fp16; not
//            with --norm); --mma-shares S: it cuts d into at most S shares (1-8, default 8);
//            --mma-launch FW,S: it runs FW warps along the features (1, 2, 4, 8) and S shares of d
//            --norm FILE [--delta FILE] [--eps E]: the one kernel of add_rms_norm_linear (x the
//            residual [B, D], delta [B, D], the norm's weight [D]); --silu: of linear_silu_mul (w a
//            gate/up projection, N even: y [B, N / 2]); both: add_rms_norm_linear's silu_mul_after.
//            Either writes fp32 [one kernel's y; the kernels one by one's y] and, with --delta,
//            [..; one kernel's sum; the other's]
//            --random [--seed S]: x ~ N(0, 1), w ~ N(0, 1/D) made on the device, no files (--bias,
//            --norm, --delta as bare flags: wanted, random too; --out optional); --time N: N more
//            calls of the one kernel profiled, one JSON line of its time a call and the weights'
//            read rate (--mma: also its tiles, shares, blocks a multiprocessor holds and clusters the
//            device runs at once); --copies K: the timed calls take K copies of w in turn (no call finds its
//            weights in L2); --cublas (with --time, any B): torch::linear's kernels timed instead
//            (bench/policy/bench_gemv.py); --cublaslt K (with --time, any B, bf16 / fp16): torch::linear
//            timed, then each of up to K candidates cuBLASLt's heuristic offers for the same product
//            (cublaslt_algos.hpp), a JSON line each with its configuration, its kernels' names and its
//            largest difference from torch::linear's output
//            --norm FILE --rope-heads H,K --positions P1,..,PB [--capacity C] [--fp8-cache]: the one
//            kernel of add_rms_norm_qkv_rope_kv (w the fused q/k/v projection, N = (H + 2K) E) against
//            add_rms_norm_linear then rope_kv_decode, each into its own zeroed slot caches [B, K, C, E]
//            (C default: the largest position + 1; e4m3 with --fp8-cache); writes fp32 [q of each;
//            k caches of each; v caches of each; (sums)]
//   decode-attention --rows B --slots N --kv-heads K --heads H --head-dim E --capacity C --keys S
//            --positions P1,..,PB --q FILE --k FILE --v FILE --out FILE [--repeat R] [--block-size BS]
//            the e4m3 cache's decode attention kernel (fused_ops.hpp's fp8_decode_attention) on raw
//            fp32 q [B, H, E] rounded to --dtype (bfloat16 or float16) and slot caches [N, K, C, E]
//            rounded to e4m3; with BS (a divisor of C) laid out paged, each row's blocks scattered
//            over the pool (block tables); R calls (default 2) must give the same bits; writes fp32
//            out [B, H, E] (--out optional with --random)
//            --random [--seed S]: q ~ N(0, 1), keys and values ~ N(0, 9) made on the device, no
//            files; --time N: N more calls profiled, one JSON line of the kernels' time a call
//            (bench/policy/bench_fp8_attention.py)
//   boundary-chain --mode kernels|flags --bytes B [--phases P] [--blocks K | --blocks-per-sm K] [--time N]
//            what a boundary between two ops costs (boundary_kernels.hpp): P phases (default 96) each
//            streaming B bytes of random data (a multiple of 16) over K blocks (0, the default: as
//            many as are resident at once; --blocks-per-sm K: K times the multiprocessors), each
//            phase reading the sums of the one before; "kernels":
//            a kernel a phase in one CUDA graph (programmatic launch unless --no-programmatic-launch),
//            "flags": one persistent launch, phases meeting on counters; N chains (default 20) timed,
//            one JSON line of the time a chain and a phase (bench/policy/bench_boundaries.py)
// Common: --device cpu|cuda[:N] (default cpu), --dtype float32|bfloat16|float16,
// --no-fused-kernels (the ATen composites instead of policy/model/fused_ops.hpp's kernels);
// generate / bench / agent-bench: --no-cuda-graphs decodes eagerly (for comparison),
// --no-prefix-cache re-prefills every prompt, --overlap (engine_options::overlap: a decode step
// launched before the last one's tokens reach the host), --prefill-chunk N (0: whole prompts),
// --prefill-wait-steps N (engine_options::prefill_wait_steps),
// --cache-attention auto|sdpa|matmul|flash (how decode reads the KV cache), --max-batch,
// --max-context, --kv-layout slots|paged, --kv-cache-dtype auto|fp8_e4m3, --kv-block-size N,
// --kv-cache-tokens N (paged),
// --flash-decode-shares N (engine_options::flash_decode_shares), --decode-gemv-rows N
// (engine_options::decode_gemv_rows), --decode-mma-rows N (engine_options::decode_mma_rows),
// --no-programmatic-launch (engine_options::programmatic_launch off),
// --report-logits (generate and agent-bench --print: each line's "logits", the generated tokens' own).
// Exit status: 0 success, 1 failure (message on stderr), 2 usage error.
#include <ATen/ATen.h>

#include <iostream>
#include <string>

#include "policy/model/decoder.hpp"
#include "policy/model/tool_common.hpp"

using namespace caf_agent::policy;
using namespace caf_agent::policy::tool;

namespace {

int run_forward(const std::string& command, const args& a) {
  const auto heads = command == "values" ? value_head_mode::required : value_head_mode::none;
  auto model = decoder::load(get(a, "model"), torch::Device(get(a, "device", "cpu")), dtype_of(a), heads);
  if (!model) {
    std::cerr << model.error().message << "\n";
    return 1;
  }
  at::InferenceMode inference;
  model.value().set_fused_kernels(!a.count("no-fused-kernels"));
  auto tokens_1t = torch::tensor(parse_ids(get(a, "tokens"))).unsqueeze(0).to(model.value().device());
  torch::Tensor out;
  if (command == "logits") out = model.value().forward(tokens_1t)[0];
  if (command == "values") out = model.value().values(tokens_1t)[0];
  if (command == "logprobs")
    out = model.value().token_logprobs(tokens_1t, {}, std::stod(get(a, "temperature", "1")))[0];
  return write_floats(out, get(a, "out"));
}

int run_save(const args& a) {
  const auto heads = a.count("value-head") ? value_head_mode::required : value_head_mode::none;
  auto model = decoder::load(get(a, "model"), torch::kCPU, dtype_of(a), heads);
  if (!model) {
    std::cerr << model.error().message << "\n";
    return 1;
  }
  auto saved = model.value().save(get(a, "out"), std::stoll(get(a, "shard-bytes", "0")));
  if (!saved) std::cerr << saved.error().message << "\n";
  return saved ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr
        << "usage: policy_model_tool logits|logprobs|values|save|sample|linear-rows|decode-attention|boundary-chain|"
           "generate|bench|"
           "agent-bench ...\n";
    return 2;
  }
  const std::string command = argv[1];
  args a;
  if (!caf_agent::policy::parse_tool_args(argc, argv, 2, a)) return 2;
  try {
    if (command == "logits" || command == "logprobs" || command == "values") return run_forward(command, a);
    if (command == "save") return run_save(a);
    if (command == "sample") return run_sample(a);
    if (command == "linear-rows") return run_linear_rows(a);
    if (command == "decode-attention") return run_decode_attention(a);
    if (command == "boundary-chain") return run_boundary_chain(a);
    if (command == "generate" || command == "bench") return run_generate(command, a);
    if (command == "agent-bench") return run_agent_bench(a);
  } catch (const std::exception& e) {  // bad numbers in arguments, device errors
    std::cerr << "policy_model_tool: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "unknown command '" << command << "'\n";
  return 2;
}
