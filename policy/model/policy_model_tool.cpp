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
//            alone); on stderr {"turn":j,"seconds":..} as each turn completes
//   sample   --logits FILE --params FILE --rows B --vocab V --out FILE   the fused sampling kernel
//            (fused_ops.hpp's sample_rows) on raw fp32 logits [B, V] and params [4 * B] (per row:
//            temperature, uniform, greedy, forced); writes fp32 [2, B]: the tokens, the logprobs
//            --logits-dtype bfloat16|float16: the logits rounded to that dtype before sampling
//   linear-rows --rows B --in D --out-features N --x FILE --w FILE [--bias FILE] --out FILE
//            the matrix-vector kernel (fused_ops.hpp's linear_rows, B <= 8) on raw fp32 x [B, D],
//            w [N, D], bias [N] rounded to --dtype on --device (default cuda); writes fp32 y [B, N]
//            --norm FILE [--delta FILE] [--eps E]: the one kernel of add_rms_norm_linear (x the
//            residual [B, D], delta [B, D], the norm's weight [D]); --silu: of linear_silu_mul (w a
//            gate/up projection, N even: y [B, N / 2]); both: add_rms_norm_linear's silu_mul_after.
//            Either writes fp32 [one kernel's y; the kernels one by one's y] and, with --delta,
//            [..; one kernel's sum; the other's]
//            --random [--seed S]: x ~ N(0, 1), w ~ N(0, 1/D) made on the device, no files (--bias,
//            --norm, --delta as bare flags: wanted, random too; --out optional); --time N: N more
//            calls of the one kernel profiled, one JSON line of its time a call and the weights'
//            read rate; --copies K: the timed calls take K copies of w in turn (no call finds its
//            weights in L2); --cublas (with --time, any B): torch::linear's kernels timed instead
//            (bench/policy/bench_gemv.py)
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
// Common: --device cpu|cuda[:N] (default cpu), --dtype float32|bfloat16|float16,
// --no-fused-kernels (the ATen composites instead of policy/model/fused_ops.hpp's kernels);
// generate / bench / agent-bench: --no-cuda-graphs decodes eagerly (for comparison),
// --no-prefix-cache re-prefills every prompt, --overlap (engine_options::overlap: a decode step
// launched before the last one's tokens reach the host), --prefill-chunk N (0: whole prompts),
// --cache-attention auto|sdpa|matmul|flash (how decode reads the KV cache), --max-batch,
// --max-context, --kv-layout slots|paged, --kv-cache-dtype auto|fp8_e4m3, --kv-block-size N,
// --kv-cache-tokens N (paged),
// --flash-decode-shares N (engine_options::flash_decode_shares), --decode-gemv-rows N
// (engine_options::decode_gemv_rows), --no-programmatic-launch (engine_options::programmatic_launch off),
// --report-logits (generate and agent-bench --print: each line's "logits", the generated tokens' own).
// Exit status: 0 success, 1 failure (message on stderr), 2 usage error.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/named_enum.hpp"
#include "policy/model/decoder.hpp"
#include "policy/model/device_timeline.hpp"
#include "policy/model/engine.hpp"
#include "policy/model/fused_ops.hpp"
#include "policy/model/tool_args.hpp"

using namespace caf_agent::policy;

namespace {

using args = caf_agent::policy::tool_args;

std::string get(const args& a, const std::string& key, const std::string& fallback = "") {
  return caf_agent::policy::tool_arg(a, key, fallback);
}

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(std::stoll(item));
  return out;
}

// The value of flag `key` named as E (`fallback` when not given); a name E does not have throws
// std::invalid_argument naming the flag and E's names.
template <class E>
E named_arg(const args& a, const std::string& key, E fallback) {
  return caf_agent::base::parse_name_or_throw<E>(get(a, key, std::string(caf_agent::base::name_of(fallback))),
                                                 "--" + key);
}

model_dtype model_dtype_of(const args& a) {
  return named_arg(a, "dtype", model_dtype::float32);
}

torch::ScalarType dtype_of(const args& a) {
  return scalar_type_of(model_dtype_of(a));
}

int write_floats(const torch::Tensor& values, const std::string& path) {
  auto cpu = values.to(torch::kCPU, torch::kFloat32).contiguous();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(cpu.data_ptr()), static_cast<std::streamsize>(cpu.nbytes()));
  if (!out.flush()) {
    std::cerr << "cannot write " << path << "\n";
    return 1;
  }
  return 0;
}

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

