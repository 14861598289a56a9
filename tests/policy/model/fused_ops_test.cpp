// Unit tests of policy/model/fused_ops.hpp off the GPU: where the kernels do not apply (the CPU,
// tensors that require grad) every op is exactly the ATen composite the decoder ran before, the
// decode RoPE + KV write reports that it does not fuse, and sampling asked to fuse falls back to
// the composite's draw. The kernels themselves are tested on the GPU
// (tests/policy/model/test_fused_kernels_gpu.py).
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "policy/model/fused_ops.hpp"
#include "policy/model/sampling.hpp"

namespace policy = caf_agent::policy;

TEST(fused_ops, add_rms_norm_on_the_cpu_is_the_add_then_the_norm) {
  torch::manual_seed(3);
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    auto opts = torch::TensorOptions().dtype(dtype);
    auto x = torch::randn({3, 5, 64}, opts), d = torch::randn({3, 5, 64}, opts), w = torch::rand({64}, opts) + 0.5;
    for (bool fused : {true, false}) {
      auto [sum, normed] = policy::add_rms_norm(x, d, w, 1e-6, fused);
      EXPECT_TRUE(torch::equal(sum, x + d));
      EXPECT_TRUE(torch::equal(normed, policy::rms_norm(x + d, w, 1e-6)));
      auto [same, alone] = policy::add_rms_norm(x, {}, w, 1e-6, fused);  // no delta: the residual's norm
      EXPECT_TRUE(same.is_same(x));
      EXPECT_TRUE(torch::equal(alone, policy::rms_norm(x, w, 1e-6)));
    }
  }
}

TEST(fused_ops, silu_mul_on_the_cpu_is_silu_of_gate_times_up) {
  torch::manual_seed(4);
  auto gate_up = torch::randn({2, 3, 2 * 48}, torch::TensorOptions().dtype(torch::kBFloat16));
  auto want = torch::silu(gate_up.narrow(-1, 0, 48)) * gate_up.narrow(-1, 48, 48);
  EXPECT_TRUE(torch::equal(policy::silu_mul(gate_up, true), want));
  EXPECT_EQ(policy::silu_mul(gate_up, true).sizes(), (std::vector<int64_t>{2, 3, 48}));
}

TEST(fused_ops, tensors_that_require_grad_keep_the_differentiable_composite) {
  auto x = torch::randn({4, 32}).requires_grad_(), w = torch::ones({32});
  auto [sum, normed] = policy::add_rms_norm(x, torch::randn({4, 32}), w, 1e-6, true);
  normed.sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_GT(x.grad().abs().sum().item<double>(), 0.0);
}

TEST(fused_ops, nothing_fuses_on_the_cpu) {
  auto qkv = torch::randn({2, 6, 8});
  auto cache = torch::zeros({2, 1, 16, 8});
  policy::rope_table table{torch::ones({16, 8}), torch::zeros({16, 8})};
  EXPECT_FALSE(policy::rope_kv_decode_fuses(qkv, cache, cache, table));
  EXPECT_FALSE(policy::sample_rows_fuses(torch::randn({2, 100})));
  EXPECT_FALSE(policy::linear_rows_fuses(torch::randn({2, 64}), torch::randn({8, 64}), torch::randn({8}), 8));
  EXPECT_THROW(policy::rope_kv_decode(qkv, torch::zeros({2}, torch::kInt64), table, cache, cache, 4), c10::Error);
  // The q/k/v GEMV with RoPE and the KV write: 4 + 2 x 1 heads of 8 from d 64.
  auto x = torch::randn({2, 64}), norm = torch::ones({64}), w = torch::randn({48, 64}), bias = torch::randn({48});
  EXPECT_FALSE(policy::add_rms_norm_qkv_rope_kv_fuses(x, {}, norm, w, bias, 8, cache, cache, table, 4, false));
  EXPECT_THROW(policy::add_rms_norm_qkv_rope_kv(x, {}, norm, 1e-6, w, bias, 8, torch::zeros({2}, torch::kInt64), table,
                                                cache, cache, 4),
               c10::Error);
}

TEST(fused_ops, linear_rows_on_the_cpu_is_torch_linear) {
  torch::manual_seed(7);
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    auto opts = torch::TensorOptions().dtype(dtype);
    auto x = torch::randn({1, 3, 64}, opts), w = torch::randn({24, 64}, opts), bias = torch::randn({24}, opts);
    for (int64_t max_rows : {0, 3, 8}) {
      auto y = policy::linear_rows(x, w, bias, max_rows);
      EXPECT_EQ(y.sizes(), (std::vector<int64_t>{1, 3, 24}));
      EXPECT_TRUE(torch::equal(y, torch::linear(x, w, bias)));
      EXPECT_TRUE(torch::equal(policy::linear_rows(x, w, {}, max_rows), torch::linear(x, w)));
    }
  }
}

TEST(fused_ops, sampling_asked_to_fuse_on_the_cpu_draws_what_the_composite_draws) {
  torch::manual_seed(5);
  auto logits = torch::randn({4, 300}) * 3;
  std::vector<policy::sampling_params> params(4);
  params[0].temperature = 0.0f;  // greedy
  params[1].temperature = 0.7f;
  params[2].temperature = 1.0f;
  params[3].temperature = 1.3f;
  const std::vector<double> uniforms{0.1, 0.5, 0.9, 0.999};
  const std::vector<int64_t> forced{-1, -1, 17, -1};
  auto a = policy::sample_tokens(logits, params, uniforms, forced, /*fused=*/true);
  auto b = policy::sample_tokens(logits, params, uniforms, forced, /*fused=*/false);
  EXPECT_TRUE(torch::equal(a.tokens_b, b.tokens_b));
  EXPECT_TRUE(torch::equal(a.logprobs_b, b.logprobs_b));
  EXPECT_EQ(a.tokens_b[0].item<int64_t>(), logits[0].argmax().item<int64_t>());
  EXPECT_EQ(a.tokens_b[2].item<int64_t>(), 17);
}

