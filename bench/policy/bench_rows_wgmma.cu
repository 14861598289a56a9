// bench_rows_wgmma: whether a projection of our own on Hopper's asynchronous tensor-core path (TMA
// tiles into a ring of shared memory, wgmma reading them there) beats cuBLAS at the cached agent
// workload's decode shapes: y = x w^T for 64 rows of x (bf16) and the 0.5B model's four fused
// weights (q/k/v 1152 x 896, o 896 x 896, gate/up 9728 x 896, down 896 x 4864), where cuBLAS reads
// the weights at ~1.2-2.3 TB/s of the H200's 4.8 (docs/POLICY_MODEL_PERF.md, "What the open targets
// need"), and where policy/model/mma_kernels.cu's mma.sync form was 3.3x slower than cuBLAS.
//
// The kernel (`rows_wgmma`): y^T = w x^T, the weight the wgmma's A operand (64 features a tile,
// m64), the rows its B operand (n64: rows past `rows` are the tensor map's zero fill), k16 steps.
// A block is two consumer warpgroups (each `Tiles` m64 tiles of weight rows, so a block has
// 128 * Tiles) and one producer warp whose lane 0 issues the tensor copies (`cp.async.bulk.tensor`,
// 128-byte swizzle) of each 64-element chunk of d: the block's weight rows and the 64 rows of x, into
// a ring of `Stages` stages, each completing on its stage's mbarrier; the consumers' warps free a
// stage on another mbarrier once their wgmma on it are done. The weights' first stages are issued
// before the programmatic wait (`--pdl 1`: they do not depend on the kernel before), the x tiles
// after it. d is cut into S shares (1-16; over 8 a non-portable cluster size, skipped where
// cudaOccupancyMaxActiveClusters says none fits), a thread-block cluster of S blocks along d whose
// fp32 sums meet in distributed shared memory (over the drained ring): block r of a cluster adds the
// S blocks' sums for its slice of the rows in rank order, so every output is one fixed sum, plus the
// bias if any, rounded once to bf16. `--exchange batched` (the default) loads four blocks' values at
// a time before adding them; `serial` loads one block's and adds it before the next (the form first
// measured, which Nsight Compute found waiting on those loads): the same sums either way. With the SwiGLU epilogue (the
// fused gate/up weight, gate rows then up rows), a block's first warpgroup takes gate rows and its second the same up
// rows, and the block writes silu(gate) * up, gate and up rounded first as silu_mul's inputs are: no silu_mul kernel
// after it.
//
// Launches tried: (m64 tiles a warpgroup, stages, chunks of d a stage) = (1, 8, 1), (2, 4, 1), (1, 2,
// 4) and (1, 4, 2), one block a multiprocessor; (1, 4, 1), (2, 2, 1) and (1, 2, 2), two; each at 1,
// 2, 3, 4, 6, 8, 12 and 16 shares. And with x resident (`XRes`: a block's x tiles copied once, after
// the programmatic wait, into room of their own for 14, 8 or 7 chunks of d, so the ring carries the
// weights alone, where x was a third of every stage's bytes): (1, 6, 1) and (2, 3, 1) with room for
// 14, (1, 8, 1) for 8, one block a multiprocessor; (1, 3, 1) for 7, two; at the share counts whose
// chunks a block fit the room. With several chunks a stage a weight row is read 256 or 512
// contiguous bytes at a time instead of 128 (the stall samples of 2026-12-07 had the consumers
// waiting on the copies with DRAM at ~40% of its peak). Shapes: q/k/v with its bias,
// o, gate/up plain and with the SwiGLU epilogue (cuBLAS's row then runs silu_mul after it), down.
//
// What it prints: a markdown table, a row a (shape, launch) and cuBLAS's (cublasGemmEx, bf16 in and
// out, fp32 compute, the algorithm cuBLAS picks: what torch::linear calls; the bias and silu_mul as
// kernels after it), with a launch's median time over `--reps` replays of a CUDA graph of launches
// back to back (cudaEvent; the host's work a launch untimed, as in the engine's graphs), each launch
// over its own copy of the weights (the copies span 256 MB, so they come from memory, not L2, as a
// decode step's 24 layers do), the weights', x's and y's bytes over that
// time, and the largest error against a float reference kernel (then the bias and silu in double on
// the host), relative to the output's largest magnitude. Before timing, every launch is checked at
// rows 1, 7, 33 and 64 (the tensor map's zero fill); a launch whose error exceeds 2^-7 of the
// output's scale fails the run (exit code 3), its row marked FAILED and stderr saying how many
// outputs were off, the first, and where in its row or column the value it got belongs; a launch
// that does not finish in 20 s ends the run (exit code 4) naming it.
//
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o bench_rows_wgmma bench/policy/bench_rows_wgmma.cu
//   -lcublas -Xlinker -rpath=$(dirname $(which nvcc))/../lib64   (cuBLAS found where nvcc's is)
//   ./bench_rows_wgmma [--rows 64] [--reps 10] [--pdl 1] [--shape qkv|o|gate_up|gate_up_silu|down]
//                      [--launch TILES,STAGES,SHARES[,CHUNKS[,XRES]]]   (that launch alone beside cuBLAS: e.g.
//                      under a profiler; XRES 0 for x in the ring, or the room of a resident-x form)
//                      [--exchange batched|serial]
#include <cooperative_groups.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace cg = cooperative_groups;

constexpr const char* bench_name = "bench_rows_wgmma";
#include "standalone_check.cuh"

