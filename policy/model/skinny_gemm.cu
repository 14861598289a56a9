// skinny_gemm: see fused_kernels.hpp. A decode step's projections multiply at most 64 rows by a
// weight matrix read once, so they are bound by reading the weights, not by arithmetic; cuBLAS's
// kernels for these shapes reached 1-2.4 TB/s on the H200 and added a split-K reduction kernel
// (bench/results/2026-12-03-policy-h200-sample-long/profile-graphs.json).
//
// Layout. A thread block of 8 warps owns 64 output columns and every row: warp (wm, wn) holds rows
// 32 wm .. 32 wm + 31 (two m16 tiles) and columns 16 wn .. 16 wn + 15 (two n8 tiles). The k axis
// is cut into chunks of 32. mma.m16n8k16 sums over its 16 k positions in any order, so a chunk's
// k positions are permuted the same way for x and w: thread (g = lane / 4, t = lane % 4) loads 16
// contiguous bytes (8 values) of one x row and one w row at chunk offset 8 t, and hands their
// first four values to the chunk's first MMA and the last four to its second. Every load is a
// 16-byte vector, four threads covering 64 contiguous bytes of a row; no shared memory is needed
// for the operands.
//
// Split k. With few column blocks (q/k/v, o and down projections: 14-18 blocks of 64) the blocks
// of a thread-block cluster (sm_90) share the column block and take contiguous ranges of chunks;
// each leaves its 64 x 64 fp32 partial in shared memory, and after a cluster barrier each block
// sums a band of rows over the cluster's blocks in rank order (distributed shared memory), so the
// result is deterministic and there is no workspace and no second kernel.
#include "policy/model/fused_kernels.hpp"

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace caf_agent::policy::kernels {
namespace {

namespace cg = cooperative_groups;

constexpr int tile_rows = 64;      // rows a block covers (m <= 64)
constexpr int tile_cols = 64;      // columns a block covers
constexpr int chunk = 32;          // k positions per chunk
constexpr int unroll = 4;          // chunks loaded before their MMAs
constexpr int gemm_threads = 256;  // 8 warps: 2 (rows) x 4 (columns)
constexpr int partial_stride = tile_cols + 4;

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

__device__ __forceinline__ uint4 load16(const void* p, bool valid) {
  return valid ? __ldg(static_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
}

/// The sum's value in the output: rounded to T (as cuBLAS's T output), bias added in T's
/// precision as torch::linear's epilogue does (fp32 add, one rounding), stored as T or fp32.
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
  const int lane = threadIdx.x % 32, warp_id = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int wm = warp_id / 4, wn = warp_id % 4;
  const int col0 = blockIdx.x * tile_cols + wn * 16;
  const int row0 = wm * 32;
  const int chunks = k / chunk;
  const int rank = static_cast<int>(blockIdx.y);
  const int c_begin = static_cast<int>(static_cast<int64_t>(chunks) * rank / split);
  const int c_end = static_cast<int>(static_cast<int64_t>(chunks) * (rank + 1) / split);

  float acc[2][2][4] = {};
  // Rows and columns this thread loads (two m16 tiles: rows g and g + 8 of each; two n8 tiles).
  const T* x_row[2][2];
  bool x_ok[2][2];
  for (int i = 0; i < 2; ++i)
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + 16 * i + 8 * h + g;
      x_ok[i][h] = r < m;
      x_row[i][h] = x + static_cast<int64_t>(x_ok[i][h] ? r : 0) * ldx + 8 * t;
    }
  const T* w_row[2];
  bool w_ok[2];
  for (int j = 0; j < 2; ++j) {
    const int c = col0 + 8 * j + g;
    w_ok[j] = c < n;
    w_row[j] = w + static_cast<int64_t>(w_ok[j] ? c : 0) * k + 8 * t;
  }
  const bool active = row0 < m;  // a warp whose rows are all past m only joins the barriers

  auto step = [&](const uint4(&xa)[2][2], const uint4(&wb)[2]) {
    for (int i = 0; i < 2; ++i) {
      const uint32_t first[4] = {xa[i][0].x, xa[i][1].x, xa[i][0].y, xa[i][1].y};
      const uint32_t second[4] = {xa[i][0].z, xa[i][1].z, xa[i][0].w, xa[i][1].w};
      for (int j = 0; j < 2; ++j) {
        mma(acc[i][j], first, wb[j].x, wb[j].y, static_cast<T*>(nullptr));
        mma(acc[i][j], second, wb[j].z, wb[j].w, static_cast<T*>(nullptr));
      }
    }
  };
  if (active) {
    int c = c_begin;
    for (; c + unroll <= c_end; c += unroll) {
      uint4 wb[unroll][2], xa[unroll][2][2];
#pragma unroll
      for (int u = 0; u < unroll; ++u)
        for (int j = 0; j < 2; ++j) wb[u][j] = load16(w_row[j] + (c + u) * chunk, w_ok[j]);
#pragma unroll
      for (int u = 0; u < unroll; ++u)
        for (int i = 0; i < 2; ++i)
          for (int h = 0; h < 2; ++h) xa[u][i][h] = load16(x_row[i][h] + (c + u) * chunk, x_ok[i][h]);
#pragma unroll
      for (int u = 0; u < unroll; ++u) step(xa[u], wb[u]);
    }
    for (; c < c_end; ++c) {
      uint4 wb[2], xa[2][2];
      for (int j = 0; j < 2; ++j) wb[j] = load16(w_row[j] + c * chunk, w_ok[j]);
      for (int i = 0; i < 2; ++i)
        for (int h = 0; h < 2; ++h) xa[i][h] = load16(x_row[i][h] + c * chunk, x_ok[i][h]);
      step(xa, wb);
    }
  }
  // acc[i][j]: rows row0 + 16 i + g (+ 8 for [2], [3]), columns col0 + 8 j + 2 t (+ 1 for [1], [3]).
  if constexpr (split == 1) {
    if (!active) return;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        for (int q = 0; q < 4; ++q) {
          const int r = row0 + 16 * i + g + 8 * (q / 2), col = col0 + 8 * j + 2 * t + q % 2;
          if (r < m && col < n) store<T>(y, ldy, y_fp32, bias, r, col, acc[i][j][q]);
        }
  } else {
    __shared__ float partial[tile_rows * partial_stride];
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        for (int q = 0; q < 4; ++q) {
          const int r = row0 + 16 * i + g + 8 * (q / 2), col = wn * 16 + 8 * j + 2 * t + q % 2;
          partial[r * partial_stride + col] = acc[i][j][q];
        }
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    // Block `rank` sums rows rank * 64 / split .. over the cluster's blocks in rank order.
    const int band = tile_rows / split;
    for (int e = threadIdx.x; e < band * tile_cols; e += gemm_threads) {
      const int r = rank * band + e / tile_cols, col = e % tile_cols;
      const int out_col = blockIdx.x * tile_cols + col;
      if (r >= m || out_col >= n) continue;
      float sum = 0.0f;
      for (int q = 0; q < split; ++q) sum += cluster.map_shared_rank(partial, q)[r * partial_stride + col];
      store<T>(y, ldy, y_fp32, bias, r, out_col, sum);
    }
    cluster.sync();  // no block leaves while another still reads its partial
  }
}

/// Blocks of a cluster per column block: enough blocks to cover the GPU about twice (132 SMs on
/// the H200), at least two chunks per block.
int split_for(int64_t column_blocks, int64_t chunks) {
  int split = 1;
  while (split < 8 && column_blocks * split < 264 && chunks >= 4 * split) split *= 2;
  return split;
}

template <typename T>
int launch(const void* x, int64_t ldx, const void* w, const void* bias, void* y, int64_t ldy, bool y_fp32, int64_t m,
           int64_t n, int64_t k, cudaStream_t stream) {
  const int64_t column_blocks = (n + tile_cols - 1) / tile_cols;
  const int split = split_for(column_blocks, k / chunk);
  const dim3 grid(static_cast<unsigned>(column_blocks), static_cast<unsigned>(split));
  auto args = [&](auto kernel) {
    kernel<<<grid, gemm_threads, 0, stream>>>(static_cast<const T*>(x), ldx, static_cast<const T*>(w),
                                              static_cast<const T*>(bias), y, ldy, y_fp32, static_cast<int>(m),
                                              static_cast<int>(n), static_cast<int>(k));
  };
  switch (split) {
    case 1:
      args(skinny_gemm_kernel<T, 1>);
      break;
    case 2:
      args(skinny_gemm_kernel<T, 2>);
      break;
    case 4:
      args(skinny_gemm_kernel<T, 4>);
      break;
    default:
      args(skinny_gemm_kernel<T, 8>);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

bool skinny_gemm_fits(int64_t m, int64_t n, int64_t k, int64_t ldx, int64_t ldy) {
  return m >= 1 && m <= tile_rows && n >= 1 && n < (int64_t{1} << 31) / tile_cols && k >= chunk && k % chunk == 0 &&
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