torch::Tensor read_floats(const std::string& path, int64_t count) {
  std::ifstream in(path, std::ios::binary);
  auto out = torch::empty({count}, torch::kFloat32);
  in.read(static_cast<char*>(out.data_ptr()), static_cast<std::streamsize>(count * 4));
  if (!in || in.peek() != std::char_traits<char>::eof())
    throw std::runtime_error(path + " does not hold exactly " + std::to_string(count) + " fp32 values");
  return out;
}

int run_sample(const args& a) {
  const int64_t b = std::stoll(get(a, "rows")), v = std::stoll(get(a, "vocab"));
  const torch::Device device(get(a, "device", "cuda"));
  // --logits-dtype bfloat16|float16: the logits rounded to that dtype first (as a model of that
  // dtype hands them to the sampler).
  const std::string logits_dtype = get(a, "logits-dtype", "float32");
  if (logits_dtype != "float32" && logits_dtype != "bfloat16" && logits_dtype != "float16") {
    std::cerr << "sample: --logits-dtype must be float32, bfloat16 or float16, not '" << logits_dtype << "'\n";
    return 2;
  }
  const auto dtype = logits_dtype == "bfloat16"  ? torch::kBFloat16
                     : logits_dtype == "float16" ? torch::kHalf
                                                 : torch::kFloat32;
  auto logits_bv = read_floats(get(a, "logits"), b * v).view({b, v}).to(device, dtype);
  auto params = read_floats(get(a, "params"), 4 * b);
  if (!sample_rows_fuses(logits_bv)) {
    std::cerr << "sample: the fused sampling kernel does not run here (a CUDA build with the kernels, CUDA logits)\n";
    return 1;
  }
  auto [tokens_b, logprobs_b] =
      sample_rows(logits_bv, std::vector<float>(params.data_ptr<float>(), params.data_ptr<float>() + 4 * b));
  return write_floats(torch::stack({tokens_b.to(torch::kFloat32), logprobs_b}), get(a, "out"));
}

// N calls under the profiler: each name's kernels (those whose profiled name holds it; "" for every
// CUDA kernel) as device time a call and launches in all, and the wall time a call. Device times,
// not wall: a call's host work (allocations, launches) may exceed a small call's kernels.
struct profiled_calls {
  std::vector<double> us;         // a call, per name
  std::vector<int64_t> launches;  // in all, per name
  double wall_us = 0;             // a call
};

profiled_calls profile_calls(int64_t calls, const std::vector<std::string>& names, const std::function<void()>& call) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const std::set<ActivityType> activities{ActivityType::CPU, ActivityType::CUDA};
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  prof::prepareProfiler(config, activities);
  torch::cuda::synchronize();
  prof::enableProfiler(config, activities);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < calls; ++i) call();
  torch::cuda::synchronize();
  const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  auto result = prof::disableProfiler();
  profiled_calls out{std::vector<double>(names.size(), 0.0), std::vector<int64_t>(names.size(), 0), 0.0};
  for (const auto& ev : result->events()) {
    if (ev.deviceType() != c10::DeviceType::CUDA) continue;
    const double us = static_cast<double>(ev.durationNs()) / 1000.0;
    for (size_t i = 0; i < names.size(); ++i)
      if (ev.name().find(names[i]) != std::string::npos) out.us[i] += us, ++out.launches[i];
  }
  const double n = static_cast<double>(calls);
  for (auto& us : out.us) us /= n;
  out.wall_us = wall_us / n;
  return out;
}

// decode-attention --time N: N more calls under the profiler; prints one JSON line with the split
// and join kernels' device time a call (their names' fp8_split / fp8_join), the wall time a call,
// and the cache bytes the rows' keys and values take (one byte an element), so the split kernel's
// read rate.
template <typename Call>
status time_decode_attention(int64_t calls, int64_t b, int64_t k, int64_t e, int64_t c, bool paged,
                             const std::vector<int64_t>& positions, const Call& call) {
  const auto timed = profile_calls(calls, {"fp8_split", "fp8_join"}, call);
  if (timed.launches[0] != calls || timed.launches[1] != calls)
    return fail("the profiler saw " + std::to_string(timed.launches[0]) + " split and " +
                std::to_string(timed.launches[1]) + " join kernels of " + std::to_string(calls) + " calls");
  int64_t attended = 0;  // keys a row reads (slots: a row at the last position is a dummy, key 0)
  for (const int64_t p : positions) attended += !paged && p == c - 1 ? 1 : p + 1;
  const double bytes = static_cast<double>(attended) * static_cast<double>(k * e * 2);
  const double split_us = timed.us[0], join_us = timed.us[1];
  std::cout << "{\"rows\":" << b << ",\"attended_keys\":" << attended << ",\"cache_bytes\":" << bytes
            << ",\"calls\":" << calls << ",\"split_us\":" << split_us << ",\"join_us\":" << join_us
            << ",\"wall_us\":" << timed.wall_us << ",\"split_tb_per_s\":" << bytes / split_us / 1e6
            << ",\"split_join_tb_per_s\":" << bytes / (split_us + join_us) / 1e6 << "}\n";
  return {};
}

