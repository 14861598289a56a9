#pragma once
// tuned_linear: torch::linear for a decode step's skinny products, with cublasLt's algorithm
// chosen by timing instead of by its heuristic's first pick. torch::linear runs the heuristic's
// best-ranked candidate; at 1-64 rows against a weight read once the ranking is a guess about
// latency-bound kernels, and another candidate is often faster on the device
// (bench/results/2026-12-04-policy-h200-tuned-gemm.md). The first product of each shape
// (outside CUDA graph capture) times torch::linear and each candidate on that device, with L2
// flushed before each run, checks each candidate's result against torch::linear's, and keeps the
// fastest for the process. Graph capture replays what the warm-up before it tuned.
//
// Numerics: a candidate sums in fp32 in its own order (split-K among them), then rounds once, as
// torch::linear does with its own pick, so results can differ from torch::linear's in the last
// bit of a few entries. Which candidate wins depends on timings, so two processes may choose
// differently; within a process a shape always runs the same candidate (eager and graphs alike).
//
// Shape legend: see layers.hpp.

#include <string>
#include <vector>

#include <torch/types.h>

namespace caf_agent::policy {

/// The rows at most that tuned_linear tunes for (a decode step's rows; prefill keeps torch::linear).
inline constexpr int64_t tuned_linear_max_rows = 64;

/// True when tuned_linear would run its own choice: this build has the kernels, x [.., k] with
/// 1..64 rows, weight [n, k] and bias [n] (or none) contiguous bf16 / fp16 on one CUDA device,
/// 256-byte aligned, no autograd.
bool tuned_linear_applies(const torch::Tensor& x, const torch::Tensor& weight_nk, const torch::Tensor& bias_n);

/// torch::linear(x, weight, bias); where tuned_linear_applies, the tuned cublasLt candidate
/// for this shape (tuned on first use outside graph capture; torch::linear when nothing beat it).
torch::Tensor tuned_linear(const torch::Tensor& x, const torch::Tensor& weight_nk, const torch::Tensor& bias_n);

/// One line per shape tuned so far in this process: the shape, the candidate kept (or
/// torch::linear), and the median device times of torch::linear and of the kept candidate.
std::vector<std::string> tuned_linear_report();

}  // namespace caf_agent::policy
