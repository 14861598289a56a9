// skinny_gemm: see fused_kernels.hpp. A decode step's small projections (q/k/v, o and down at
// the 0.5B shape) multiply at most 64 rows by a weight read once, so they are bound by latency
// and by reading the weight. cuBLAS took 4.3-6.1 us for each on the H200 and a second kernel to
// reduce the down projection's split k (bench/results/2026-12-03-policy-h200-sample-long).
//
// Layout. A thread block of 4 warps owns 64 output columns and every row: warp w holds columns
// 16 w .. 16 w + 15 (two n8 tiles) of the four m16 tiles. The block streams its weight tile and
// the matching x tile through shared memory in stages of 64 k positions (8 KB each of w and x), up
// to `stages` in flight (cp.async), so a block with few stages issues every load at once.
// mma.m16n8k16 sums over its 16 k positions in any order, so a 32-position half of a stage is
// permuted alike for x and w: thread (g = lane / 4, t = lane % 4) reads 16 contiguous bytes (8
// values) of one x row and one w row at offset 8 t, and hands their first four values to the
// first MMA and the last four to the second. Rows of 128 bytes are stored with their 16-byte
// units swizzled by the row's parity, so a warp's reads and the copies' writes are free of bank
// conflicts.
//
// Split k. With few column blocks the blocks of a thread-block cluster (sm_90) share a column
// block and take contiguous ranges of stages; each leaves its 64 x 64 fp32 partial in shared
// memory, and after a cluster barrier each block sums a band of rows over the cluster's blocks in
// rank order (distributed shared memory): deterministic, no workspace, no second kernel.
// An earlier form loaded operands straight into registers and ran 2-4x slower than cuBLAS
// (bench/results/2026-12-03-policy-h200-skinny-gemm.md).
#include "policy/model/fused_kernels.hpp"

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace caf_agent::policy::kernels {
namespace {

namespace cg = cooperative_groups;

constexpr int tile_rows = 64;  // rows a block covers (m <= 64)
constexpr int tile_cols = 64;  // columns a block covers
constexpr int stage_k = 64;    // k positions per stage (128-byte rows)
constexpr int stages = 4;      // stages in flight
constexpr int gemm_threads = 128;
constexpr int stage_units = 2 * tile_cols * stage_k * 2 / 16;  // 16-byte units of w and x per stage
constexpr int smem_bytes = stages * stage_units * 16;
constexpr int partial_stride = tile_cols + 4;
static_assert(tile_rows * partial_stride * 4 <= smem_bytes, "the partial reuses the stages' memory");

__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, __nv_bfloat16*) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, __half*) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void copy16(uint4* shared, const void* global) {
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global));
}
__device__ __forceinline__ void commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int pending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
}

/// Where unit u (16 bytes) of a 128-byte row r lives: odd rows swap the row's halves, so the 8
/// threads of a quarter-warp (rows 2p and 2p + 1, units 4 s .. 4 s + 3) hit 8 distinct units.
__device__ __forceinline__ int unit_at(int r, int u) {
  return r * 8 + (u ^ ((r & 1) << 2));
}

__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float to_float(__half v) {
  return __half2float(v);
}
template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

/// The sum's value in the output: bias added in fp32, then one rounding to T (cuBLAS's epilogue,
/// and torch::linear's), stored as T or as that T value in fp32.
template <typename T>
__device__ __forceinline__ void store(void* y, int64_t ldy, bool y_fp32, const T* bias, int row, int col, float sum) {
  if (bias != nullptr) sum += to_float(bias[col]);
  const T rounded = from_float<T>(sum);
  if (y_fp32)
    static_cast<float*>(y)[row * ldy + col] = to_float(rounded);
  else
    static_cast<T*>(y)[row * ldy + col] = rounded;
}

