// mma_kernels: see fused_kernels.hpp mma_rows.
//
// The product is computed transposed, y^T = w x^T, so that the weight is the m16n8k16 tile's A
// operand (16 output features a tile) and the rows are its B operand (8 rows an n-tile, up to 8
// n-tiles for 64 rows). A block is 8 warps; a warp takes 32 weight rows (two m16 tiles: 32
// features, or with SwiGLU 16 gate features and their 16 up features) over part of d. The warps
// are laid out fw along the features and kw along d (fw x kw = 8): a block takes fw x 32 weight
// rows over a share of d, and the kw warps of a feature slice take the share's 32-element groups
// in turn (the share's group g to warp g % kw). Where d is cut into S shares, the S blocks of a
// feature slice are a thread-block cluster along y, and each writes a slice of their outputs,
// adding the blocks' sums in rank order through distributed shared memory. Every output is so one
// fixed sum (a warp's groups in order, then the kw warps in order, then the ranks in order)
// whatever the timing, rounded once (bias added first). The order depends on (kw, S) alone, which
// the launch takes from (n, d, b) alike with and without SwiGLU, so the two forms give the same
// bits.
//
// What goes where:
// - Weights go from global memory straight to registers (each weight element is used by one warp
//   only): a warp keeps `depth` groups of its 32 rows in flight (4 x 16 bytes a lane a group). The
//   first `depth` go before the programmatic wait, as async copies into shared memory (each thread
//   its own slots) read into registers after it: ptxas issues plain loads written before
//   griddepcontrol.wait after it (tests/policy/model/test_sass_order.py).
// - The block's share of the rows x (b rows x the share's elements) is copied once to shared memory
//   after the wait, in up to max_chunks pieces along d (cp.async groups), and every warp reads its
//   groups' columns from there: a block reads its share of x from L2 once, whatever its features.
//   The block waits for a piece (a barrier) only when its rounds reach it.
// - No barrier between rounds otherwise; at the end the warps' sums go to shared memory (over the
//   x copy), the kw warps' sums of a feature are added in order, and the cluster's blocks add
//   theirs.
//
// Rationale: the first form (4 warps a block of 64 features, d streamed through a ring of
// 32-element stages with a barrier each, clusters of up to 8 shares) was 2-7x slower than cuBLAS
// on an H100: too few warps on the multiprocessors, and a barrier and a ring slot's copies for
// every 16 mma (bench/results/2026-12-06-policy-h100-mma-ncu.md). Here every shape spreads over
// the device at 8 warps a block, and a warp's rounds are loads and mma alone.
//
// Both operands permute the sum's index alike (a fragment's k index is only an index of the sum):
// in k-step s of a 32-element group, a lane of quad position qd holds k slots 2qd + {0, 1} and
// 2qd + 8 + {0, 1}, taken as elements 8qd + 4s + {0, 1} and + {2, 3}. A lane's operand words for a
// group are then one 16-byte run of a weight row (rows gr and gr + 8 of the tile) and of an input
// row (row gr of the n-tile), each loaded as one vector.
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
constexpr int mma_warps = 8;
constexpr int mma_threads = mma_warps * warp;
constexpr int warp_rows = 32;  // weight rows a warp (two m16 tiles)
constexpr int group = 32;      // elements of d a group: a 16-byte vector a lane of a quad
constexpr int group_bytes = group * 2;
constexpr int depth = 4;       // groups of weights a warp keeps in flight
constexpr int max_chunks = 4;  // pieces the block's x share is copied in
constexpr int max_cluster = 8;
// Shared memory a block may use (the H100's and H200's 227 KiB less a margin).
constexpr int max_smem = 220 * 1024;
// The first `depth` groups' weights staged before the wait: [depth][2][2][thread] 16-byte vectors,
// ahead of the x copy.
constexpr int stage_bytes = depth * 2 * 2 * mma_threads * 16;

struct mma_args {
  const void* x_bd;
  const void* w_nd;
  const void* bias_n;
  void* y_bn;
  int64_t b, n, d;
  int fw;  // warps along the features (1, 2, 4 or 8); kw = 8 / fw along d
};

