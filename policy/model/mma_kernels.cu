// mma_kernels: see fused_kernels.hpp mma_rows.
//
// The product is computed transposed, y^T = w x^T, so that the weight is the m16n8k16 tile's A
// operand (16 output features a tile) and the rows are its B operand (8 rows an n-tile, up to 8
// n-tiles for 64 rows). A block of mma_warps warps takes mma_tile features (Silu: mma_tile / 2
// gate features and the matching up features), a warp 16 of them, over a share of d: the block
// streams the share through a ring of mma_stages stages in shared memory (cp.async: the weight's
// 64 features x 32 elements and the rows' 32 elements a stage), every warp reading a stage's rows
// for its own features. Where d is cut into S shares (a cluster of S blocks along y, as many as
// keep every block resident at once), each block of the cluster writes a slice of the outputs,
// adding the blocks' sums in rank order through distributed shared memory. Every output is so one fixed sum, whatever
// the timing, and is rounded once (bias added first).
//
// Rationale: a decode step of 64 rows ran its projections on cuBLAS at ~1.2 TB/s (q/k/v and o,
// 1.6-2 MB each, at ~0.4 TB/s), and cuBLAS's kernels sit between ours, so programmatic launch could
// not overlap the norms, SwiGLU and RoPE with them (~236 us of small kernels in a ~1,227 us step on
// an H100, bench/results/2026-12-06-policy-h100-gpu-suite.md). Here the first stages' weights load
// before the wait for the kernel ahead, and SwiGLU is the epilogue.
//
// Both operands permute the sum's index alike (a fragment's k index is only an index of the sum):
// in k-step s of a 32-element stage, a lane of quad position qd holds k slots 2qd + {0, 1} and
// 2qd + 8 + {0, 1}, taken as elements 8qd + 4s + {0, 1} and + {2, 3}. A lane's operand words for a
// stage are then one 16-byte run of a weight row (rows gr and gr + 8 of the tile) and of an input
// row (row gr of the n-tile), read from shared memory as whole vectors.
#include "policy/model/async_copy.cuh"
#include "policy/model/element_math.cuh"
#include "policy/model/fused_kernels.hpp"
#include "policy/model/programmatic_launch.cuh"

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