// linear-rows --time N: N more calls of the one kernel (or, with --cublas, of torch::linear)
// under the profiler; prints one JSON line with its kernels' device time a call, their launches a
// call, the wall time a call, and the weight bytes it reads (w, and bias), so its read rate.
status time_linear_rows(int64_t calls, const std::string& kernels, int64_t b, int64_t d, int64_t n,
                        int64_t weight_bytes, const std::function<void()>& call) {
  const auto timed = profile_calls(calls, {kernels}, call);
  if (timed.launches[0] < calls)
    return fail("the profiler saw " + std::to_string(timed.launches[0]) + " kernels named '" + kernels + "' of " +
                std::to_string(calls) + " calls");
  const double bytes = static_cast<double>(weight_bytes);
  std::cout << "{\"rows\":" << b << ",\"in\":" << d << ",\"out_features\":" << n << ",\"weight_bytes\":" << bytes
            << ",\"calls\":" << calls << ",\"kernel_us\":" << timed.us[0]
            << ",\"kernels_a_call\":" << static_cast<double>(timed.launches[0]) / static_cast<double>(calls)
            << ",\"wall_us\":" << timed.wall_us << ",\"tb_per_s\":" << bytes / timed.us[0] / 1e6 << "}\n";
  return {};
}

int run_linear_rows(const args& a) {
  const int64_t b = std::stoll(get(a, "rows")), d = std::stoll(get(a, "in")), n = std::stoll(get(a, "out-features"));
  const torch::Device device(get(a, "device", "cuda"));
  const auto dtype = dtype_of(a);
  const bool norm = a.count("norm") != 0, silu = a.count("silu") != 0, cublas = a.count("cublas") != 0;
  const bool random = a.count("random") != 0;
  const int64_t calls = std::stoll(get(a, "time", "0"));
  if (b < 1 || d < 1 || n < 1 || calls < 0) {
    std::cerr << "linear-rows: --rows, --in and --out-features must be at least 1 and --time at least 0\n";
    return 2;
  }
  if (cublas && (norm || silu || calls == 0)) {
    std::cerr << "linear-rows: --cublas times torch::linear alone: it takes --time N and neither --norm nor --silu\n";
    return 2;
  }
  if (cublas && !device.is_cuda()) {
    std::cerr << "linear-rows: --cublas times CUDA kernels: --device must be cuda, not " << device << "\n";
    return 2;
  }
  if (random) torch::manual_seed(std::stoull(get(a, "seed", "0")));
  // --random: x, the norm and delta ~ N(0, 1), w and bias ~ N(0, 1/d) (a unit-variance product),
  // made on the device; else the files' values. A flag names its file, so with --random it only
  // says that the input is wanted (--bias, --delta; --norm).
  const auto floats = [&](const std::string& name, std::vector<int64_t> shape, double scale) {
    if (random) return (torch::randn(shape, torch::TensorOptions(device).dtype(torch::kFloat32)) * scale).to(dtype);
    return read_floats(get(a, name), c10::multiply_integers(shape)).view(shape).to(device, dtype);
  };
  const double w_scale = 1.0 / std::sqrt(static_cast<double>(d));
  auto x = floats("x", {b, d}, 1.0);
  auto w = floats("w", {n, d}, w_scale);
  torch::Tensor bias, delta, norm_d;
  if (a.count("bias")) bias = floats("bias", {n}, w_scale);
  if (norm) norm_d = floats("norm", {d}, 1.0);
  if (norm && a.count("delta")) delta = floats("delta", {b, d}, 1.0);
  const int64_t weight_bytes = (w.numel() + (bias.defined() ? bias.numel() : 0)) * w.element_size();
  // --copies K: the timed calls take K copies of the weights in turn, so that a call does not find
  // the last call's weights in the L2 cache (a decode step streams every layer's weights once).
  const int64_t copies = std::stoll(get(a, "copies", "1"));
  if (copies < 1 || copies > 4096) {
    std::cerr << "linear-rows: --copies must be 1 to 4,096, not " << copies << "\n";
    return 2;
  }
  std::vector<torch::Tensor> ws{w}, biases{bias};
  for (int64_t i = 1; i < copies; ++i) {
    ws.push_back(w.clone());
    biases.push_back(bias.defined() ? bias.clone() : bias);
  }
  int64_t next = 0;
  const auto take = [&] { return static_cast<size_t>(next++ % copies); };  // the next copy's index
  if (cublas) {
    const std::function<void()> product = [&] {
      const auto i = take();
      (void)torch::linear(x, ws[i], biases[i]);
    };
    product();  // outside the profile: cuBLAS's first-call setup
    if (auto timed = time_linear_rows(calls, "", b, d, n, weight_bytes, product); !timed) {
      std::cerr << "linear-rows: " << timed.error().message << "\n";
      return 1;
    }
    return 0;
  }
  const bool fuses =
      (norm ? add_rms_norm_linear_fuses(x, delta, norm_d, w, bias, b) : linear_rows_fuses(x, w, bias, b)) &&
      (!silu || n % 2 == 0);
  if (!fuses) {
    std::cerr << "linear-rows: the matrix-vector kernel does not run here (a CUDA build with the kernels, B <= 8, "
                 "D a multiple of 16 bytes' worth; --norm: B x D elements within 48 KiB, D <= 4,096 at 16-bit; "
                 "--silu: N even)\n";
    return 1;
  }
  const double eps = std::stod(get(a, "eps", "1e-6"));
  if (calls > 0) {
    const std::function<void()> one_kernel = [&] {
      const auto i = take();
      if (norm)
        (void)add_rms_norm_linear(x, delta, norm_d, eps, ws[i], biases[i], b, true, silu);
      else if (silu)
        (void)linear_silu_mul(x, ws[i], biases[i], b, true);
      else
        (void)linear_rows(x, ws[i], biases[i], b);
    };
    one_kernel();  // outside the profile: first-call setup (occupancy queries)
    if (auto timed = time_linear_rows(calls, "gemv_rows", b, d, n, weight_bytes, one_kernel); !timed) {
      std::cerr << "linear-rows: " << timed.error().message << "\n";
      return 1;
    }
  }
  if (random && a.count("out") == 0) return 0;
  if (!norm && !silu) return write_floats(linear_rows(x, w, bias, b), get(a, "out"));
  if (!norm)
    return write_floats(torch::cat({linear_silu_mul(x, w, bias, b, true), silu_mul(linear_rows(x, w, bias, b), true)}),
                        get(a, "out"));
  auto [sum, y] = add_rms_norm_linear(x, delta, norm_d, eps, w, bias, b, true, silu);
  auto [two_sum, normed] = add_rms_norm(x, delta, norm_d, eps, true);
  auto two_y = linear_rows(normed, w, bias, b);
  if (silu) two_y = silu_mul(two_y, true);
  const auto flat = [](const torch::Tensor& t) { return t.reshape({-1}); };
  return write_floats(delta.defined() ? torch::cat({flat(y), flat(two_y), flat(sum), flat(two_sum)})
                                      : torch::cat({flat(y), flat(two_y)}),
                      get(a, "out"));
}