// Attention of g queries over n keys split into shares of consecutive keys, each share's output
// and log-sum-exp computed alone, then merged: the attention over all the keys. A share of no keys
// (its output NaN, as flash may leave it) is left out.
TEST(fused_ops, merge_shares_joins_attention_over_key_shares_into_attention_over_all_keys) {
  torch::manual_seed(6);
  const int64_t g = 3, e = 16, n = 50, shares = 4;
  auto q_ge = torch::randn({g, e}, torch::kFloat64), k_ne = torch::randn({n, e}, torch::kFloat64);
  auto v_ne = torch::randn({n, e}, torch::kFloat64);
  auto want_ge = torch::softmax(q_ge.matmul(k_ne.t()), -1).matmul(v_ne);
  // Shares of 20, 20, 10 and 0 keys.
  const std::vector<int64_t> used{20, 20, 10, 0};
  std::vector<torch::Tensor> outs, lses;
  int64_t start = 0;
  for (int64_t s = 0; s < shares; ++s) {
    if (used[s] == 0) {
      outs.push_back(torch::full({g, e}, std::nan(""), torch::kFloat64));
      lses.push_back(torch::full({g}, std::nan(""), torch::kFloat64));
      continue;
    }
    auto scores_gn = q_ge.matmul(k_ne.narrow(0, start, used[s]).t());
    outs.push_back(torch::softmax(scores_gn, -1).matmul(v_ne.narrow(0, start, used[s])));
    lses.push_back(torch::logsumexp(scores_gn, -1));
    start += used[s];
  }
  // The log-sum-exps as flash's varlen forward returns them: [g, x].
  auto out_xge = torch::stack(outs), lse_gx = torch::stack(lses).to(torch::kFloat32).t().contiguous();
  auto used_x = torch::tensor(used, torch::kInt32);
  for (bool fused : {true, false}) {
    auto merged = policy::merge_shares(out_xge, lse_gx, used_x, shares, fused);
    ASSERT_EQ(merged.sizes(), (std::vector<int64_t>{1, g, e}));
    EXPECT_TRUE(torch::allclose(merged[0], want_ge, 1e-5, 1e-5)) << (merged[0] - want_ge).abs().max();
  }
  // Two rows of the same shares: each merges only its own.
  auto two = policy::merge_shares(torch::cat({out_xge, out_xge.flip(1)}), torch::cat({lse_gx, lse_gx.flip(0)}, 1),
                                  torch::cat({used_x, used_x}), shares, false);
  EXPECT_TRUE(torch::allclose(two[0], want_ge, 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(two[1], want_ge.flip(0), 1e-5, 1e-5));
  // The same two rows share-major (share s of row r at s * 2 + r, as one flash call per share
  // leaves them once joined): the same merge.
  auto major = policy::merge_shares(torch::stack({out_xge, out_xge.flip(1)}, 1).reshape({2 * shares, g, e}),
                                    torch::stack({lse_gx, lse_gx.flip(0)}, 2).reshape({g, 2 * shares}),
                                    torch::stack({used_x, used_x}, 1).reshape({2 * shares}), shares, false,
                                    /*share_major=*/true);
  EXPECT_TRUE(torch::allclose(major[0], want_ge, 1e-5, 1e-5)) << (major[0] - want_ge).abs().max();
  EXPECT_TRUE(torch::allclose(major[1], want_ge.flip(0), 1e-5, 1e-5));
  EXPECT_THROW(policy::merge_shares(out_xge, lse_gx.to(torch::kFloat64), used_x, shares, false), c10::Error);
  EXPECT_THROW(policy::merge_shares(out_xge, lse_gx.t(), used_x, shares, false), c10::Error);  // [x, g]
  EXPECT_THROW(policy::merge_shares(out_xge, lse_gx, used_x, 3, false), c10::Error);
}

// The e4m3 cache's decode attention kernel runs on CUDA only: on the CPU it does not apply (nor
// over a bf16 cache, nor with a paged block size it cannot read 16 keys at a time), and a call says
// so instead of computing anything.
TEST(fused_ops, fp8_decode_attention_is_refused_where_its_kernel_cannot_run) {
  const auto e4m3 = [](std::vector<int64_t> shape) { return torch::zeros(shape).to(torch::kFloat8_e4m3fn); };
  auto k_cache = e4m3({2, 2, 64, 64});
  EXPECT_FALSE(policy::fp8_decode_attention_fuses(k_cache, torch::kBFloat16, 4, false));
  EXPECT_FALSE(policy::fp8_decode_attention_fuses(torch::zeros({2, 2, 64, 64}), torch::kBFloat16, 4, false));
  EXPECT_FALSE(policy::fp8_decode_attention_fuses(torch::Tensor(), torch::kBFloat16, 4, false));
  try {
    policy::fp8_decode_attention(torch::zeros({2, 4, 64}, torch::kBFloat16), k_cache, k_cache,
                                 torch::zeros({2}, torch::kInt64), 32);
    FAIL() << "expected a refusal";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("fp8_decode_attention: the kernel does not take"),
              std::string::npos)
        << e.what_without_backtrace();
  }
}
