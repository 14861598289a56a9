#pragma once
// boundary_kernels: a measurement's kernels, not the model's (policy_model_tool boundary-chain,
// bench/policy/bench_boundaries.py). They ask what one boundary between two ops of a decode step
// costs when the ops are kernels ordered by programmatic launch (as policy/model's kernels are),
// and what it costs when one persistent kernel's blocks go from op to op through counters in global
// memory instead. Rationale: the 1-row 131k step runs six kernels a layer and each costs ~4 us
// beyond its bytes (bench/results/2026-12-06-policy-h100-early-tiles-rope-gemv.md); whether a
// persistent decode kernel is worth building turns on that difference, so it is measured first.
//
// A chain is `phases` phases over `data` (phases slices of bytes_per_phase bytes each). In phase p
// each of `blocks` blocks reads its share of slice p in 16-byte loads, 4 a thread in flight (as the
// 1-row GEMVs stream their weights), the slice's first loads issued before the wait for phase p - 1;
// then it reads every block's sum of phase p - 1 (as a projection reads the whole output of the op
// before it) and writes its own sum to sums_pb[p * blocks + block].
//   kernels: one kernel a phase, launched with programmatic launch when set_programmatic_launch(true)
//     (the wait is griddepcontrol.wait); the chain is captured once as a CUDA graph and replayed.
//   flags: one cooperative launch of `blocks` blocks (all resident at once); the wait for phase
//     p - 1 is until counters_p[p - 1] reaches the run's count of arrivals (each block adds one after
//     its sum is written and fenced). counters_p must be zero before the first timed run.

#include <cstdint>

namespace caf_agent::policy::kernels {

enum class boundary_mode : int { kernels = 0, flags = 1 };

/// Blocks of the chain's kernel the device holds at once (its occupancy times the
/// multiprocessors): the most `flags` may launch; 0 when the device cannot be asked.
int64_t boundary_resident_blocks(boundary_mode mode);

/// Runs 2 unmeasured chains and then `calls` chains on a stream of its own, timed with CUDA events;
/// us_per_chain gets the mean. Then one more chain over zeroed sums, finished on return: sums_pb
/// holds its sums (the same bits for both modes at the same blocks and data). bytes_per_phase: a multiple of 16, at
/// least 16 * blocks; data: phases * bytes_per_phase bytes, 16-byte aligned; sums_pb: phases * blocks floats;
/// counters_p: phases zeroed unsigned ints (flags; may be null for kernels). Returns the first CUDA error
/// (cudaErrorInvalidValue for bad arguments, cudaErrorCooperativeLaunchTooLarge when `flags` asks
/// for more blocks than are resident at once), 0 on success.
int time_boundary_chain(boundary_mode mode, const void* data, int64_t bytes_per_phase, int phases, int blocks,
                        float* sums_pb, unsigned* counters_p, int calls, double* us_per_chain);

}  // namespace caf_agent::policy::kernels