namespace caf_agent::policy::kernels {
namespace {

namespace cg = cooperative_groups;

constexpr int warp = 32;
constexpr int mma_warps = 4;
constexpr int mma_threads = mma_warps * warp;
constexpr int mma_tile = 64;   // output features a block (an m16 tile a warp)
constexpr int mma_stages = 4;  // ring stages a block
constexpr int mma_k = 32;      // elements of d a stage
constexpr int max_cluster = 8;
constexpr int stage_w_bytes = mma_tile * mma_k * 2;  // 4 KiB

template <int NT>
constexpr int stage_bytes = stage_w_bytes + NT * 8 * mma_k * 2;

template <int NT>
constexpr size_t ring_bytes = static_cast<size_t>(mma_stages) * stage_bytes<NT>;

// The epilogue's sums, the block's [feature][row] (rows padded by one float against bank
// conflicts), in the ring's memory once the ring is drained.
template <int NT>
constexpr int sum_stride = NT * 8 + 1;
template <int NT>
constexpr size_t sums_bytes = static_cast<size_t>(mma_tile) * sum_stride<NT> * sizeof(float);

template <int NT>
constexpr size_t smem_bytes = ring_bytes<NT> > sums_bytes<NT> ? ring_bytes<NT> : sums_bytes<NT>;

struct mma_args {
  const void* x_bd;
  const void* w_nd;
  const void* bias_n;
  void* y_bn;
  int64_t b, n, d;
};

template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The weight row of the block's feature i (0 .. mma_tile - 1), or -1 past the features. Silu: the
// first half are gate features tile * mma_tile / 2 + i, the second half the up features n / 2 apart.
template <bool Silu>
__device__ __forceinline__ int64_t feature_row(int64_t tile, int i, int64_t n) {
  if constexpr (Silu) {
    const int64_t f = n / 2, j = tile * (mma_tile / 2) + i % (mma_tile / 2);
    return j < f ? j + (i >= mma_tile / 2 ? f : 0) : -1;
  }
  const int64_t j = tile * mma_tile + i;
  return j < n ? j : -1;
}

// Grid (tiles, S), cluster (1, S); NT n-tiles of 8 rows (rows b .. 8 NT - 1 zero).
template <typename T, int NT, bool Silu>
__global__ void __launch_bounds__(mma_threads) mma_rows_kernel(const mma_args a) {
  allow_dependents();
  extern __shared__ __align__(16) unsigned char mma_smem[];
  const T* x = static_cast<const T*>(a.x_bd);
  const T* w = static_cast<const T*>(a.w_nd);
  const int lane = threadIdx.x % warp, wid = threadIdx.x / warp, gr = lane / 4, qd = lane % 4;
  const int shares = static_cast<int>(gridDim.y), rank = static_cast<int>(blockIdx.y);
  const int64_t tile = blockIdx.x, d = a.d, b = a.b;
  // The block's stages: share `rank` of d's.
  const int64_t stages = (d + mma_k - 1) / mma_k;
  const int64_t first = stages * rank / shares, last = stages * (rank + 1) / shares;

  // A stage's copies, 16 bytes each: the weight's 64 rows x 4 vectors (2 a thread), the input's
  // 8 NT rows x 4 vectors; vectors past d and rows past the features or b are zero-filled.
  constexpr int w_copies = mma_tile * 4 / mma_threads;
  int64_t rows_of[w_copies];
#pragma unroll
  for (int j = 0; j < w_copies; ++j) rows_of[j] = feature_row<Silu>(tile, (j * mma_threads + threadIdx.x) / 4, a.n);
  const int vec = threadIdx.x % 4;
  const auto issue_w = [&](int64_t stage, int slot) {
    unsigned char* dst = mma_smem + slot * stage_bytes<NT>;
    const int64_t k = stage * mma_k + vec * 8;
#pragma unroll
    for (int j = 0; j < w_copies; ++j) {
      const int i = (j * mma_threads + threadIdx.x) / 4;
      const bool valid = rows_of[j] >= 0 && k < d;
      copy_16_or_zero(dst + i * (mma_k * 2) + vec * 16, valid ? w + rows_of[j] * d + k : w, valid);
    }
  };
  const auto issue_x = [&](int64_t stage, int slot) {
    unsigned char* dst = mma_smem + slot * stage_bytes<NT> + stage_w_bytes;
    const int64_t k = stage * mma_k + vec * 8;
    for (int c = threadIdx.x; c < NT * 8 * 4; c += mma_threads) {
      const int r = c / 4;
      const bool valid = r < b && k < d;
      copy_16_or_zero(dst + r * (mma_k * 2) + vec * 16, valid ? x + r * d + k : x, valid);
    }
  };

  // Stages first .. first + mma_stages - 2 ahead of the loop, the weights before the wait (no
  // kernel of a step writes weights), the rows after it; one group a stage.
#pragma unroll
  for (int s = 0; s < mma_stages - 1; ++s)
    if (first + s < last) issue_w(first + s, s);
  dependency_wait();
#pragma unroll
  for (int s = 0; s < mma_stages - 1; ++s) {
    if (first + s < last) issue_x(first + s, s);
    copy_commit();  // group s: stage s's rows (and, in group 0, every early weight copy)
  }

  float acc[NT][4];
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[t][i] = 0.0f;

  for (int64_t stage = first; stage < last; ++stage) {
    copy_wait<mma_stages - 2>();  // this stage's group done (one group is committed a stage) ..
    __syncthreads();              // .. for every thread, and every warp done with the last stage
    // The stage mma_stages - 1 ahead into the slot the last stage left.
    const int64_t ahead = stage + mma_stages - 1;
    const int ahead_slot = static_cast<int>((ahead - first) % mma_stages);
    if (ahead < last) {
      issue_w(ahead, ahead_slot);
      issue_x(ahead, ahead_slot);
    }
    copy_commit();
    const unsigned char* st = mma_smem + static_cast<int>((stage - first) % mma_stages) * stage_bytes<NT>;
    uint4 wv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
      wv[h] = *reinterpret_cast<const uint4*>(st + (wid * 16 + h * 8 + gr) * (mma_k * 2) + qd * 16);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const uint4 xv = *reinterpret_cast<const uint4*>(st + stage_w_bytes + (t * 8 + gr) * (mma_k * 2) + qd * 16);
      mma_16816<T>(acc[t], wv[0].x, wv[1].x, wv[0].y, wv[1].y, xv.x, xv.y);
      mma_16816<T>(acc[t], wv[0].z, wv[1].z, wv[0].w, wv[1].w, xv.z, xv.w);
    }
  }
  copy_wait<0>();
  __syncthreads();  // the ring drained and read: the sums take its memory