// A row of the block's x copy: the share's elements, padded so that a row starts 64 bytes past a
// 128-byte line from the last (two rows' 64-byte runs, read by a quarter warp, fall in 32 banks).
__host__ __device__ constexpr int64_t x_stride(int64_t groups) {
  return groups * group_bytes + (groups % 2 == 0 ? group_bytes : 0);
}

// The warps' sums: [warp][32 rows][8 NT + 1 floats].
template <int NT>
constexpr int sum_stride = NT * 8 + 1;
template <int NT>
constexpr size_t sums_bytes = static_cast<size_t>(mma_warps) * warp_rows* sum_stride<NT> * sizeof(float);

template <int NT>
size_t smem_of(int64_t share_groups) {
  const size_t x_bytes = static_cast<size_t>(NT * 8) * static_cast<size_t>(x_stride(share_groups));
  return std::max(stage_bytes + x_bytes, sums_bytes<NT>);
}

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

// 16 bytes of a weight, not kept in L1 (no other warp reads them).
__device__ __forceinline__ uint4 load_weight(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// copy_wait for a count known only at run time (0 .. max_chunks; more waits for max_chunks).
__device__ __forceinline__ void copy_wait_at_most(int pending) {
  switch (pending) {
    case 0:
      copy_wait<0>();
      break;
    case 1:
      copy_wait<1>();
      break;
    case 2:
      copy_wait<2>();
      break;
    case 3:
      copy_wait<3>();
      break;
    default:
      static_assert(max_chunks == 4, "one case a pending count");
      copy_wait<4>();
      break;
  }
}

// The weight row of warp tile p's row i (0 .. 31), or -1 past the features. Plain: rows p * 32 + i.
// Silu: i < 16 the gate feature p * 16 + i, else its up feature n / 2 rows further.
template <bool Silu>
__device__ __forceinline__ int64_t weight_row(int64_t p, int i, int64_t n) {
  if constexpr (Silu) {
    const int64_t f = n / 2, j = p * (warp_rows / 2) + i % (warp_rows / 2);
    return j < f ? j + (i >= warp_rows / 2 ? f : 0) : -1;
  }
  const int64_t j = p * warp_rows + i;
  return j < n ? j : -1;
}

// Grid (feature slices, S), cluster (1, S) where S > 1; NT n-tiles of 8 rows (rows b .. 8 NT - 1
// zero).
template <typename T, int NT, bool Silu>
__global__ void __launch_bounds__(mma_threads, 1) mma_rows_kernel(const mma_args a) {
  allow_dependents();
  extern __shared__ __align__(16) unsigned char mma_smem[];
  const T* x = static_cast<const T*>(a.x_bd);
  const auto* w = static_cast<const unsigned char*>(a.w_nd);
  const int lane = threadIdx.x % warp, wid = threadIdx.x / warp, gr = lane / 4, qd = lane % 4;
  const int fw = a.fw, kw = mma_warps / fw, fwi = wid % fw, kwi = wid / fw;
  const int shares = static_cast<int>(gridDim.y), rank = static_cast<int>(blockIdx.y);
  // 32-bit index math (d and b are small: mma_rows_fits bounds d by shared memory), the divisions
  // by powers of two as shifts. Measured on an H100 with the epilogue's below: a layer's four
  // projections 86.0 us, were 91.0 (bench/results/2026-12-07-policy-h100-mma-no-divisions.md).
  const int d = static_cast<int>(a.d), b = static_cast<int>(a.b), kw_shift = __ffs(kw) - 1;
  const int64_t p = static_cast<int64_t>(blockIdx.x) * fw + fwi;  // the warp's tile of 32 weight rows
  // The block's share of d's groups, and its rounds (a group a warp of a feature slice a round).
  const int all_groups = (d + group - 1) / group;
  const int g0 = all_groups * rank / shares, g1 = all_groups * (rank + 1) / shares, groups = g1 - g0;
  const int rounds = (groups + kw - 1) >> kw_shift;
  const int stride = static_cast<int>(x_stride(groups));

  // The lane's four weight rows (tile m's rows gr and gr + 8), as byte offsets, -1 past the
  // features; a group's vector is 16 bytes at element 32 g + 8 qd of each.
  int64_t row_at[2][2];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = weight_row<Silu>(p, m * 16 + h * 8 + gr, a.n);
      row_at[m][h] = row >= 0 ? (row * a.d + qd * 8) * 2 : -1;
    }
  const auto group_of = [&](int round) { return g0 + (round << kw_shift) + kwi; };
  const auto in_d = [&](int round) {
    const int g = group_of(round);
    return round < rounds && g < g1 && g * group + qd * 8 < d;
  };
  const auto load_group = [&](int round, uint4(&v)[2][2]) {
    const bool valid = in_d(round);
    const int at = group_of(round) * group_bytes;
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        v[m][h] = valid && row_at[m][h] >= 0 ? load_weight(w + row_at[m][h] + at) : make_uint4(0, 0, 0, 0);
  };

  // Rounds 0 .. depth - 1's weights, before the wait (no kernel of a step writes weights): copy
  // group 0.
  uint4* staged = reinterpret_cast<uint4*>(mma_smem);
  const auto staged_at = [&](int s, int m, int h) {
    return staged + ((s * 2 + m) * 2 + h) * mma_threads + threadIdx.x;
  };
#pragma unroll
  for (int s = 0; s < depth; ++s) {
    const bool valid = in_d(s);
    const int at = group_of(s) * group_bytes;
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bool mine = valid && row_at[m][h] >= 0;
        copy_16_or_zero(staged_at(s, m, h), mine ? w + row_at[m][h] + at : w, mine);
      }
  }
  copy_commit();
  dependency_wait();
  unsigned char* xs_base = mma_smem + stage_bytes;

  // The x share's pieces: piece c is rounds [rounds c / chunks, rounds (c + 1) / chunks), its
  // groups one run of d; rows past b and vectors past d are zero-filled.
  const int chunks = rounds < 1 ? 1 : (rounds < max_chunks ? rounds : max_chunks);
  const auto round_of_chunk = [&](int c) { return rounds * c / chunks; };
  for (int c = 0; c < chunks; ++c) {
    const int lo_round = round_of_chunk(c) << kw_shift, hi_round = round_of_chunk(c + 1) << kw_shift;
    const int lo = lo_round < groups ? lo_round : groups, hi = hi_round < groups ? hi_round : groups;
    const int vectors = (hi - lo) * (group / 8);
    if (vectors > 0) {
      // Thread t's copies are (row, vector) = divmod(t + 256 i, vectors), walked without a division
      // a copy.
      const int row_step = mma_threads / vectors, vector_step = mma_threads % vectors;
      int r = threadIdx.x / vectors, v = threadIdx.x % vectors;
      for (; r < NT * 8; r += row_step, v += vector_step) {
        if (v >= vectors) v -= vectors, ++r;
        if (r >= NT * 8) break;
        const int k = (g0 + lo) * group + v * 8;
        const bool valid = r < b && k < d;
        copy_16_or_zero(xs_base + r * stride + lo * group_bytes + v * 16, valid ? x + r * d + k : x, valid);
      }
    }
    copy_commit();
  }
  // The staged weights (copy group 0, older than the chunks' groups 1 .. chunks), into registers.
  copy_wait_at_most(chunks);
  uint4 wv[depth][2][2];
