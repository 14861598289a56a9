// tool_kernels: policy_model_tool's commands that run one fused kernel alone on given or random
// inputs (sample, linear-rows, decode-attention) and time it under the profiler; their flags are in
// policy_model_tool.cpp's usage.
#include "policy/model/tool_common.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "policy/model/fused_ops.hpp"
#if defined(CAF_AGENT_POLICY_CUBLASLT)
#include <c10/cuda/CUDAStream.h>

#include "policy/model/cublaslt_algos.hpp"
#endif

namespace caf_agent::policy::tool {

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
  std::set<std::string> kernels;  // the names of the kernels that matched any name
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
  profiled_calls out{std::vector<double>(names.size(), 0.0), std::vector<int64_t>(names.size(), 0), 0.0, {}};
  for (const auto& ev : result->events()) {
    if (ev.deviceType() != c10::DeviceType::CUDA) continue;
    const double us = static_cast<double>(ev.durationNs()) / 1000.0;
    for (size_t i = 0; i < names.size(); ++i)
      if (ev.name().find(names[i]) != std::string::npos)
        out.us[i] += us, ++out.launches[i], out.kernels.insert(ev.name());
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
                        int64_t weight_bytes, const std::function<void()>& call, const std::string& fields = "",
                        bool name_kernels = false) {
  const auto timed = profile_calls(calls, {kernels}, call);
  if (timed.launches[0] < calls)
    return fail("the profiler saw " + std::to_string(timed.launches[0]) + " kernels named '" + kernels + "' of " +
                std::to_string(calls) + " calls");
  const double bytes = static_cast<double>(weight_bytes);
  if (name_kernels) {
    std::string names;
    for (const auto& name : timed.kernels) names += (names.empty() ? "" : ";") + name.substr(0, name.find('('));
    std::cout << "{\"kernels\":" << json_string(names) << ",";
  } else {
    std::cout << "{";
  }
  std::cout << "\"rows\":" << b << ",\"in\":" << d << ",\"out_features\":" << n << ",\"weight_bytes\":" << bytes
            << ",\"calls\":" << calls << ",\"kernel_us\":" << timed.us[0]
            << ",\"kernels_a_call\":" << static_cast<double>(timed.launches[0]) / static_cast<double>(calls)
            << ",\"wall_us\":" << timed.wall_us << ",\"tb_per_s\":" << bytes / timed.us[0] / 1e6 << fields << "}\n";
  return {};
}

// linear-rows --rope-heads: the fused q/k/v kernel against its kernels one by one (see the header).
int run_linear_rows_rope(const args& a, const torch::Tensor& x, const torch::Tensor& delta, const torch::Tensor& norm_d,
                         const torch::Tensor& w, const torch::Tensor& bias) {
  const auto heads = parse_ids(get(a, "rope-heads"));
  const auto positions = parse_ids(get(a, "positions"));
  const int64_t b = x.size(0), n = w.size(0);
  if (heads.size() != 2 || heads[0] < 1 || heads[1] < 1 || n % (heads[0] + 2 * heads[1]) != 0 ||
      static_cast<int64_t>(positions.size()) != b || !norm_d.defined()) {
    std::cerr << "linear-rows: --rope-heads H,K needs --norm, N a multiple of H + 2K and --positions with B entries\n";
    return 2;
  }
  const int64_t h = heads[0], k = heads[1], e = n / (h + 2 * k);
  const int64_t top = *std::max_element(positions.begin(), positions.end());
  const int64_t c = std::stoll(get(a, "capacity", std::to_string(top + 1)));
  if (top < 0 || top >= c || e % 2 != 0) {
    std::cerr << "linear-rows: positions must lie in [0, capacity) and the head size " << e << " must be even\n";
    return 2;
  }
  const auto device = x.device();
  const auto table = rope_table::make(rope_config{}, e, c, device, x.scalar_type());
  auto positions_b = torch::tensor(positions, torch::kInt64).to(device);
  const auto cache_dtype = a.count("fp8-cache") ? torch::kFloat8_e4m3fn : x.scalar_type();
  const auto zeros = [&] { return torch::zeros({b, k, c, e}, x.options().dtype(cache_dtype)); };
  auto k_one = zeros(), v_one = zeros(), k_two = zeros(), v_two = zeros();
  if (!add_rms_norm_qkv_rope_kv_fuses(x, delta, norm_d, w, bias, b, k_one, v_one, table, h, false)) {
    std::cerr << "linear-rows: the fused q/k/v kernel does not run here (see add_rms_norm_qkv_rope_kv_fuses)\n";
    return 1;
  }
  const double eps = std::stod(get(a, "eps", "1e-6"));
  auto [sum, q] = add_rms_norm_qkv_rope_kv(x, delta, norm_d, eps, w, bias, b, positions_b, table, k_one, v_one, h);
  auto [two_sum, qkv] = add_rms_norm_linear(x, delta, norm_d, eps, w, bias, b, true);
  auto two_q = rope_kv_decode(qkv.view({b, h + 2 * k, e}), positions_b, table, k_two, v_two, h);
  const auto flat = [](const torch::Tensor& t) { return t.to(torch::kFloat32).reshape({-1}); };
  std::vector<torch::Tensor> parts{flat(q), flat(two_q), flat(k_one), flat(k_two), flat(v_one), flat(v_two)};
  if (delta.defined()) parts.insert(parts.end(), {flat(sum), flat(two_sum)});
  return write_floats(torch::cat(parts), get(a, "out"));
}

// linear-rows --cublaslt K: torch::linear timed (its line's "candidate" -1), then each candidate
// cuBLASLt's heuristic offers for the same product (cublaslt_algos.hpp), over the same copies of
// the weights in turn. Each line names the kernels it ran and its largest difference from
// torch::linear's output on the first copy ("max_abs_diff"; 0 where the bits are the same).
// `take`: the next call's copy of the weights (run_linear_rows' rotation over --copies).
int run_linear_rows_cublaslt(const torch::Tensor& x, const std::vector<torch::Tensor>& ws,
                             const std::vector<torch::Tensor>& biases, const std::function<size_t()>& take,
                             int64_t calls, int64_t wanted, int64_t weight_bytes) {
#if defined(CAF_AGENT_POLICY_CUBLASLT)
  const int64_t b = x.size(0), d = x.size(1), n = ws[0].size(0);
  const bool has_bias = biases[0].defined();
  const auto reference = torch::linear(x, ws[0], biases[0]);
  const std::function<void()> product = [&] {
    const auto i = take();
    (void)torch::linear(x, ws[i], biases[i]);
  };
  if (auto timed = time_linear_rows(calls, "", b, d, n, weight_bytes, product, ",\"candidate\":-1", true); !timed) {
    std::cerr << "linear-rows: " << timed.error().message << "\n";
    return 1;
  }
  constexpr size_t workspace_bytes = size_t{64} << 20;
  const kernels::lt_linear lt(x.scalar_type() == torch::kHalf, b, d, n, has_bias, workspace_bytes,
                              static_cast<int>(wanted));
  if (!lt.error().empty()) {
    std::cerr << "linear-rows: cuBLASLt: " << lt.error() << "\n";
    return 1;
  }
  const auto workspace = torch::empty({static_cast<int64_t>(workspace_bytes)}, x.options().dtype(torch::kUInt8));
  auto y = torch::empty({b, n}, x.options());
  void* stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  for (size_t c = 0; c < lt.size(); ++c) {
    std::string failed;
    const auto run = [&](size_t i) {
      const auto why = lt.run(c, x.data_ptr(), ws[i].data_ptr(), has_bias ? biases[i].data_ptr() : nullptr,
                              y.data_ptr(), workspace.data_ptr(), workspace_bytes, stream);
      if (failed.empty()) failed = why;
    };
    run(0);
    const double diff = (y.to(torch::kFloat32) - reference.to(torch::kFloat32)).abs().max().item<double>();
    const auto& k = lt.candidate(c);
    std::ostringstream fields;
    fields << ",\"candidate\":" << c << ",\"algo_id\":" << k.algo_id << ",\"tile\":" << k.tile
           << ",\"stages\":" << k.stages << ",\"split_k\":" << k.split_k << ",\"reduction\":" << k.reduction
           << ",\"swizzle\":" << k.swizzle << ",\"custom\":" << k.custom << ",\"cluster\":" << k.cluster
           << ",\"workspace\":" << k.workspace << ",\"waves\":" << k.waves << ",\"max_abs_diff\":" << diff;
    const std::function<void()> one = [&] { run(take()); };
    if (!failed.empty()) {
      std::cout << "{\"candidate\":" << c << ",\"error\":" << json_string(failed) << "}\n";
      continue;
    }
    if (auto timed = time_linear_rows(calls, "", b, d, n, weight_bytes, one, fields.str(), true);
        !timed || !failed.empty()) {
      std::cout << "{\"candidate\":" << c
                << ",\"error\":" << json_string(failed.empty() ? timed.error().message : failed) << "}\n";
    }
  }
  return 0;
#else
  (void)x, (void)ws, (void)biases, (void)take, (void)calls, (void)wanted, (void)weight_bytes;
  std::cerr << "linear-rows: --cublaslt needs a CUDA build with the kernels (cmake/cuda_kernels.cmake)\n";
  return 1;
#endif
}

int run_linear_rows(const args& a) {
  const int64_t b = std::stoll(get(a, "rows")), d = std::stoll(get(a, "in")), n = std::stoll(get(a, "out-features"));
  const torch::Device device(get(a, "device", "cuda"));
  const auto dtype = dtype_of(a);
  const bool norm = a.count("norm") != 0, silu = a.count("silu") != 0, cublas = a.count("cublas") != 0;
  const bool random = a.count("random") != 0;
  // --mma: linear_rows' tensor-core kernel (mma_rows, B <= 64, bf16 / fp16) instead of the
  // matrix-vector kernel: max_rows 0, mma_rows B.
  const bool mma = a.count("mma") != 0;
  const int64_t gemv_rows = mma ? 0 : b, mma_rows = mma ? b : 0;
  // --mma-shares S: the tensor-core kernel cuts d into at most S shares (1-8).
  const int mma_shares = std::stoi(get(a, "mma-shares", "8"));
  if (mma_shares < 1 || mma_shares > 8) {
    std::cerr << "linear-rows: --mma-shares must be 1 to 8, not " << mma_shares << "\n";
    return 2;
  }
  set_linear_mma_max_shares(mma_shares);
  // --mma-launch FW,S: the tensor-core kernel with FW warps along the features (1, 2, 4 or 8) and
  // d in S shares, whatever its own choice.
  if (a.count("mma-launch")) {
    const std::string launch = get(a, "mma-launch");
    const auto comma = launch.find(',');
    int fw = 0, shares = 0;
    try {
      if (comma != std::string::npos)
        fw = std::stoi(launch.substr(0, comma)), shares = std::stoi(launch.substr(comma + 1));
    } catch (const std::exception&) {
      fw = shares = 0;
    }
    if (!set_linear_mma_launch(fw, shares) || fw == 0) {
      std::cerr << "linear-rows: --mma-launch must be FW,S with FW 1, 2, 4 or 8 and S 1-8, not '" << launch
                << "' (or this build lacks the kernels)\n";
      return 2;
    }
  }
  const int64_t calls = std::stoll(get(a, "time", "0"));
  if (b < 1 || d < 1 || n < 1 || calls < 0) {
    std::cerr << "linear-rows: --rows, --in and --out-features must be at least 1 and --time at least 0\n";
    return 2;
  }
  // --cublaslt K: torch::linear, then up to K of cuBLASLt's own candidates for the product.
  const int64_t lt_wanted = std::stoll(get(a, "cublaslt", "0"));
  if (a.count("cublaslt") && (lt_wanted < 1 || lt_wanted > 64 || norm || silu || mma || calls == 0 ||
                              (dtype != torch::kBFloat16 && dtype != torch::kHalf))) {
    std::cerr << "linear-rows: --cublaslt K (1-64) times cuBLASLt's candidates for torch::linear's product: it takes "
                 "--time N, bfloat16 or float16, and none of --norm, --silu, --mma\n";
    return 2;
  }
  if (a.count("cublaslt") && !device.is_cuda()) {
    std::cerr << "linear-rows: --cublaslt times CUDA kernels: --device must be cuda, not " << device << "\n";
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
  if (a.count("cublaslt")) return run_linear_rows_cublaslt(x, ws, biases, take, calls, lt_wanted, weight_bytes);
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
      mma ? !norm && linear_mma_fuses(x, w, bias, 0, b) && (!silu || n % 2 == 0)
          : (norm ? add_rms_norm_linear_fuses(x, delta, norm_d, w, bias, b) : linear_rows_fuses(x, w, bias, b)) &&
                (!silu || n % 2 == 0);
  if (!fuses) {
    std::cerr << (mma ? "linear-rows: the tensor-core kernel does not run here (a CUDA build with the kernels, "
                        "bf16 or fp16, B <= 64, D a multiple of 8; no --norm; --silu: N even)\n"
                      : "linear-rows: the matrix-vector kernel does not run here (a CUDA build with the kernels, "
                        "B <= 8, D a multiple of 16 bytes' worth; --norm: B x D elements within 48 KiB, D <= 4,096 "
                        "at 16-bit; --silu: N even)\n");
    return 1;
  }
  if (a.count("rope-heads")) return run_linear_rows_rope(a, x, delta, norm_d, w, bias);
  const double eps = std::stod(get(a, "eps", "1e-6"));
  if (calls > 0) {
    const std::function<void()> one_kernel = [&] {
      const auto i = take();
      if (norm)
        (void)add_rms_norm_linear(x, delta, norm_d, eps, ws[i], biases[i], b, true, silu);
      else if (silu)
        (void)linear_silu_mul(x, ws[i], biases[i], gemv_rows, true, mma_rows);
      else
        (void)linear_rows(x, ws[i], biases[i], gemv_rows, mma_rows);
    };
    one_kernel();  // outside the profile: first-call setup (occupancy queries)
    // The tensor-core kernel's launch beside its time: whether its clusters all run at once.
    std::string fields;
    if (const auto plan = mma ? linear_mma_plan(x, w, silu) : std::nullopt)
      fields = ",\"tiles\":" + std::to_string(plan->tiles) + ",\"shares\":" + std::to_string(plan->shares) +
               ",\"feature_warps\":" + std::to_string(plan->feature_warps) +
               ",\"blocks_per_sm\":" + std::to_string(plan->blocks_per_sm) +
               ",\"clusters_at_once\":" + std::to_string(plan->clusters_at_once);
    if (auto timed = time_linear_rows(calls, mma ? "mma_rows" : "gemv_rows", b, d, n, weight_bytes, one_kernel, fields);
        !timed) {
      std::cerr << "linear-rows: " << timed.error().message << "\n";
      return 1;
    }
  }
  if (random && a.count("out") == 0) return 0;
  if (!norm && !silu) return write_floats(linear_rows(x, w, bias, gemv_rows, mma_rows), get(a, "out"));
  if (!norm)
    return write_floats(torch::cat({linear_silu_mul(x, w, bias, gemv_rows, true, mma_rows),
                                    silu_mul(linear_rows(x, w, bias, gemv_rows, mma_rows), true)}),
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

// boundary-chain: one JSON line, the chain's time a phase beside its bytes' rate
// (fused_ops.hpp time_boundary_chain, boundary_kernels.hpp).
int run_boundary_chain(const args& a) {
  const std::string mode = get(a, "mode");
  const int64_t bytes = std::stoll(get(a, "bytes")), phases = std::stoll(get(a, "phases", "96"));
  int64_t blocks = std::stoll(get(a, "blocks", "0"));
  const int64_t calls = std::stoll(get(a, "time", "20"));
  if (a.count("blocks-per-sm")) {  // K a multiprocessor: how the barrier's cost goes with its blocks
    const int64_t per_sm = std::stoll(get(a, "blocks-per-sm"));
    if (a.count("blocks") || per_sm < 1 || cuda_multiprocessors() < 1) {
      std::cerr << "boundary-chain: --blocks-per-sm takes K >= 1 on a CUDA build, and not with --blocks\n";
      return 2;
    }
    blocks = per_sm * cuda_multiprocessors();
  }
  const torch::Device device(get(a, "device", "cuda"));
  const bool programmatic = a.count("no-programmatic-launch") == 0;
  set_programmatic_launch(programmatic);
  boundary_timing t;
  try {
    t = time_boundary_chain(mode, bytes, phases, blocks, calls, device);
  } catch (const std::invalid_argument& e) {  // a bad argument, or a build without the kernels
    std::cerr << e.what() << "\n";
    return 2;
  }
  if (!std::isfinite(t.last_sums)) {  // JSON has no inf or nan, and a chain's sums are finite by construction
    std::cerr << "boundary-chain: the last phase's sums are not finite (" << t.last_sums << ")\n";
    return 1;
  }
  const double us_per_phase = t.us_per_chain / static_cast<double>(phases);
  std::cout << "{\"mode\": " << json_string(mode) << ", \"programmatic_launch\": " << (programmatic ? "true" : "false")
            << ", \"bytes_per_phase\": " << bytes << ", \"phases\": " << phases << ", \"blocks\": " << t.blocks
            << ", \"resident_blocks\": " << t.resident << ", \"calls\": " << calls
            << ", \"us_per_chain\": " << t.us_per_chain << ", \"us_per_phase\": " << us_per_phase
            << ", \"tb_per_s\": " << static_cast<double>(bytes) / us_per_phase / 1e6
            << ", \"last_sums\": " << std::setprecision(17) << t.last_sums << "}\n";
  return 0;
}

}  // namespace caf_agent::policy::tool