  // C fragment: rows gr, gr + 8 are the warp's features wid * 16 + gr (+ 8); columns 2qd, 2qd + 1
  // of n-tile t are input rows t * 8 + 2qd (+ 1).
  constexpr int stride = sum_stride<NT>;
  float* block_sums = reinterpret_cast<float*>(mma_smem);
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) block_sums[(wid * 16 + gr + (i / 2) * 8) * stride + t * 8 + 2 * qd + i % 2] = acc[t][i];
  cg::cluster_group cluster = cg::this_cluster();
  if (shares > 1)
    cluster.sync();  // every block's sums written
  else
    __syncthreads();
  // Every block of the cluster writes a slice of the outputs: each output's sums from every block,
  // loaded at once (independent loads of distributed shared memory), then added in rank order.
  // Rationale: block 0 adding the others' sums one load after another (a dependent chain per
  // output) took q/k/v at 64 rows from ~5 us (cuBLAS) to 51 us on an H100
  // (bench/results/2026-12-06-policy-h100-mma-rows.md).
  const float* peer[max_cluster];
#pragma unroll
  for (int q = 0; q < max_cluster; ++q)
    peer[q] = q < shares ? (shares > 1 ? cluster.map_shared_rank(block_sums, q) : block_sums) : block_sums;
  const auto sum_of = [&](int i, int r) {
    float v[max_cluster];
#pragma unroll
    for (int q = 0; q < max_cluster; ++q)
      if (q < shares) v[q] = peer[q][i * stride + r];
    float sum = v[0];
#pragma unroll
    for (int q = 1; q < max_cluster; ++q)
      if (q < shares) sum += v[q];
    return sum;
  };
  T* y = static_cast<T*>(a.y_bn);
  const T* bias = static_cast<const T*>(a.bias_n);
  const auto bias_of = [&](int i) { return bias != nullptr ? to_f(bias[feature_row<Silu>(tile, i, a.n)]) : 0.0f; };
  constexpr int per_row = Silu ? mma_tile / 2 : mma_tile;  // outputs of a row
  const int64_t rows = b < NT * 8 ? b : NT * 8, outputs = per_row * rows;
  const int64_t lo = outputs * rank / shares, hi = outputs * (rank + 1) / shares;
  for (int64_t at = lo + threadIdx.x; at < hi; at += mma_threads) {
    const int r = static_cast<int>(at / per_row), i = static_cast<int>(at % per_row);
    if constexpr (Silu) {
      const int64_t f = a.n / 2, j = tile * per_row + i;
      if (j < f)
        y[r * f + j] = silu_times<T>(round_to<T>(sum_of(i, r) + bias_of(i)),
                                     round_to<T>(sum_of(i + per_row, r) + bias_of(i + per_row)));
    } else {
      const int64_t j = tile * per_row + i;
      if (j < a.n) y[r * a.n + j] = from_f<T>(sum_of(i, r) + bias_of(i));
    }
  }
  if (shares > 1) cluster.sync();  // every block done reading the others' sums before they exit
}