namespace {

constexpr int chunk = 64;          // d elements a chunk: 128 bytes of bf16, one 128-byte swizzle row
constexpr int n_rows = 64;         // the wgmma's n: rows of x, padded with the tensor map's zeros
constexpr int consumer_warps = 8;  // two warpgroups
constexpr int threads = (consumer_warps + 1) * 32;
constexpr int smem_limit = 227 * 1024;
constexpr double error_limit = 1.0 / 128;  // of the output's largest magnitude

// Shared memory of a block: the ring's stages, then (XRes > 0) the resident x tiles, then the
// stages' mbarriers and x's. A stage holds Chunks consecutive 64-element chunks of d: each chunk's
// tile of the weights' 128 * Tiles rows, then (XRes = 0) each chunk's tile of x's 64 rows (a tile's
// rows one 128-byte chunk each, swizzled). With XRes > 0 the block's x tiles (up to XRes chunks of d)
// are copied once, after the programmatic wait, into a region of their own, and the ring carries
// the weights alone. Once the ring is drained the sums a row (fp32, padded) take its place: 4
// stages of 128 features and one chunk leave room for 2 blocks a multiprocessor.
template <int Tiles, int Stages, int Chunks, int XRes = 0>
struct layout {
  static constexpr int features = 2 * 64 * Tiles;
  static constexpr int w_bytes = features * chunk * 2;  // a chunk's weight tile
  static constexpr int x_bytes = n_rows * chunk * 2;    // a chunk's x tile
  static constexpr int stage_bytes = Chunks * (w_bytes + (XRes > 0 ? 0 : x_bytes));
  static constexpr int ring_bytes = Stages * stage_bytes;
  static constexpr int sums_stride = features + 4;  // floats: a warp's stores fall on 32 banks
  static constexpr int sums_bytes = n_rows * sums_stride * 4;
  static constexpr int body = ring_bytes > sums_bytes ? ring_bytes : sums_bytes;
  static constexpr int x_region = XRes * x_bytes;
  static constexpr int bytes = 1024 + body + x_region + 16 * Stages + 8 * (XRes > 0 ? XRes : 1);
  static_assert(Stages >= 2 && bytes <= smem_limit, "the ring takes 2 stages and fits a multiprocessor");
  static_assert(w_bytes % 1024 == 0 && stage_bytes % 1024 == 0 && body % 1024 == 0,
                "a 128-byte swizzle tile starts at 1 KiB");
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void bar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void bar_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void bar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Waits until the barrier's phase of this parity has completed.
__device__ __forceinline__ void bar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(smem_addr(bar)), "r"(parity)
                 : "memory");
  } while (!done);
}

// A 2-D tile of a tensor map (coordinates: the inner, then the outer dimension) into shared memory,
// completing on bar.
__device__ __forceinline__ void tile_copy(void* dst, const CUtensorMap* map, int inner, int outer, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(outer), "r"(smem_addr(bar))
      : "memory");
}