#pragma unroll
  for (int s = 0; s < depth; ++s)
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) wv[s][m][h] = *staged_at(s, m, h);

  float acc[2][NT][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][t][i] = 0.0f;

  int next_chunk = 0;
  for (int r0 = 0; r0 < rounds; r0 += depth) {
#pragma unroll
    for (int s = 0; s < depth; ++s) {
      const int round = r0 + s;
      if (round >= rounds) break;
      if (next_chunk < chunks && round == round_of_chunk(next_chunk)) {  // the same at every warp
        copy_wait_at_most(chunks - 1 - next_chunk);
        __syncthreads();
        ++next_chunk;
      }
      const int lg = (round << kw_shift) + kwi;  // the group within the share
      if (lg < groups) {
        const unsigned char* xs = xs_base + gr * stride + lg * group_bytes + qd * 16;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          const uint4 xv = *reinterpret_cast<const uint4*>(xs + t * 8 * stride);
#pragma unroll
          for (int m = 0; m < 2; ++m) {
            mma_16816<T>(acc[m][t], wv[s][m][0].x, wv[s][m][1].x, wv[s][m][0].y, wv[s][m][1].y, xv.x, xv.y);
            mma_16816<T>(acc[m][t], wv[s][m][0].z, wv[s][m][1].z, wv[s][m][0].w, wv[s][m][1].w, xv.z, xv.w);
          }
        }
      }
      load_group(round + depth, wv[s]);
    }
  }
  copy_wait<0>();   // (a share of no rounds waited for nothing above)
  __syncthreads();  // every warp done with the x copy: the sums take its memory

  // C fragment: rows gr, gr + 8 of tile m are the warp's weight rows m * 16 + gr (+ 8); columns
  // 2qd, 2qd + 1 of n-tile t are input rows t * 8 + 2qd (+ 1).
  constexpr int ss = sum_stride<NT>;
  float* sums = reinterpret_cast<float*>(mma_smem);
  float* mine = sums + wid * warp_rows * ss;
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) mine[(m * 16 + gr + (i / 2) * 8) * ss + t * 8 + 2 * qd + i % 2] = acc[m][t][i];
  __syncthreads();
  // The kw warps' sums of a feature slice, in order, into the slice's first (warp fwi). A thread
  // keeps one weight row of the block (fw x 32 of them, a power of two dividing the block) and
  // takes every (256 / (fw x 32))-th row: no division a sum. Rationale: with a division (int64)
  // an output here and below, the epilogue was most of a warp's ~4,700 instructions at gate/up
  // (Nsight Compute on an H100, bench/results/2026-12-07-policy-h100-mma-rewrite-join.md); without
  // them gate/up took 35.6 us, was 36.6: the warps then wait on the weights' loads instead
  // (bench/results/2026-12-07-policy-h100-mma-no-divisions.md).
  const int rows = static_cast<int>(b < NT * 8 ? b : NT * 8);
  if (kw > 1) {
    const int span = fw * warp_rows, shift = __ffs(span) - 1;
    const int fi = threadIdx.x & (span - 1);
    float* mine_row = sums + fi * ss;      // warp f's row i is at (f * 32 + i) * ss
    const int step = fw * warp_rows * ss;  // from warp (k, f) to warp (k + 1, f)
    for (int r = threadIdx.x >> shift; r < rows; r += mma_threads >> shift) {
      float sum = mine_row[r];
      for (int k = 1; k < kw; ++k) sum += mine_row[k * step + r];
      mine_row[r] = sum;
    }
  }
  cg::cluster_group cluster = cg::this_cluster();
  if (shares > 1)
    cluster.sync();  // every block's sums written
  else
    __syncthreads();

  // Every block of the cluster writes a slice of the rows: each output's sums from every block,
  // loaded at once (independent loads of distributed shared memory), then added in rank order. A
  // thread keeps one output column (a power of two of them a row, dividing the block).
  const float* peer[max_cluster];