std::atomic<int> max_shares{max_cluster};

// Shares of d (a cluster of that many blocks): as many as keep every block at least mma_stages
// stages and the blocks within the device's resident blocks, at most max_shares.
int mma_shares(int64_t tiles, int64_t d, int resident) {
  const int64_t stages = (d + mma_k - 1) / mma_k;
  int64_t shares = std::min<int64_t>(
      {static_cast<int64_t>(max_shares.load()), stages / mma_stages, resident / std::max<int64_t>(tiles, 1)});
  return static_cast<int>(std::max<int64_t>(shares, 1));
}

// Blocks of an instance a multiprocessor holds, once its shared memory is allowed (0 until then).
template <typename T, int NT, bool Silu>
std::atomic<int> resident_blocks{0};

// Allows the instance its shared memory (over the 48 KiB default) and reads its occupancy: not
// during a graph capture (stream_capturing), so mma_rows_prepare runs first.
template <typename T, int NT, bool Silu>
int prepare_one() {
  if (resident_blocks<T, NT, Silu>.load() > 0) return 0;
  auto* kernel = mma_rows_kernel<T, NT, Silu>;
  constexpr size_t smem = smem_bytes<NT>;
  if (const auto set =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
      set != cudaSuccess) {
    cudaGetLastError();
    return static_cast<int>(set);
  }
  int blocks = 0;
  if (const auto got = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, mma_threads, smem);
      got != cudaSuccess || blocks < 1) {
    cudaGetLastError();
    return static_cast<int>(got != cudaSuccess ? got : cudaErrorInvalidConfiguration);
  }
  resident_blocks<T, NT, Silu> = blocks;
  return 0;
}

template <typename T, int NT = 1>
int prepare_all() {
  if (const int err = prepare_one<T, NT, false>(); err != 0) return err;
  if (const int err = prepare_one<T, NT, true>(); err != 0) return err;
  if constexpr (NT < 8) return prepare_all<T, NT + 1>();
  return 0;
}

// An instance's launch: the grid (tiles, shares), a cluster of `shares` blocks along y, and with
// `programmatic` the programmatic attribute. `attributes` must outlive the config.
template <typename T, int NT, bool Silu>
cudaLaunchConfig_t launch_config(const mma_args& a, cudaStream_t stream, bool programmatic,
                                 cudaLaunchAttribute (&attributes)[2]) {
  const int per_sm = resident_blocks<T, NT, Silu>.load();
  const int sms = multiprocessor_count() > 0 ? multiprocessor_count() : 132;
  const int64_t features = Silu ? a.n / 2 : a.n, per_tile = Silu ? mma_tile / 2 : mma_tile;
  const int64_t tiles = (features + per_tile - 1) / per_tile;
  const int shares = mma_shares(tiles, a.d, per_sm * sms);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(shares));
  config.blockDim = dim3(mma_threads);
  config.dynamicSmemBytes = smem_bytes<NT>;
  config.stream = stream;
  int count = 0;
  if (programmatic) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (shares > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = 1;
    attributes[count].val.clusterDim.y = static_cast<unsigned>(shares);
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  config.attrs = attributes;
  config.numAttrs = count;
  return config;
}

// Readies the instance (outside a capture) if it is not; 0 or a CUDA error code.
template <typename T, int NT, bool Silu>
int ready(cudaStream_t stream) {
  if (resident_blocks<T, NT, Silu>.load() > 0) return 0;
  if (stream_capturing(stream)) return static_cast<int>(cudaErrorStreamCaptureUnsupported);
  return prepare_one<T, NT, Silu>();
}

