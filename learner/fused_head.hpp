#pragma once
// fused_head: the LM head's per-position log-probability and entropy on CUDA in bf16, without
// fp32 [c, v] intermediates. The composite (train_forward.cpp's head_rows) casts the bf16 logits
// to fp32 and runs logsumexp, gather, exp and their backward as separate kernels over
// [c, v] fp32 tensors: at 8,192 positions x 151,936 entries that was ~20 ms of a 138 ms training
// step on an H200 (bench/results/2026-12-01-learner-h200-3.md). Here one kernel reads the bf16
// logits once (online softmax in fp32) and the backward writes the bf16 logits' gradient in one
// more pass; the two matrix products stay cuBLAS's.
//
// Shape legend: c rows (positions of one chunk), d hidden, v vocabulary.

#include <vector>

#include <torch/types.h>

namespace caf_agent::learner {

/// True when this build has the kernels (nvcc was found where LibTorch has CUDA).
bool fused_head_built();

/// True when this build has the kernels and the operands are CUDA bf16 tensors of [c, d] and
/// [v, d]; otherwise callers use the ATen composite.
bool fused_head_applies(const torch::Tensor& h_cd, const torch::Tensor& w_vd);

/// {logp_c, entropy_c} (fp32 [c]) of targets_c (int64 [c], in [0, v)) under
/// softmax(h_cd w_vd^T / temperature), differentiable in h_cd and w_vd. keep_logits keeps the
/// chunk's bf16 logits for the backward; otherwise the backward recomputes them (one matrix
/// product more, one [c, v] bf16 tensor less held between forward and backward).
std::vector<torch::Tensor> fused_head(const torch::Tensor& h_cd, const torch::Tensor& w_vd,
                                      const torch::Tensor& targets_c, double temperature, bool keep_logits);

}  // namespace caf_agent::learner