#pragma unroll
  for (int q = 0; q < max_cluster; ++q) peer[q] = q < shares && shares > 1 ? cluster.map_shared_rank(sums, q) : sums;
  const auto sum_of = [&](int at) {
    float v[max_cluster];
#pragma unroll
    for (int q = 0; q < max_cluster; ++q)
      if (q < shares) v[q] = peer[q][at];
    float sum = v[0];
#pragma unroll
    for (int q = 1; q < max_cluster; ++q)
      if (q < shares) sum += v[q];
    return sum;
  };
  T* y = static_cast<T*>(a.y_bn);
  const T* bias = static_cast<const T*>(a.bias_n);
  const int64_t first_tile = static_cast<int64_t>(blockIdx.x) * fw;
  constexpr int per_tile = Silu ? warp_rows / 2 : warp_rows;  // outputs of a row a warp tile
  const int per_row = fw * per_tile, shift = __ffs(per_row) - 1;
  const int c = threadIdx.x & (per_row - 1), f = c / per_tile, i = c % per_tile;
  const int64_t j = (first_tile + f) * per_tile + i, out_n = Silu ? a.n / 2 : a.n;
  const int at = (f * warp_rows + i) * ss, up_at = at + per_tile * ss;
  const auto bias_of = [&](int row_in_tile) {
    return bias != nullptr ? to_f(bias[weight_row<Silu>(first_tile + f, row_in_tile, a.n)]) : 0.0f;
  };
  const float bias_c = j < out_n ? bias_of(i) : 0.0f, bias_up = Silu && j < out_n ? bias_of(i + per_tile) : 0.0f;
  const int r_lo = rows * rank / shares, r_hi = rows * (rank + 1) / shares;
  if (j < out_n)
    for (int r = r_lo + (threadIdx.x >> shift); r < r_hi; r += mma_threads >> shift) {
      if constexpr (Silu)
        y[r * out_n + j] =
            silu_times<T>(round_to<T>(sum_of(at + r) + bias_c), round_to<T>(sum_of(up_at + r) + bias_up));
      else
        y[r * out_n + j] = from_f<T>(sum_of(at + r) + bias_c);
    }
  if (shares > 1) cluster.sync();  // every block done reading the others' sums before they exit
}