// A shared-memory matrix descriptor of a K-major tile in the 128-byte swizzle: rows of 128 bytes, 8
// rows (1 KiB) from one core-matrix group to the next; the k16 steps within a row move the start by
// 32 bytes.
__device__ __forceinline__ uint64_t sw128_desc(const void* p) {
  const uint64_t start = (smem_addr(p) & 0x3FFFF) >> 4;
  return start | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void fence_operands(float (&d)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (64 features x 64 rows, fp32, the m64n64 accumulator's layout) += a (64 x 16) b (16 x 64).
__device__ __forceinline__ void wgmma_64x64x16(float (&d)[32], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b));
}

// Chunks > 1: each row of the weights is read Chunks * 128 contiguous bytes at a time (a stage's
// tiles are consecutive chunks of d), where one chunk a stage reads 128 bytes of each row and the
// next row's 128 bytes lie d * 2 bytes on; the sums are the same (the chunks in the same order).
// y = x w^T (+ bias) for `rows` rows; with Silu, w is [gate; up] (n = 2 i rows) and y [rows, i] is
// silu(gate) * up, each of gate and up rounded first as silu_mul's inputs are. Block (rank, tile):
// plain, the weight rows tile * F ..; Silu, gate rows tile * F/2 .. into the first warpgroup's tiles
// and the same up rows into the second's.
template <int Tiles, int Stages, int Chunks, bool Silu, int Group, int XRes>
__global__ void __launch_bounds__(threads, 1)
    rows_wgmma(const __grid_constant__ CUtensorMap w_map, const __grid_constant__ CUtensorMap x_map,
               __nv_bfloat16* __restrict__ y, const __nv_bfloat16* __restrict__ bias, int rows, int n, int chunks,
               int pdl) {
  using L = layout<Tiles, Stages, Chunks, XRes>;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  // The base rounded up to 1 KiB of the shared window, as an offset from the array so the compiler
  // keeps its accesses in shared memory; the address read through asm so the rounding is done at
  // run time (the declared alignment would let the compiler fold it to nothing).
  uint32_t base;
  asm volatile("mov.u32 %0, %1;" : "=r"(base) : "r"(smem_addr(smem_raw)));
  uint8_t* smem = smem_raw + ((1024 - (base & 1023)) & 1023);
  float* sums = reinterpret_cast<float*>(smem);
  uint8_t* x_res = smem + L::body;  // XRes > 0: x's tiles, step i's chunk j at (i * Chunks + j)
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L::body + L::x_region);
  uint64_t* empty = full + Stages;
  uint64_t* x_full = empty + Stages;  // XRes > 0: x tile c copied (c = i * Chunks + j)

  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int shares = static_cast<int>(cluster.num_blocks());
  const int c0 = rank * chunks / shares;
  const int count = (rank + 1) * chunks / shares - c0;  // the block's chunks of d
  const int steps = (count + Chunks - 1) / Chunks;      // its stages' worth of them
  if (XRes > 0 && steps * Chunks > XRes) __trap();      // the host launches only where x fits its room
  // Where step i's chunk j starts in d. A last step with fewer chunks than a stage holds reads its
  // missing ones from past d, which the tensor copies fill with zeros (and count as copied): their
  // products are zeros, which leave every sum as it was (a sum begun at +0 never becomes -0), so the
  // consumers run the same wgmma every step (a branch around them would serialize them).
  const auto chunk_at = [&](int i, int j) {
    return i * Chunks + j < count ? (c0 + i * Chunks + j) * chunk : chunks * chunk;
  };
  constexpr int half = L::features / 2;
  const int f0 = blockIdx.y * (Silu ? half : L::features);  // the block's first output feature
  const int outputs = Silu ? n / 2 : n;
  const int warp_id = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;

  if (pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (threadIdx.x == 0) {
    for (int s = 0; s < Stages; ++s) {
      bar_init(&full[s], 1);
      bar_init(&empty[s], consumer_warps);
    }
    for (int c = 0; c < XRes; ++c) bar_init(&x_full[c], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp_id == consumer_warps) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&w_map)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&x_map)) : "memory");
      // Step i's tiles into stage s: the weights' (before the programmatic wait where they may be),
      // then x's; both complete on the stage's full barrier. XRes > 0: x's go to their own region
      // and complete each on its own barrier (x_full), all of them issued after the wait, so the
      // consumers start on the first chunk while the rest arrive.
      const auto weights = [&](int i, int s) {
        for (int j = 0; j < Chunks; ++j) {
          uint8_t* dst = smem + s * L::stage_bytes + j * L::w_bytes;
          const int at = chunk_at(i, j);
          if constexpr (Silu) {
            tile_copy(dst, &w_map, at, f0, &full[s]);
            tile_copy(dst + half * 128, &w_map, at, n / 2 + f0, &full[s]);
          } else {
            tile_copy(dst, &w_map, at, f0, &full[s]);
          }
        }
      };
      const auto xs = [&](int i, int s) {
        for (int j = 0; j < Chunks; ++j) {
          if constexpr (XRes > 0)
            tile_copy(x_res + (i * Chunks + j) * L::x_bytes, &x_map, chunk_at(i, j), 0, &x_full[i * Chunks + j]);
          else
            tile_copy(smem + s * L::stage_bytes + Chunks * L::w_bytes + j * L::x_bytes, &x_map, chunk_at(i, j), 0,
                      &full[s]);
        }
      };
      const auto expect = [&](int s) { bar_expect(&full[s], L::stage_bytes); };
      const int early = steps < Stages ? steps : Stages;
      for (int i = 0; i < early; ++i) {
        expect(i);
        weights(i, i);
      }
      if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
      if constexpr (XRes > 0) {
        for (int c = 0; c < steps * Chunks; ++c) bar_expect(&x_full[c], L::x_bytes);
        for (int i = 0; i < steps; ++i) xs(i, 0);
      } else {
        for (int i = 0; i < early; ++i) xs(i, i);
      }
      for (int i = early; i < steps; ++i) {
        const int s = i % Stages;
        bar_wait(&empty[s], ((i / Stages) & 1) ^ 1);
        expect(s);
        weights(i, s);
        if constexpr (XRes == 0) xs(i, s);
      }
    }
    __syncwarp();
  } else {
    const int wg = warp_id / 4;
    float acc[Tiles][32];
#pragma unroll
    for (int t = 0; t < Tiles; ++t)
#pragma unroll
      for (int i = 0; i < 32; ++i) acc[t][i] = 0.f;
    for (int i = 0; i < steps; ++i) {
      const int s = i % Stages;
      bar_wait(&full[s], (i / Stages) & 1);
      if constexpr (XRes > 0)
        for (int j = 0; j < Chunks; ++j) bar_wait(&x_full[i * Chunks + j], 0);
#pragma unroll
      for (int t = 0; t < Tiles; ++t) fence_operands(acc[t]);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int j = 0; j < Chunks; ++j) {
        const uint8_t* w_stage = smem + s * L::stage_bytes + j * L::w_bytes;
        const uint8_t* x_stage = XRes > 0 ? x_res + (i * Chunks + j) * L::x_bytes
                                          : smem + s * L::stage_bytes + Chunks * L::w_bytes + j * L::x_bytes;
#pragma unroll
        for (int k = 0; k < chunk / 16; ++k) {
          const uint64_t b = sw128_desc(x_stage + k * 32);
#pragma unroll
          for (int t = 0; t < Tiles; ++t)
            wgmma_64x64x16(acc[t], sw128_desc(w_stage + (wg * Tiles + t) * 64 * 128 + k * 32), b);
        }
      }
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
      for (int t = 0; t < Tiles; ++t) fence_operands(acc[t]);
      if (lane == 0) bar_arrive(&empty[s]);
    }
    // The ring is drained (every stage was waited on) but the other warpgroup may still be reading
    // its last stage: the consumers meet before the sums overwrite it.
    asm volatile("bar.sync 1, %0;" ::"n"(consumer_warps * 32) : "memory");
    // The accumulator's layout: warp w of the warpgroup holds features 16w..16w+15 of the tile;
    // register 4j + q holds feature 16w + lane/4 (+ 8 for q >= 2), row 8j + 2 (lane % 4) (+ 1 for odd q).
    const int wl = warp_id % 4;