// decode-attention: the caches rounded to e4m3 (saturated), slots or, with --block-size, paged with
// row r's j-th block at pool block (j * n + n - 1 - r) (blocks of one row never adjacent, rows
// interleaved), so that every key is read through the tables.
int run_decode_attention(const args& a) {
  const int64_t b = std::stoll(get(a, "rows")), n = std::stoll(get(a, "slots")), k = std::stoll(get(a, "kv-heads"));
  const int64_t h = std::stoll(get(a, "heads")), e = std::stoll(get(a, "head-dim")), c = std::stoll(get(a, "capacity"));
  const int64_t keys = std::stoll(get(a, "keys")), repeat = std::stoll(get(a, "repeat", "2"));
  const int64_t bs = std::stoll(get(a, "block-size", "0"));
  const torch::Device device(get(a, "device", "cuda"));
  std::vector<int64_t> positions;
  std::stringstream list(get(a, "positions"));
  for (std::string item; std::getline(list, item, ',');) positions.push_back(std::stoll(item));
  if (static_cast<int64_t>(positions.size()) != b || b > n) {
    std::cerr << "decode-attention: --positions names " << positions.size() << " rows, --rows is " << b << ", --slots "
              << n << "\n";
    return 2;
  }
  if (bs < 0 || (bs > 0 && c % bs != 0)) {
    std::cerr << "decode-attention: --block-size " << bs << " does not divide --capacity " << c << "\n";
    return 2;
  }
  const bool random = a.count("random") > 0;
  const auto floats = [&](const char* name, std::vector<int64_t> shape, double scale) {
    if (!random) return read_floats(get(a, name), c10::multiply_integers(shape)).view(shape);
    return torch::randn(shape, torch::TensorOptions(device).dtype(torch::kFloat32)) * scale;
  };
  if (random) torch::manual_seed(std::stoull(get(a, "seed", "0")));
  auto q = floats("q", {b, h, e}, 1.0).to(device, dtype_of(a));
  const auto to_fp8 = [&](const torch::Tensor& x) { return x.clamp(-448.0, 448.0).to(torch::kFloat8_e4m3fn); };
  auto k_cache = to_fp8(floats("k", {n, k, c, e}, 3.0)).to(device);
  auto v_cache = to_fp8(floats("v", {n, k, c, e}, 3.0)).to(device);
  auto positions_b = torch::tensor(positions, torch::kInt64).to(device);
  torch::Tensor tables;
  if (bs > 0) {
    const int64_t m = c / bs, pool = n * m;
    std::vector<int64_t> table(static_cast<size_t>(n * m));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < m; ++j) table[static_cast<size_t>(r * m + j)] = j * n + (n - 1 - r);
    tables = torch::tensor(table, torch::kInt64).view({n, m}).to(device);
    // [n, k, m, bs, e] -> pool [k, blocks, bs, e] at the tables' blocks (bytes: index_copy_ takes no float8).
    const auto page = [&](const torch::Tensor& slots) {
      auto paged = kv_cache::zeros({k, pool, bs, e}, device, slots.scalar_type());
      auto src = kv_cache::entries(slots).view({n, k, m, bs, e}).permute({1, 0, 2, 3, 4}).reshape({k, n * m, bs, e});
      kv_cache::entries(paged).index_copy_(1, tables.reshape({n * m}), src);
      return paged;
    };
    k_cache = page(k_cache), v_cache = page(v_cache);
    tables = tables.narrow(0, 0, b);
  }
  if (!fp8_decode_attention_fuses(k_cache, q.scalar_type(), h, bs > 0)) {
    std::cerr << "decode-attention: the kernel does not run here (a CUDA build with the kernels, bf16 or fp16, "
                 "h / k <= 8, head size 64 or 128, blocks of a multiple of 16)\n";
    return 1;
  }
  torch::Tensor out;
  for (int64_t i = 0; i < repeat; ++i) {
    auto again = fp8_decode_attention(q, k_cache, v_cache, positions_b, keys, tables);
    if (out.defined() && !torch::equal(again, out)) {
      std::cerr << "decode-attention: call " << i + 1 << " gave other bits than the first\n";
      return 1;
    }
    out = again;
  }
  if (const int64_t calls = std::stoll(get(a, "time", "0")); calls > 0) {
    if (auto timed =
            time_decode_attention(calls, b, k, e, c, bs > 0, positions,
                                  [&] { fp8_decode_attention(q, k_cache, v_cache, positions_b, keys, tables); });
        !timed) {
      std::cerr << "decode-attention: " << timed.error().message << "\n";
      return 1;
    }
  }
  return random && a.count("out") == 0 ? 0 : write_floats(out, get(a, "out"));
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