template <typename T, int NT, bool Silu>
int launch_mma(const mma_args& a, cudaStream_t stream) {
  if constexpr (NT < 8) {
    if (a.b > NT * 8) return launch_mma<T, NT + 1, Silu>(a, stream);
  }
  if (const int err = ready<T, NT, Silu>(stream); err != 0) return err;
  cudaLaunchAttribute attributes[2];
  const auto config = launch_config<T, NT, Silu>(a, stream, programmatic_launch(), attributes);
  return static_cast<int>(cudaLaunchKernelEx(&config, mma_rows_kernel<T, NT, Silu>, a));
}

template <typename T, int NT, bool Silu>
mma_plan plan_mma(const mma_args& a) {
  if constexpr (NT < 8) {
    if (a.b > NT * 8) return plan_mma<T, NT + 1, Silu>(a);
  }
  mma_plan plan;
  if ((plan.err = ready<T, NT, Silu>(nullptr)) != 0) return plan;
  cudaLaunchAttribute attributes[2];
  const auto config = launch_config<T, NT, Silu>(a, nullptr, /*programmatic=*/false, attributes);
  plan.tiles = config.gridDim.x;
  plan.shares = static_cast<int>(config.gridDim.y);
  plan.blocks_per_sm = resident_blocks<T, NT, Silu>.load();
  if (plan.shares == 1) {  // no cluster: the device holds blocks_per_sm blocks a multiprocessor
    plan.clusters_at_once = plan.blocks_per_sm * (multiprocessor_count() > 0 ? multiprocessor_count() : 132);
    return plan;
  }
  if (const auto got = cudaOccupancyMaxActiveClusters(&plan.clusters_at_once, mma_rows_kernel<T, NT, Silu>, &config);
      got != cudaSuccess) {
    cudaGetLastError();
    plan.err = static_cast<int>(got);
  }
  return plan;
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

bool mma_rows_fits(element dtype, int64_t b, int64_t n, int64_t d, bool silu_mul) {
  return (dtype == element::bf16 || dtype == element::fp16) && b >= 1 && b <= mma_max_rows && n >= 1 && d >= 8 &&
         d % 8 == 0 && (!silu_mul || n % 2 == 0) && (n + mma_tile - 1) / mma_tile <= 0x7fffffff;
}

void set_mma_max_shares(int shares) {
  max_shares = std::clamp(shares, 1, max_cluster);
}

int mma_rows_prepare() {
  if (const int err = prepare_all<__nv_bfloat16>(); err != 0) return err;
  return prepare_all<__half>();
}

mma_plan mma_rows_plan(element dtype, int64_t b, int64_t n, int64_t d, bool silu_mul) {
  if (!mma_rows_fits(dtype, b, n, d, silu_mul)) {
    mma_plan refused;
    refused.err = static_cast<int>(cudaErrorInvalidValue);
    return refused;
  }
  const mma_args a{nullptr, nullptr, nullptr, nullptr, b, n, d};
  if (dtype == element::bf16)
    return silu_mul ? plan_mma<__nv_bfloat16, 1, true>(a) : plan_mma<__nv_bfloat16, 1, false>(a);
  return silu_mul ? plan_mma<__half, 1, true>(a) : plan_mma<__half, 1, false>(a);
}

int mma_rows(element dtype, const void* x_bd, const void* w_nd, const void* bias_n, void* y_bn, int64_t b, int64_t n,
             int64_t d, bool silu_mul, void* stream) {
  if (!mma_rows_fits(dtype, b, n, d, silu_mul) || !aligned16(x_bd) || !aligned16(w_nd))
    return static_cast<int>(cudaErrorInvalidValue);
  const mma_args a{x_bd, w_nd, bias_n, y_bn, b, n, d};
  auto* s = static_cast<cudaStream_t>(stream);
  if (dtype == element::bf16)
    return silu_mul ? launch_mma<__nv_bfloat16, 1, true>(a, s) : launch_mma<__nv_bfloat16, 1, false>(a, s);
  return silu_mul ? launch_mma<__half, 1, true>(a, s) : launch_mma<__half, 1, false>(a, s);
}

}  // namespace caf_agent::policy::kernels