#pragma unroll
    for (int t = 0; t < Tiles; ++t) {
      const int f = (wg * Tiles + t) * 64 + 16 * wl + lane / 4;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int r = 8 * j + 2 * (lane % 4);
        sums[r * L::sums_stride + f] = acc[t][4 * j];
        sums[(r + 1) * L::sums_stride + f] = acc[t][4 * j + 1];
        sums[r * L::sums_stride + f + 8] = acc[t][4 * j + 2];
        sums[(r + 1) * L::sums_stride + f + 8] = acc[t][4 * j + 3];
      }
    }
  }
  cluster.sync();
  if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  // Block `rank` sums its slice of the rows over the cluster's blocks, in rank order.
  const int per = (rows + shares - 1) / shares;
  const int r0 = rank * per;
  const int r1 = rows < r0 + per ? rows : r0 + per;
  constexpr int pairs = (Silu ? half : L::features) / 2;
  for (int idx = threadIdx.x; idx < (r1 - r0) * pairs; idx += threads) {
    const int r = r0 + idx / pairs;
    const int f = (idx % pairs) * 2;
    if (f0 + f + 1 >= outputs) continue;  // the host takes even widths only (pairs of outputs)
    float s[4] = {0.f, 0.f, 0.f, 0.f};    // features f, f + 1 (Silu: their gates, then their ups)
    // Group blocks' values loaded first (in flight together through distributed shared memory),
    // then added in rank order: the same sums whatever the group. Group 1 loads one block's and adds
    // it before the next; groups of 4 keep the registers of the forms that hold two blocks a
    // multiprocessor under their cap.
    for (int q0 = 0; q0 < shares; q0 += Group) {
      float2 a[Group], b[Group];
#pragma unroll
      for (int j = 0; j < Group; ++j)
        if (q0 + j < shares) {
          const float* peer = cluster.map_shared_rank(sums, q0 + j) + r * L::sums_stride + f;
          a[j] = *reinterpret_cast<const float2*>(peer);
          if constexpr (Silu) b[j] = *reinterpret_cast<const float2*>(peer + half);
        }
#pragma unroll
      for (int j = 0; j < Group; ++j)
        if (q0 + j < shares) {
          s[0] += a[j].x;
          s[1] += a[j].y;
          if constexpr (Silu) {
            s[2] += b[j].x;
            s[3] += b[j].y;
          }
        }
    }
    __nv_bfloat162 out;
    if constexpr (Silu) {
      float v[2];
      for (int j = 0; j < 2; ++j) {
        const float g = __bfloat162float(__float2bfloat16_rn(s[j] + (bias ? __bfloat162float(bias[f0 + f + j]) : 0.f)));
        const float u =
            __bfloat162float(__float2bfloat16_rn(s[2 + j] + (bias ? __bfloat162float(bias[n / 2 + f0 + f + j]) : 0.f)));
        v[j] = g / (1.f + __expf(-g)) * u;
      }
      out = __floats2bfloat162_rn(v[0], v[1]);
    } else {
      const float b0 = bias ? __bfloat162float(bias[f0 + f]) : 0.f;
      const float b1 = bias ? __bfloat162float(bias[f0 + f + 1]) : 0.f;
      out = __floats2bfloat162_rn(s[0] + b0, s[1] + b1);
    }
    *reinterpret_cast<__nv_bfloat162*>(y + static_cast<int64_t>(r) * outputs + f0 + f) = out;
  }
  cluster.sync();
}

// One thread an output: the fp32 sum in d's order.
__global__ void reference(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y, int rows, int n_features, int d) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(rows) * n_features) return;
  const int r = static_cast<int>(i / n_features);
  const int f = static_cast<int>(i % n_features);
  float s = 0.f;
  for (int k = 0; k < d; ++k)
    s += __bfloat162float(x[static_cast<int64_t>(r) * d + k]) * __bfloat162float(w[static_cast<int64_t>(f) * d + k]);
  y[i] = s;
}

__global__ void fill(__nv_bfloat16* p, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16(scale * (static_cast<float>(h & 0xFFFF) / 32768.f - 1.f));
  }
}

using encode_fn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                               const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                               CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

encode_fn encoder() {
  static encode_fn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || p == nullptr) {
      std::fprintf(stderr, "bench_rows_wgmma: the driver has no cuTensorMapEncodeTiled\n");
      std::exit(1);
    }
    return reinterpret_cast<encode_fn>(p);
  }();
  return fn;
}

// A bf16 row-major matrix [outer, inner] as a tensor map of (64 x box_outer) tiles in the 128-byte
// swizzle; rows and columns past the matrix read as zeros.
CUtensorMap tensor_map(const __nv_bfloat16* base, int inner, int outer, int box_outer) {
  CUtensorMap m;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(outer)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(inner) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(chunk), static_cast<cuuint32_t>(box_outer)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encoder()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<__nv_bfloat16*>(base), dims, strides,
                               box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "bench_rows_wgmma: cuTensorMapEncodeTiled (%d x %d, box %d) failed: %d\n", outer, inner,
                 box_outer, int(r));
    std::exit(1);
  }
  return m;
}

struct shape {
  const char* name;
  int n;  // weight rows (Silu: gate and up rows)
  int d;
  bool bias;
  bool silu;
  int outputs() const { return silu ? n / 2 : n; }
};

// A launch: m64 tiles a consumer warpgroup, the ring's stages, blocks along d (a cluster), chunks of
// d a stage.
struct launch {
  int tiles;
  int stages;
  int shares;
  int chunks = 1;
  int xres = 0;  // > 0: x resident, room for that many chunks of d (the ring carries weights alone)
};

// The kernel forms built, (tiles, stages, chunks a stage, x resident): (1, 8, 1), (2, 4, 1),
// (1, 2, 4) and (1, 4, 2) hold one block a multiprocessor; (1, 4, 1), (2, 2, 1) and (1, 2, 2) two.
// With x resident (copied once a block, after the programmatic wait, into room for 14, 8 or 7
// chunks of d: 112, 64 or 56 KiB): (1, 6, 1, 14), (2, 3, 1, 14) and (1, 8, 1, 8) one block a
// multiprocessor, (1, 3, 1, 7) two; a launch runs only where a block's chunks fit that room.
struct form {
  int tiles, stages, chunks, xres = 0;
};
constexpr form forms[] = {{1, 8, 1}, {1, 4, 1},     {2, 4, 1},     {2, 2, 1},    {1, 2, 4},   {1, 4, 2},
                          {1, 2, 2}, {1, 6, 1, 14}, {2, 3, 1, 14}, {1, 8, 1, 8}, {1, 3, 1, 7}};
constexpr int share_counts[] = {1, 2, 3, 4, 6, 8, 12, 16};

// How a cluster's blocks read each other's sums (--exchange): a group of blocks' loads in flight
// together, or one block's load at a time (the form first measured, 2026-12-07).
bool batched_exchange = true;