int device_sms() {
  return multiprocessor_count() > 0 ? multiprocessor_count() : 132;
}

std::atomic<int> max_shares{max_cluster};
std::atomic<int> forced_fw{0};
std::atomic<int> forced_shares{0};
// Clusters of S blocks (index S, 1-8) the device runs at once, read at the first instance's
// readying (0 until then): a cluster's blocks share a GPC, so clusters of 7 leave some of a GPC's
// multiprocessors idle and run fewer blocks at once than clusters of 4.
std::atomic<int> clusters_at_once_of[max_cluster + 1] = {};

// How a shape launches: warps along the features and shares of d.
struct shape_choice {
  int fw = 2;
  int shares = 1;
};

// The launch of (b, n, d): kw and S from n's weight rows and d alone (so a SwiGLU form and its
// plain form sum alike), each candidate (fw in 1, 2, 4, 8; S in 1 .. max_shares) scored by the
// bytes its busiest multiprocessor takes in (weights, its x share, the cluster's sums) times its
// waves (clusters_at_once_of). Rationale: weights are read once whatever the layout; what a layout
// adds is x read again for every feature slice (b x d x 2 bytes each), the clusters' sums, and
// waves.
shape_choice choose(int64_t b, int64_t n, int64_t d, int sms) {
  shape_choice best;
  if (const int f = forced_fw.load(), s = forced_shares.load(); f > 0 && s > 0) return {f, s};
  const int64_t tiles = (n + warp_rows - 1) / warp_rows, groups = (d + group - 1) / group;
  const int64_t rows8 = (b + 7) / 8 * 8;
  double best_cost = 0;
  bool have = false;
  for (int fw = 1; fw <= mma_warps; fw *= 2) {
    const int kw = mma_warps / fw;
    const int64_t slices = (tiles + fw - 1) / fw;
    for (int s = 1; s <= max_shares.load(); ++s) {
      const int64_t share = (groups + s - 1) / s;
      if (s > 1 && share < kw) break;  // a share's groups must reach every warp
      if (stage_bytes + rows8 * x_stride(share) > max_smem) continue;
      const int known = clusters_at_once_of[s].load();
      const int64_t at_once = known > 0 ? known : sms / s, waves = (slices + at_once - 1) / at_once;
      const double weights = static_cast<double>(fw) * warp_rows * share * group_bytes;
      const double xs = static_cast<double>(rows8) * share * group_bytes;
      const double cluster = s > 1 ? static_cast<double>(fw) * warp_rows * rows8 * 4 : 0.0;
      const double cost = static_cast<double>(waves) * (weights + xs + cluster);
      if (!have || cost < best_cost) {
        have = true;
        best_cost = cost;
        best = {fw, s};
      }
    }
  }
  return best;
}