// The engine's counters accumulated between two snapshots.
engine_stats stats_since(const engine_stats& before, engine_stats now) {
  now.admissions -= before.admissions;
  now.prefilled_tokens -= before.prefilled_tokens;
  now.reused_tokens -= before.reused_tokens;
  now.copied_tokens -= before.copied_tokens;
  now.decoded_tokens -= before.decoded_tokens;
  now.decode_steps -= before.decode_steps;
  now.attended_keys -= before.attended_keys;
  now.prefix_hits -= before.prefix_hits;
  now.evictions -= before.evictions;
  now.invalidations -= before.invalidations;
  now.graph_replays -= before.graph_replays;
  now.graph_captures -= before.graph_captures;
  now.graph_capture_seconds -= before.graph_capture_seconds;
  now.preemptions -= before.preemptions;
  now.recomputed_tokens -= before.recomputed_tokens;
  now.moved_tokens -= before.moved_tokens;
  now.decode_block_runs -= before.decode_block_runs;
  now.overlapped_steps -= before.overlapped_steps;
  now.overlap_dropped_rows -= before.overlap_dropped_rows;
  return now;
}

void print_stats(const engine_stats& s) {
  const double looked_up = static_cast<double>(s.prefilled_tokens + s.reused_tokens);
  std::cout << "\"prefilled\":" << s.prefilled_tokens << ",\"reused\":" << s.reused_tokens
            << ",\"copied\":" << s.copied_tokens << ",\"decoded\":" << s.decoded_tokens
            << ",\"evictions\":" << s.evictions << ",\"decode_steps\":" << s.decode_steps
            << ",\"attended_keys\":" << s.attended_keys << ",\"graph_replays\":" << s.graph_replays
            << ",\"graph_captures\":" << s.graph_captures << ",\"graph_capture_seconds\":" << s.graph_capture_seconds
            << ",\"preemptions\":" << s.preemptions << ",\"recomputed\":" << s.recomputed_tokens
            << ",\"moved\":" << s.moved_tokens << ",\"block_runs\":" << s.decode_block_runs
            << ",\"overlapped_steps\":" << s.overlapped_steps << ",\"overlap_dropped_rows\":" << s.overlap_dropped_rows
            << ",\"kv_blocks\":" << s.kv_blocks << ",\"kv_blocks_free\":" << s.kv_blocks_free
            << ",\"prefix_hit_rate\":" << (looked_up > 0 ? static_cast<double>(s.reused_tokens) / looked_up : 0.0)
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
  return options;
}