// The kernel of (Tiles, Stages, Chunks, Silu, Group) as a function pointer, readied for the shared
// memory and cluster size it takes.
template <int Tiles, int Stages, int Chunks, bool Silu, int Group, int XRes>
auto ready_kernel() {
  static const auto k = [] {
    auto f = rows_wgmma<Tiles, Stages, Chunks, Silu, Group, XRes>;
    CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               layout<Tiles, Stages, Chunks, XRes>::bytes));
    CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    return f;
  }();
  return k;
}

using kernel_fn = void (*)(CUtensorMap, CUtensorMap, __nv_bfloat16*, const __nv_bfloat16*, int, int, int, int);

struct kernel_choice {
  kernel_fn fn;
  int features;  // weight rows a block
  int bytes;     // dynamic shared memory
};

template <int Tiles, int Stages, int Chunks, int XRes = 0>
kernel_choice choose(bool silu) {
  const kernel_fn fn = batched_exchange ? (silu ? ready_kernel<Tiles, Stages, Chunks, true, 4, XRes>()
                                                : ready_kernel<Tiles, Stages, Chunks, false, 4, XRes>())
                                        : (silu ? ready_kernel<Tiles, Stages, Chunks, true, 1, XRes>()
                                                : ready_kernel<Tiles, Stages, Chunks, false, 1, XRes>());
  using L = layout<Tiles, Stages, Chunks, XRes>;
  return {fn, L::features, L::bytes};
}

// The kernel of a launch's form (one of `forms`).
kernel_choice kernel_of(const launch& l, bool silu) {
  if (l.xres == 14) return l.tiles == 1 ? choose<1, 6, 1, 14>(silu) : choose<2, 3, 1, 14>(silu);
  if (l.xres == 8) return choose<1, 8, 1, 8>(silu);
  if (l.xres == 7) return choose<1, 3, 1, 7>(silu);
  if (l.chunks == 4) return choose<1, 2, 4>(silu);
  if (l.chunks == 2) return l.stages == 4 ? choose<1, 4, 2>(silu) : choose<1, 2, 2>(silu);
  if (l.tiles == 1) return l.stages == 8 ? choose<1, 8, 1>(silu) : choose<1, 4, 1>(silu);
  return l.stages == 4 ? choose<2, 4, 1>(silu) : choose<2, 2, 1>(silu);
}

cudaLaunchConfig_t config_of(const launch& l, const shape& s, const kernel_choice& k, cudaLaunchAttribute* attrs,
                             int pdl, cudaStream_t stream) {
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = l.shares;
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = pdl;
  cudaLaunchConfig_t cfg{};
  const int per_block = s.silu ? k.features / 2 : k.features;  // outputs a block
  cfg.gridDim = dim3(l.shares, (s.outputs() + per_block - 1) / per_block, 1);
  cfg.blockDim = dim3(threads, 1, 1);
  cfg.dynamicSmemBytes = k.bytes;
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = 2;
  return cfg;
}

// How many clusters of the launch the device holds at once (0: it cannot run).
int clusters_at_once(const launch& l, const shape& s) {
  const kernel_choice k = kernel_of(l, s.silu);
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t cfg = config_of(l, s, k, attrs, 0, nullptr);
  int n = 0;
  CHECK(cudaOccupancyMaxActiveClusters(&n, k.fn, &cfg));
  return n;
}

void run_launch(const launch& l, const shape& s, const __nv_bfloat16* x, const __nv_bfloat16* w,
                const __nv_bfloat16* bias, __nv_bfloat16* y, int rows, int pdl, cudaStream_t stream) {
  const kernel_choice k = kernel_of(l, s.silu);
  const CUtensorMap w_map = tensor_map(w, s.d, s.n, s.silu ? k.features / 2 : k.features);
  const CUtensorMap x_map = tensor_map(x, s.d, rows, n_rows);
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t cfg = config_of(l, s, k, attrs, pdl, stream);
  const int chunks = (s.d + chunk - 1) / chunk;
  CHECK(cudaLaunchKernelEx(&cfg, k.fn, w_map, x_map, y, bias, rows, s.n, chunks, pdl));
}

// cuBLAS's product (what torch::linear runs); with Silu, then the composite's silu_mul as a kernel.
__global__ void add_bias(__nv_bfloat16* y, const __nv_bfloat16* bias, int rows, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * n) y[i] = __float2bfloat16_rn(__bfloat162float(y[i]) + __bfloat162float(bias[i % n]));
}

__global__ void silu_mul(const __nv_bfloat16* gate_up, __nv_bfloat16* out, int rows, int f) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * f) return;
  const int r = i / f, j = i % f;
  const float g = __bfloat162float(gate_up[r * 2 * f + j]);
  const float u = __bfloat162float(gate_up[r * 2 * f + f + j]);
  out[i] = __float2bfloat16_rn(g / (1.f + __expf(-g)) * u);
}

void run_cublas(cublasHandle_t h, const shape& s, const __nv_bfloat16* x, const __nv_bfloat16* w,
                const __nv_bfloat16* bias, __nv_bfloat16* y, __nv_bfloat16* scratch, int rows, cudaStream_t stream) {
  const float one = 1.f, zero = 0.f;
  __nv_bfloat16* product = s.silu ? scratch : y;
  // Column-major: y^T (n x rows) = w (stored d x n, transposed) x^T (d x rows).
  CHECK_CUBLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, s.n, rows, s.d, &one, w, CUDA_R_16BF, s.d, x, CUDA_R_16BF, s.d,
                            &zero, product, CUDA_R_16BF, s.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  if (bias) add_bias<<<(rows * s.n + 255) / 256, 256, 0, stream>>>(product, bias, rows, s.n);
  if (s.silu) silu_mul<<<(rows * s.n / 2 + 255) / 256, 256, 0, stream>>>(product, y, rows, s.n / 2);
}