// Blocks of an instance a multiprocessor holds, once its shared memory is allowed (0 until then).
template <typename T, int NT, bool Silu>
std::atomic<int> resident_blocks{0};

// Allows the instance max_smem of shared memory (over the 48 KiB default) and reads its occupancy
// at the most it uses: not during a graph capture (stream_capturing), so mma_rows_prepare runs
// first.
template <typename T, int NT, bool Silu>
int prepare_one() {
  if (resident_blocks<T, NT, Silu>.load() > 0) return 0;
  auto* kernel = mma_rows_kernel<T, NT, Silu>;
  if (const auto set = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem);
      set != cudaSuccess) {
    cudaGetLastError();
    return static_cast<int>(set);
  }
  int blocks = 0;
  if (const auto got = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, mma_threads, max_smem);
      got != cudaSuccess || blocks < 1) {
    cudaGetLastError();
    return static_cast<int>(got != cudaSuccess ? got : cudaErrorInvalidConfiguration);
  }
  resident_blocks<T, NT, Silu> = blocks;
  if (clusters_at_once_of[1].load() == 0)
    for (int s = max_cluster; s >= 1; --s) {
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(1, static_cast<unsigned>(s));
      config.blockDim = dim3(mma_threads);
      config.dynamicSmemBytes = max_smem;
      cudaLaunchAttribute cluster[1];
      cluster[0].id = cudaLaunchAttributeClusterDimension;
      cluster[0].val.clusterDim.x = 1;
      cluster[0].val.clusterDim.y = static_cast<unsigned>(s);
      cluster[0].val.clusterDim.z = 1;
      config.attrs = cluster;
      config.numAttrs = 1;
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess || clusters < 1) {
        cudaGetLastError();
        clusters = blocks * device_sms() / s;  // the device's blocks as if clusters packed them
      }
      clusters_at_once_of[s] = clusters;
    }
  return 0;
}

template <typename T, int NT = 1>
int prepare_all() {
  if (const int err = prepare_one<T, NT, false>(); err != 0) return err;
  if (const int err = prepare_one<T, NT, true>(); err != 0) return err;
  if constexpr (NT < 8) return prepare_all<T, NT + 1>();
  return 0;
}

