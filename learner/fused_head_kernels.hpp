#pragma once
// fused_head_kernels: the two row-wise CUDA kernels behind fused_head.hpp, over bf16 logits
// with fp32 arithmetic. Plain pointers and a stream, so only fused_head_kernels.cu needs nvcc.
//
// Shape legend: c rows (positions of one chunk), v vocabulary.

#include <cstdint>

namespace caf_agent::learner::kernels {

/// Per row r of logits_cv (bf16, row-major, v columns), with x = logits * inv_temperature in fp32:
/// lse = log sum exp x, mean = sum softmax(x) * x, logp = x[target] - lse, entropy = lse - mean.
/// Every output is fp32 [c]. targets_c are int64 in [0, v) (checked by the caller).
void head_forward(const void* logits_cv, const int64_t* targets_c, int64_t rows, int64_t vocab, float inv_temperature,
                  float* logp_c, float* entropy_c, float* lse_c, float* mean_c, void* stream);

/// The gradient of sum(g_logp * logp + g_entropy * entropy) with respect to the logits (bf16
/// [c, v]): inv_temperature * (g_logp * (onehot(target) - p) - g_entropy * p * (x - mean)),
/// p = exp(x - lse). g_logp_c / g_entropy_c are fp32 [c] or null (zero).
void head_backward(const void* logits_cv, const int64_t* targets_c, int64_t rows, int64_t vocab, float inv_temperature,
                   const float* lse_c, const float* mean_c, const float* g_logp_c, const float* g_entropy_c,
                   void* grad_logits_cv, void* stream);

}  // namespace caf_agent::learner::kernels