// The largest |y - ref| over the largest |ref|, ref the float product (+ bias) of `rows` rows; with
// Silu, silu(gate) * up of it.
// Where the outputs are off by more than `tol` of the scale, what the first run's table needs to
// say what went wrong without another run: how many, how many are zero or not finite, the first one,
// and where in its row and in its output column the value it got is the right one (a permuted
// layout of the sums, or rows of x out of place, shows there).
std::string describe_errors(const std::vector<double>& got, const std::vector<double>& ref, int rows, int outputs,
                            double scale, double tol) {
  int64_t wrong = 0, zeros = 0, not_finite = 0, first = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
    if (std::isfinite(got[i]) && std::fabs(got[i] - ref[i]) <= tol * scale) continue;
    ++wrong;
    zeros += got[i] == 0.0;
    not_finite += !std::isfinite(got[i]);
    if (first < 0) first = i;
  }
  if (wrong == 0) return "";
  const int r = static_cast<int>(first / outputs), f = static_cast<int>(first % outputs);
  const auto near = [&](int64_t j) { return std::fabs(ref[j] - got[first]) <= tol * scale; };
  std::string where;
  for (int g = 0; g < outputs && where.empty(); ++g)
    if (g != f && near(static_cast<int64_t>(r) * outputs + g)) where = ", the value of output " + std::to_string(g);
  for (int q = 0; q < rows && where.empty(); ++q)
    if (q != r && near(static_cast<int64_t>(q) * outputs + f)) where = ", the value of row " + std::to_string(q);
  char line[512];
  std::snprintf(line, sizeof line,
                "%lld of %lld outputs off (%lld zero, %lld not finite); the first at row %d, output %d: got %.5g, "
                "want %.5g%s",
                static_cast<long long>(wrong), static_cast<long long>(got.size()), static_cast<long long>(zeros),
                static_cast<long long>(not_finite), r, f, got[first], ref[first],
                where.empty() ? " (no output of its row or column has it)" : where.c_str());
  return line;
}