// An instance's launch: the grid (feature slices, shares), a cluster of `shares` blocks along y,
// and with `programmatic` the programmatic attribute. `attributes` must outlive the config; a.fw
// is set.
template <typename T, int NT, bool Silu>
cudaLaunchConfig_t launch_config(mma_args& a, cudaStream_t stream, bool programmatic,
                                 cudaLaunchAttribute (&attributes)[2]) {
  const auto choice = choose(a.b, a.n, a.d, device_sms());
  a.fw = choice.fw;
  const int64_t tiles = Silu ? (a.n / 2 + warp_rows / 2 - 1) / (warp_rows / 2) : (a.n + warp_rows - 1) / warp_rows;
  const int64_t slices = (tiles + choice.fw - 1) / choice.fw;
  const int64_t groups = (a.d + group - 1) / group, share = (groups + choice.shares - 1) / choice.shares;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(slices), static_cast<unsigned>(choice.shares));
  config.blockDim = dim3(mma_threads);
  config.dynamicSmemBytes = smem_of<NT>(share);
  config.stream = stream;
  int count = 0;
  if (programmatic) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (choice.shares > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = 1;
    attributes[count].val.clusterDim.y = static_cast<unsigned>(choice.shares);
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
int launch_mma(mma_args a, cudaStream_t stream) {
  if constexpr (NT < 8) {
    if (a.b > NT * 8) return launch_mma<T, NT + 1, Silu>(a, stream);
  }
  if (const int err = ready<T, NT, Silu>(stream); err != 0) return err;
  cudaLaunchAttribute attributes[2];
  const auto config = launch_config<T, NT, Silu>(a, stream, programmatic_launch(), attributes);
  if (config.dynamicSmemBytes > static_cast<size_t>(max_smem))  // a forced launch of too few shares
    return static_cast<int>(cudaErrorInvalidValue);
  return static_cast<int>(cudaLaunchKernelEx(&config, mma_rows_kernel<T, NT, Silu>, a));
}

template <typename T, int NT, bool Silu>
mma_plan plan_mma(mma_args a) {
  if constexpr (NT < 8) {
    if (a.b > NT * 8) return plan_mma<T, NT + 1, Silu>(a);
  }
  mma_plan plan;
  if ((plan.err = ready<T, NT, Silu>(nullptr)) != 0) return plan;
  cudaLaunchAttribute attributes[2];
  const auto config = launch_config<T, NT, Silu>(a, nullptr, /*programmatic=*/false, attributes);
  plan.tiles = config.gridDim.x;
  plan.shares = static_cast<int>(config.gridDim.y);
  plan.feature_warps = a.fw;
  plan.blocks_per_sm = resident_blocks<T, NT, Silu>.load();
  if (plan.shares == 1) {  // no cluster: the device holds blocks_per_sm blocks a multiprocessor
    plan.clusters_at_once = plan.blocks_per_sm * device_sms();
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
  // d must fit one block's shared memory once cut into max_cluster shares.
  const int64_t share = ((d + group - 1) / group + max_cluster - 1) / max_cluster;
  return (dtype == element::bf16 || dtype == element::fp16) && b >= 1 && b <= mma_max_rows && n >= 1 && d >= 8 &&
         d % 8 == 0 && (!silu_mul || n % 2 == 0) && (n + warp_rows - 1) / warp_rows <= 0x7fffffff &&
         stage_bytes + 64 * x_stride(share) <= max_smem;
}

void set_mma_max_shares(int shares) {
  max_shares = std::clamp(shares, 1, max_cluster);
}

int set_mma_launch(int feature_warps, int shares) {
  if (feature_warps == 0 && shares == 0) {
    forced_fw = 0;
    forced_shares = 0;
    return 0;
  }
  const bool fw_ok = feature_warps == 1 || feature_warps == 2 || feature_warps == 4 || feature_warps == 8;
  if (!fw_ok || shares < 1 || shares > max_cluster) return static_cast<int>(cudaErrorInvalidValue);
  forced_fw = feature_warps;
  forced_shares = shares;
  return 0;
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
  const mma_args a{nullptr, nullptr, nullptr, nullptr, b, n, d, 0};
  if (dtype == element::bf16)
    return silu_mul ? plan_mma<__nv_bfloat16, 1, true>(a) : plan_mma<__nv_bfloat16, 1, false>(a);
  return silu_mul ? plan_mma<__half, 1, true>(a) : plan_mma<__half, 1, false>(a);
}

int mma_rows(element dtype, const void* x_bd, const void* w_nd, const void* bias_n, void* y_bn, int64_t b, int64_t n,
             int64_t d, bool silu_mul, void* stream) {
  if (!mma_rows_fits(dtype, b, n, d, silu_mul) || !aligned16(x_bd) || !aligned16(w_nd))
    return static_cast<int>(cudaErrorInvalidValue);
  const mma_args a{x_bd, w_nd, bias_n, y_bn, b, n, d, 0};
  auto* s = static_cast<cudaStream_t>(stream);
  if (dtype == element::bf16)
    return silu_mul ? launch_mma<__nv_bfloat16, 1, true>(a, s) : launch_mma<__nv_bfloat16, 1, false>(a, s);
  return silu_mul ? launch_mma<__half, 1, true>(a, s) : launch_mma<__half, 1, false>(a, s);
}

}  // namespace caf_agent::policy::kernels