template <typename T, int split>
__global__ void __cluster_dims__(1, split, 1) __launch_bounds__(gemm_threads)
    skinny_gemm_kernel(const T* __restrict__ x, int64_t ldx, const T* __restrict__ w, const T* __restrict__ bias,
                       void* __restrict__ y, int64_t ldy, bool y_fp32, int m, int n, int k) {
  extern __shared__ uint4 smem[];
  const int tid = threadIdx.x, lane = tid % 32, warp_id = tid / 32;
  const int g = lane / 4, t = lane % 4;
  const int col_base = blockIdx.x * tile_cols;
  const int steps = k / stage_k;
  const int rank = static_cast<int>(blockIdx.y);
  const int s_begin = static_cast<int>(static_cast<int64_t>(steps) * rank / split);
  const int count = static_cast<int>(static_cast<int64_t>(steps) * (rank + 1) / split) - s_begin;

  // Stage `slot` <- k positions (s_begin + step) * 64 ..: w rows (columns) then x rows, 8 units a
  // row. Rows past n or m are not loaded; their products land in outputs never stored.
  auto load = [&](int slot, int step) {
    uint4* w_tile = smem + slot * stage_units;
    uint4* x_tile = w_tile + stage_units / 2;
    const int64_t k0 = static_cast<int64_t>(s_begin + step) * stage_k;
    for (int u = tid; u < stage_units / 2; u += gemm_threads) {
      const int r = u / 8, unit = u % 8;
      if (col_base + r < n)
        copy16(w_tile + unit_at(r, unit), w + (col_base + r) * static_cast<int64_t>(k) + k0 + 8 * unit);
      if (r < m) copy16(x_tile + unit_at(r, unit), x + r * ldx + k0 + 8 * unit);
    }
  };
  float acc[4][2][4] = {};
  for (int s = 0; s < stages - 1; ++s) {
    if (s < count) load(s, s);
    commit();
  }
  for (int it = 0; it < count; ++it) {
    wait_copies<stages - 2>();
    __syncthreads();  // stage `it` is in; every warp is done with the slot reloaded below
    if (it + stages - 1 < count) load((it + stages - 1) % stages, it + stages - 1);
    commit();
    const uint4* w_tile = smem + (it % stages) * stage_units;
    const uint4* x_tile = w_tile + stage_units / 2;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int u = 4 * half + t;
      uint4 wb[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) wb[j] = w_tile[unit_at(warp_id * 16 + 8 * j + g, u)];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (16 * i >= m) break;
        const uint4 lo = x_tile[unit_at(16 * i + g, u)], hi = x_tile[unit_at(16 * i + 8 + g, u)];
        const uint32_t first[4] = {lo.x, hi.x, lo.y, hi.y};
        const uint32_t second[4] = {lo.z, hi.z, lo.w, hi.w};
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          mma(acc[i][j], first, wb[j].x, wb[j].y, static_cast<T*>(nullptr));
          mma(acc[i][j], second, wb[j].z, wb[j].w, static_cast<T*>(nullptr));
        }
      }
    }
  }
  wait_copies<0>();
  // acc[i][j]: rows 16 i + g (+ 8 for [2], [3]), columns 16 warp + 8 j + 2 t (+ 1 for [1], [3]).
  if constexpr (split == 1) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int r = 16 * i + g + 8 * (q / 2), col = col_base + warp_id * 16 + 8 * j + 2 * t + q % 2;
          if (r < m && col < n) store<T>(y, ldy, y_fp32, bias, r, col, acc[i][j][q]);
        }
  } else {
    __syncthreads();  // the stages' memory becomes the partial
    float* partial = reinterpret_cast<float*>(smem);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int r = 16 * i + g + 8 * (q / 2), col = warp_id * 16 + 8 * j + 2 * t + q % 2;
          partial[r * partial_stride + col] = acc[i][j][q];
        }
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    // Block `rank` sums rows rank * 64 / split .. over the cluster's blocks in rank order.
    const int band = tile_rows / split;
    for (int e = tid; e < band * tile_cols; e += gemm_threads) {
      const int r = rank * band + e / tile_cols, col = e % tile_cols;
      const int out_col = col_base + col;
      if (r >= m || out_col >= n) continue;
      float sum = 0.0f;
      for (int q = 0; q < split; ++q) sum += cluster.map_shared_rank(partial, q)[r * partial_stride + col];
      store<T>(y, ldy, y_fp32, bias, r, out_col, sum);
    }
    cluster.sync();  // no block leaves while another still reads its partial
  }
}

/// Blocks of a cluster per column block: enough blocks to cover the GPU about twice (132 SMs on
/// the H200), at least two stages per block.
int split_for(int64_t column_blocks, int64_t steps) {
  int split = 1;
  while (split < 8 && column_blocks * split < 264 && steps >= 2 * split) split *= 2;
  return split;
}

template <typename T, int split>
int launch_split(const void* x, int64_t ldx, const void* w, const void* bias, void* y, int64_t ldy, bool y_fp32,
                 int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  // More than the default 48 KB of dynamic shared memory, allowed once per kernel (the first
  // call, an eager decode before any graph capture).
  static const int allowed = static_cast<int>(
      cudaFuncSetAttribute(skinny_gemm_kernel<T, split>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  if (allowed != 0) return allowed;
  const dim3 grid(static_cast<unsigned>((n + tile_cols - 1) / tile_cols), static_cast<unsigned>(split));
  skinny_gemm_kernel<T, split><<<grid, gemm_threads, smem_bytes, stream>>>(
      static_cast<const T*>(x), ldx, static_cast<const T*>(w), static_cast<const T*>(bias), y, ldy, y_fp32,
      static_cast<int>(m), static_cast<int>(n), static_cast<int>(k));
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int launch(const void* x, int64_t ldx, const void* w, const void* bias, void* y, int64_t ldy, bool y_fp32, int64_t m,
           int64_t n, int64_t k, cudaStream_t stream) {
  switch (split_for((n + tile_cols - 1) / tile_cols, k / stage_k)) {
    case 1:
      return launch_split<T, 1>(x, ldx, w, bias, y, ldy, y_fp32, m, n, k, stream);
    case 2:
      return launch_split<T, 2>(x, ldx, w, bias, y, ldy, y_fp32, m, n, k, stream);
    case 4:
      return launch_split<T, 4>(x, ldx, w, bias, y, ldy, y_fp32, m, n, k, stream);
    default:
      return launch_split<T, 8>(x, ldx, w, bias, y, ldy, y_fp32, m, n, k, stream);
  }
}

}  // namespace

bool skinny_gemm_fits(int64_t m, int64_t n, int64_t k, int64_t ldx, int64_t ldy) {
  return m >= 1 && m <= tile_rows && n >= 1 && n < (int64_t{1} << 31) / tile_cols && k >= stage_k && k % stage_k == 0 &&
         k < (int64_t{1} << 30) && ldx >= k && ldx % 8 == 0 && ldy >= n;
}

int skinny_gemm(element dtype, const void* x, int64_t ldx, const void* w, const void* bias, void* y, int64_t ldy,
                bool y_fp32, int64_t m, int64_t n, int64_t k, void* stream) {
  if (!skinny_gemm_fits(m, n, k, ldx, ldy)) return static_cast<int>(cudaErrorInvalidValue);
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case element::bf16:
      return launch<__nv_bfloat16>(x, ldx, w, bias, y, ldy, y_fp32, m, n, k, s);
    case element::fp16:
      return launch<__half>(x, ldx, w, bias, y, ldy, y_fp32, m, n, k, s);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace caf_agent::policy::kernels