void synchronize(const engine_options& options) {
  if (options.device != "cpu") torch::cuda::synchronize();
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
  }
  return out + "\"";
}

// bench --profile FILE: `steps` engine steps under the Kineto profiler (CPU and CUDA activity);
// FILE gets per step the wall time, the device's busy time (kernels and copies summed) and their
// count, and the kernels by total device time. Shows whether a step is bound by its kernels'
// count (many short ones), by the host between steps, or by a few long ones. With programmatic
// launch a kernel starts before the one ahead of it ends and its time includes that wait, so the
// summed times overlap: each kernel's `us_added_per_step` is instead the part of its events that
// no earlier-starting event covers (the time it adds to the device's timeline), and
// `device_span_us_per_step` their sum (the busy time counted once).
status profile_steps(generation_engine& engine, const engine_options& options, int steps, const std::string& path) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  std::set<ActivityType> activities{ActivityType::CPU};
  if (options.device != "cpu") activities.insert(ActivityType::CUDA);
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  prof::prepareProfiler(config, activities);
  synchronize(options);
  const auto before = engine.stats();
  prof::enableProfiler(config, activities);
  const auto start = std::chrono::steady_clock::now();
  int ran = 0;
  for (; ran < steps && !engine.idle(); ++ran)
    if (auto done = engine.step(); !done) return done.error();
  synchronize(options);
  const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  auto result = prof::disableProfiler();
  const auto s = stats_since(before, engine.stats());
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
    << ",\"graph_captures\":" << s.graph_captures << ",\"wall_us_per_step\":" << wall_us / n
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
  step_times times;
  auto last = before;
  while (!engine.idle()) {
    const auto begun = std::chrono::steady_clock::now();
    auto done = engine.step();
    if (!done) throw std::runtime_error(done.error().message);
    const auto now = engine.stats();
    times.add(std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count(), last, now);
    last = now;
    for (auto& r : done.value()) {
      const size_t e = owner.at(r.id);
      generated += r.tokens.size();
      auto& ep = eps[e];
      ++ep.turn;
      if (print_turns)
        print_result(r, "\"episode\":" + std::to_string(e) + ",\"turn\":" + std::to_string(ep.turn) + ",");
      if (++finished_turn[static_cast<size_t>(ep.turn)] == episodes)
        std::cerr << "{\"turn\":" << ep.turn
                  << ",\"seconds\":" << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                  << "}\n";
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: policy_model_tool logits|logprobs|values|save|sample|generate|bench|agent-bench ...\n";
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
    if (command == "generate" || command == "bench") return run_generate(command, a);
    if (command == "agent-bench") return run_agent_bench(a);
  } catch (const std::exception& e) {  // bad numbers in arguments, device errors
    std::cerr << "policy_model_tool: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "unknown command '" << command << "'\n";
  return 2;
}