double error_of(const shape& s, const __nv_bfloat16* y_dev, const float* ref_dev, const __nv_bfloat16* bias_dev,
                int rows, std::string& why) {
  const int64_t out = static_cast<int64_t>(rows) * s.outputs();
  std::vector<__nv_bfloat16> y(out), bias(bias_dev ? s.n : 0);
  std::vector<float> product(static_cast<int64_t>(rows) * s.n);
  CHECK(cudaMemcpy(y.data(), y_dev, out * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(product.data(), ref_dev, product.size() * sizeof(float), cudaMemcpyDeviceToHost));
  if (bias_dev) CHECK(cudaMemcpy(bias.data(), bias_dev, s.n * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
  std::vector<double> ref(out);
  for (int r = 0; r < rows; ++r)
    for (int f = 0; f < s.outputs(); ++f) {
      const auto at = [&](int j) {
        return static_cast<double>(product[static_cast<int64_t>(r) * s.n + j]) +
               (bias_dev ? static_cast<double>(__bfloat162float(bias[j])) : 0.0);
      };
      if (s.silu) {
        const double g = at(f), u = at(s.n / 2 + f);
        ref[static_cast<int64_t>(r) * s.outputs() + f] = g / (1.0 + std::exp(-g)) * u;
      } else {
        ref[static_cast<int64_t>(r) * s.outputs() + f] = at(f);
      }
    }
  double scale = 0.0, worst = 0.0;
  std::vector<double> got(out);
  for (int64_t i = 0; i < out; ++i) scale = std::max(scale, std::fabs(ref[i]));
  for (int64_t i = 0; i < out; ++i) {
    got[i] = static_cast<double>(__bfloat162float(y[i]));
    worst = std::isfinite(got[i]) ? std::max(worst, std::fabs(got[i] - ref[i])) : INFINITY;
  }
  const double error = scale > 0 ? worst / scale : worst;
  if (error > error_limit && why.empty())
    why = "rows " + std::to_string(rows) + ": " + describe_errors(got, ref, rows, s.outputs(), scale, error_limit);
  return error;
}

// Waits for `stream`'s work, or gives up after 20 s saying `what` did not finish (a kernel waiting
// on a barrier that never completes would otherwise hang the run with nothing printed): exit code 4.
void finish_or_exit(cudaStream_t stream, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  cudaError_t e;
  while ((e = cudaStreamQuery(stream)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) {
      std::printf("\n%s did not finish in 20 s: a hang\n", what.c_str());
      std::fprintf(stderr, "bench_rows_wgmma: %s did not finish in 20 s: a hang\n", what.c_str());
      std::fflush(stdout);
      std::_Exit(4);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  CHECK(e);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each row in the file as it is printed, even if the run is cut
  int rows = 64, reps = 10, pdl = 1;
  std::string only;
  // --launch: one launch alone
  bool one_launch = false;
  int only_tiles = 0, only_stages = 0, only_shares = 0, only_chunks = 1, only_xres = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--rows" && has_value) {
      rows = std::atoi(argv[++i]);
    } else if (a == "--reps" && has_value) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--pdl" && has_value) {
      pdl = std::atoi(argv[++i]);
    } else if (a == "--exchange" && has_value) {
      const std::string e = argv[++i];
      if (e != "batched" && e != "serial") {
        std::fprintf(stderr, "bench_rows_wgmma: --exchange batched or serial, got '%s'\n", e.c_str());
        return 2;
      }
      batched_exchange = e == "batched";
    } else if (a == "--shape" && has_value) {
      only = argv[++i];
    } else if (a == "--launch" && has_value) {
      // Three to five integers between commas, nothing else.
      std::vector<int> v;
      const std::string text = argv[++i];
      size_t at = 0;
      bool ok = true;
      while (ok && at <= text.size()) {
        const size_t end = std::min(text.find(',', at), text.size());
        const std::string field = text.substr(at, end - at);
        ok = !field.empty() && field.size() < 4 && field.find_first_not_of("0123456789") == std::string::npos;
        if (ok) v.push_back(std::atoi(field.c_str()));
        at = end + 1;
      }
      if (!ok || v.size() < 3 || v.size() > 5) {
        std::fprintf(stderr,
                     "bench_rows_wgmma: --launch takes TILES,STAGES,SHARES[,CHUNKS[,XRES]] (e.g. 1,8,8 or 1,2,8,4 or "
                     "1,6,1,1,14), got '%s'\n",
                     text.c_str());
        return 2;
      }
      one_launch = true;
      only_tiles = v[0];
      only_stages = v[1];
      only_shares = v[2];
      only_chunks = v.size() >= 4 ? v[3] : 1;
      only_xres = v.size() == 5 ? v[4] : 0;
    } else {
      std::fprintf(stderr,
                   "bench_rows_wgmma: unknown or incomplete argument '%s' (--rows N, --reps N, --pdl 0|1, --shape "
                   "qkv|o|gate_up|gate_up_silu|down, --launch TILES,STAGES,SHARES[,CHUNKS[,XRES]], --exchange "
                   "batched|serial)\n",
                   a.c_str());
      return 2;
    }
  }
  const std::vector<shape> all = {{"qkv", 1152, 896, true, false},
                                  {"o", 896, 896, false, false},
                                  {"gate_up", 9728, 896, false, false},
                                  {"gate_up_silu", 9728, 896, false, true},
                                  {"down", 896, 4864, false, false}};
  std::vector<shape> shapes;
  for (const shape& s : all)
    if (only.empty() || only == s.name) shapes.push_back(s);
  for (const shape& s : all)
    if (s.outputs() % 2 != 0 || s.d % 8 != 0) {
      std::fprintf(stderr, "bench_rows_wgmma: %s: the kernel writes outputs in pairs and needs d %% 8 == 0\n", s.name);
      return 2;
    }
  bool form_known = false, shares_known = false;
  for (const form& f : forms)
    form_known = form_known ||
                 (f.tiles == only_tiles && f.stages == only_stages && f.chunks == only_chunks && f.xres == only_xres);
  for (int c : share_counts) shares_known = shares_known || c == only_shares;
  if (one_launch && (!form_known || !shares_known)) {
    std::fprintf(stderr,
                 "bench_rows_wgmma: --launch %d,%d,%d,%d,%d is not built: TILES,STAGES,CHUNKS,XRES is one of "
                 "1,8,1,0 1,4,1,0 2,4,1,0 2,2,1,0 1,2,4,0 1,4,2,0 1,2,2,0 1,6,1,14 2,3,1,14 1,8,1,8 1,3,1,7 and SHARES "
                 "one of 1 2 3 4 6 8 12 16\n",
                 only_tiles, only_stages, only_shares, only_chunks, only_xres);
    return 2;
  }
  if (rows < 1 || rows > n_rows || reps < 1 || (pdl != 0 && pdl != 1) || shapes.empty()) {
    std::fprintf(stderr,
                 "bench_rows_wgmma: --rows 1..64, --reps >= 1, --pdl 0 or 1, --shape one of qkv, o, gate_up, "
                 "gate_up_silu, down\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9) {
    std::fprintf(stderr, "bench_rows_wgmma: needs an sm_90 GPU (wgmma), found %s (sm_%d%d)\n", prop.name, prop.major,
                 prop.minor);
    return 1;
  }
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  cublasHandle_t handle;
  CHECK_CUBLAS(cublasCreate(&handle));
  CHECK_CUBLAS(cublasSetStream(handle, stream));
  // A workspace of its own, so that cuBLAS allocates nothing while a graph captures its calls.
  void* cublas_workspace = nullptr;
  constexpr size_t cublas_workspace_bytes = 32u << 20;
  CHECK(cudaMalloc(&cublas_workspace, cublas_workspace_bytes));
  CHECK_CUBLAS(cublasSetWorkspace(handle, cublas_workspace, cublas_workspace_bytes));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  std::printf(
      "# bench_rows_wgmma on %s (%d multiprocessors), %d rows, programmatic launch %s, the cluster's sums "
      "exchanged %s\n\n",
      prop.name, prop.multiProcessorCount, rows, pdl ? "on" : "off",
      batched_exchange ? "batched (every block's loads, then the adds)" : "serially (a block's load, then its add)");
  std::printf("| shape | n x d | kernel | blocks | us a launch (median) | TB/s | error |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  bool all_ok = true;
  constexpr int launches = 24;
  for (const shape& s : shapes) {
    const int64_t w_elems = static_cast<int64_t>(s.n) * s.d;
    const int64_t w_bytes = w_elems * 2;
    const int copies = static_cast<int>(std::max<int64_t>(2, (256ll << 20) / w_bytes));
    __nv_bfloat16 *w = nullptr, *x = nullptr, *y = nullptr, *scratch = nullptr, *bias = nullptr;
    float* ref = nullptr;
    CHECK(cudaMalloc(&w, w_bytes * copies));
    CHECK(cudaMalloc(&x, static_cast<int64_t>(n_rows) * s.d * 2));
    CHECK(cudaMalloc(&y, static_cast<int64_t>(n_rows) * s.n * 2));
    CHECK(cudaMalloc(&scratch, static_cast<int64_t>(n_rows) * s.n * 2));
    CHECK(cudaMalloc(&ref, static_cast<int64_t>(n_rows) * s.n * 4));
    fill<<<1024, 256, 0, stream>>>(x, static_cast<int64_t>(n_rows) * s.d, 17u, 1.f);
    for (int c = 0; c < copies; ++c)
      fill<<<1024, 256, 0, stream>>>(w + c * w_elems, w_elems, 29u, 1.f / std::sqrt(static_cast<float>(s.d)));
    if (s.bias) {
      CHECK(cudaMalloc(&bias, s.n * 2));
      fill<<<16, 256, 0, stream>>>(bias, s.n, 41u, 0.5f);
    }
    CHECK(cudaGetLastError());

    std::vector<launch> ls;
    const int chunks = (s.d + chunk - 1) / chunk;
    // A block's chunks of d rounded up to whole stages: what a resident x must find room for.
    const auto x_chunks = [&](int shares, int per_stage) {
      const int most = (chunks + shares - 1) / shares;
      return (most + per_stage - 1) / per_stage * per_stage;
    };
    for (const form& f : forms)
      for (int shares : share_counts)
        if (shares <= chunks && (f.xres == 0 || x_chunks(shares, f.chunks) <= f.xres) &&
            (!one_launch || (f.tiles == only_tiles && f.stages == only_stages && f.chunks == only_chunks &&
                             f.xres == only_xres && shares == only_shares)))
          ls.push_back({f.tiles, f.stages, shares, f.chunks, f.xres});
    if (one_launch && ls.empty()) {
      std::fprintf(stderr,
                   "bench_rows_wgmma: --launch %d,%d,%d,%d,%d: %s's d has %d chunks, fewer than its %d shares or "
                   "more a block than its resident x holds\n",
                   only_tiles, only_stages, only_shares, only_chunks, only_xres, s.name, chunks, only_shares);
      return 2;
    }

    std::string why;  // the first failing check's description
    auto check = [&](auto&& run_one, const std::string& what) {
      double worst = 0.0;
      why.clear();
      for (int r : {1, 7, 33, 64}) {
        CHECK(cudaMemsetAsync(y, 0xFF, static_cast<int64_t>(n_rows) * s.n * 2, stream));
        reference<<<(r * s.n + 255) / 256, 256, 0, stream>>>(x, w, ref, r, s.n, s.d);
        run_one(r, w);
        finish_or_exit(stream, std::string(s.name) + ", " + what + ", " + std::to_string(r) + " rows");
        CHECK(cudaGetLastError());
        worst = std::max(worst, error_of(s, y, ref, bias, r, why));
      }
      return worst;
    };
    // One CUDA graph of a launch over each copy of the weights (at least `launches`), as the engine
    // replays a step's kernels: the host's work a launch (the tensor maps, cuBLAS's setup) is not
    // timed, and with --pdl 1 the graph keeps the launches' programmatic edges.
    auto time_us = [&](auto&& run_one, const std::string& what) {
      const int n_launches = std::max(launches, copies);
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < n_launches; ++i) run_one(rows, w + (i % copies) * w_elems);
      CHECK(cudaStreamEndCapture(stream, &graph));
      CHECK(cudaGraphInstantiate(&exec, graph, 0));
      for (int warm = 0; warm < 2; ++warm) CHECK(cudaGraphLaunch(exec, stream));
      std::vector<float> t;
      for (int rep = 0; rep < reps; ++rep) {
        CHECK(cudaEventRecord(start, stream));
        CHECK(cudaGraphLaunch(exec, stream));
        CHECK(cudaEventRecord(stop, stream));
        finish_or_exit(stream, std::string(s.name) + ", " + what + ", timed");
        float ms = 0.f;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        t.push_back(ms * 1000.f / n_launches);
      }
      CHECK(cudaGraphExecDestroy(exec));
      CHECK(cudaGraphDestroy(graph));
      std::sort(t.begin(), t.end());
      return static_cast<double>(t[t.size() / 2]);
    };
    const double bytes = static_cast<double>(w_bytes) + static_cast<double>(rows) * s.d * 2 +
                         static_cast<double>(rows) * s.outputs() * 2;
    auto row = [&](const std::string& name, int blocks, double us, double err) {
      const bool ok = err <= error_limit;
      all_ok = all_ok && ok;
      std::printf("| %s | %d x %d | %s | %d | %.2f | %.2f | %.2e%s |\n", s.name, s.n, s.d, name.c_str(), blocks, us,
                  bytes / us / 1e6, err, ok ? "" : " FAILED");
      if (!ok) std::fprintf(stderr, "bench_rows_wgmma: %s, %s: %s\n", s.name, name.c_str(), why.c_str());
    };
    {
      auto one = [&](int r, const __nv_bfloat16* wc) { run_cublas(handle, s, x, wc, bias, y, scratch, r, stream); };
      const std::string name =
          std::string("cuBLAS") + (s.bias ? " + bias kernel" : "") + (s.silu ? " + silu_mul kernel" : "");
      const double err = check(one, name);
      row(name, 0, time_us(one, name), err);
    }
    for (const launch& l : ls) {
      const kernel_choice k = kernel_of(l, s.silu);
      const int per_block = s.silu ? k.features / 2 : k.features;
      const int blocks = l.shares * ((s.outputs() + per_block - 1) / per_block);
      const std::string name = "wgmma " + std::to_string(k.features) + " rows a block, " + std::to_string(l.stages) +
                               " stages" + (l.chunks > 1 ? " of " + std::to_string(l.chunks) + " chunks" : "") + ", " +
                               std::to_string(l.shares) + " shares" +
                               (l.xres > 0 ? ", x resident (" + std::to_string(l.xres) + ")" : "");
      const int at_once = clusters_at_once(l, s);
      if (at_once == 0) {
        std::printf("| %s | %d x %d | %s | %d | no cluster of this size fits | - | - |\n", s.name, s.n, s.d,
                    name.c_str(), blocks);
        continue;
      }
      auto one = [&](int r, const __nv_bfloat16* wc) { run_launch(l, s, x, wc, bias, y, r, pdl, stream); };
      const double err = check(one, name);
      row(name + " (" + std::to_string(at_once) + " clusters at once)", blocks, time_us(one, name), err);
    }
    CHECK(cudaFree(w));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    CHECK(cudaFree(scratch));
    CHECK(cudaFree(ref));
    if (bias) CHECK(cudaFree(bias));
  }
  CHECK(cudaFree(cublas_workspace));
  std::printf("\n%s\n", all_ok ? "every launch within 2^-7 of the float reference" : "some launch FAILED its check");
  return all_ok ? 0 : 3;
}
