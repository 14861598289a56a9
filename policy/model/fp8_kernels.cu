// fp8_kernels: see fp8_kernels.hpp.
//
// fp8_split_kernel: a block of 4 warps per (split, row x KV head); each warp reads its own
// row_warp_keys keys (its row's keys over the grid's splits), 16 at a time: at e 64 through a ring of 5 tiles in shared
// memory (cp.async), four tiles' copies in flight while one is computed; at e 128 the next tile loaded into registers
// while the current one is computed. Its g <= 8 query heads are the rows of an m16n8k16 tensor-core
// tile (rows g..15 zero): scores S = Q K^T over e / 16 k-steps for two n-tiles of 8 keys, an
// online softmax in base 2 (max, rescale, weights), then O += P V over e / 8 n-tiles of output
// dimensions.
//
// Rationale: a fragment's k index is a sum's index, so each operand may permute it as long as
// both permute it alike; the permutations below let every lane load whole runs of bytes instead
// of the fragments' scattered pairs (lane = 4 * gr + qd, gr its group, qd its quad position):
//   * S, k-step s: k slots 2qd + {0, 1} and 2qd + 8 + {0, 1} are head dimensions
//     qd * e/4 + 4s + {0, 1} and + {2, 3}, so a lane's key bytes are one run of e/4;
//   * S's n index (a key of the tile) and P V's k index agree: n = 2qd + j of n-tile t is key
//     4qd + 2t + j of the 16, so the weights a lane holds after S are the A fragment of P V;
//     the lane that loads key n for S therefore loads key 4(n / 2) + 2t + n % 2;
//   * P V, n-tile t: column gr is output dimension gr * e/8 + t, so a lane's value bytes for a
//     key are one run of e/8 (dimensions gr * e/8 ..), and its outputs (columns 2qd, 2qd + 1)
//     are dimensions qd * e/4 .. qd * e/4 + e/4 - 1.
// fp8_join_kernel: a block per (row, query head): the splits' log-sum-exps to weights in shared
// memory, then their outputs summed by 128 or 1,024 threads (a float4 of dimensions each, the
// splits strided over the threads) and reduced once through shared memory.
#include "policy/model/async_copy.cuh"
#include "policy/model/fp8_kernels.hpp"
#include "policy/model/programmatic_launch.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

namespace caf_agent::policy::kernels {
namespace {

constexpr int warp = 32;
constexpr int split_warps = static_cast<int>(fp8_attention_warps);
// Threads of a join block: few splits a (row, query head), a small block; many (few long rows),
// enough that each thread sums about 4 of them (one round of L2 reads, not 16 one after another).
constexpr int join_threads_few = 128;
constexpr int join_threads_many = 1024;
constexpr int64_t join_many_splits = 64;
// The split kernel's tiles at e 64: a ring of 5 staged tiles a warp in shared memory (10 KiB a
// warp, 40 KiB a block), 4 blocks a multiprocessor (registers capped at 128 a thread: 118, no
// spill), 4 x 49 KiB of the 228 KiB of an sm_90 multiprocessor. At e 128 no ring: two tiles
// loaded ahead in registers (168 a thread, 3 blocks), main's loop before the ring.
// Rationale (bench/results/2026-12-05-policy-fp8-ring.md): two tiles ahead in
// registers (144 a thread, 3 blocks) read the cache at ~2.1-2.2 TB/s on both the H100 and the
// H200, whose bandwidth is 43% higher; on the H200 the ring took the 64 x 16k split from 89.6 to
// 75.9 us. Rings of 4 tiles at 5 blocks and of 8 at 3 were no faster; at e 128 a ring took 182
// registers (2 blocks) and was 7-8% slower, or spilled at 3 blocks and was 40% slower.
template <int E>
constexpr bool fp8_split_ring = E == 64;
template <int E>
constexpr int fp8_split_stages = fp8_split_ring<E> ? 5 : 1;
// Blocks a multiprocessor holds at once, as the launch bounds promise them (e 64) or as measured
// on the H100 and the H200 (e 128): the splits' sizing until the device is asked.
template <int E>
constexpr int fp8_split_blocks = E == 64 ? 4 : 3;
template <int E>
constexpr int fp8_split_ring_bytes = fp8_split_ring<E> ? split_warps* fp8_split_stages<E> * 32 * E : 0;

__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float to_float(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ __nv_bfloat16 from_float(float v, __nv_bfloat16) {
  return __float2bfloat16_rn(v);
}
__device__ __forceinline__ __half from_float(float v, __half) {
  return __float2half_rn(v);
}

// Keys a warp of a split reads for a row of `used` keys cut into `splits` splits (the split
// kernel's grid.x): the row's keys over every split, a multiple of 32 from 64 up. The split and
// join kernels both derive it from the row's position, so nothing of a launch depends on the keys
// the step attends (fp8_attention_splits). In 32 bits (fp8_decode_attention keeps a row's keys and
// the splits' warps below 2^31): the kernels compute it before their first loads, where the 64-bit
// form's test of the high words cost 17 instructions more. The split kernel took ~0.9 us more a
// call in the 1-row 131k step on an H100 with that form, whose division took its 32-bit path there
// (bench/results/2026-12-06-policy-h100-keys-free-graphs.md): not the division (docs/POLICY_MODEL.md).
__host__ __device__ __forceinline__ int row_warp_keys(int64_t used, int splits) {
  const uint32_t warps = static_cast<uint32_t>(splits) * split_warps;
  const uint32_t per = (static_cast<uint32_t>(used) + warps - 1) / warps;
  return static_cast<int>(per < 64 ? 64 : (per + 31) / 32 * 32);
}

// Two e4m3 bytes (the low one first) as fp16x2 (the low byte in the low half), exact.
__device__ __forceinline__ uint32_t fp8x2_to_half2(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// d += a b on tensor cores: m16n8k16, fp16 operands, fp32 accumulators.
__device__ __forceinline__ void mma_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The bytes a lane loads for 16 keys: two keys' e/4 key bytes (n-tiles 0 and 1) and four keys'
// e/8 value bytes, as 32-bit words.
template <int E>
struct tile_bytes {
  uint32_t k[2][E / 16];
  uint32_t v[4][E / 32];
};

// Loads `count` bytes (a multiple of 4; 8 or 16 here, or 32 as two 16s) at p into words.
template <int Words>
__device__ __forceinline__ void load_words(uint32_t (&w)[Words], const uint8_t* p) {
  if constexpr (Words == 2) {
    const uint2 x = __ldg(reinterpret_cast<const uint2*>(p));
    w[0] = x.x, w[1] = x.y;
  } else {
#pragma unroll
    for (int i = 0; i < Words / 4; ++i) {
      const uint4 x = __ldg(reinterpret_cast<const uint4*>(p) + i);
      w[4 * i] = x.x, w[4 * i + 1] = x.y, w[4 * i + 2] = x.z, w[4 * i + 3] = x.w;
    }
  }
}

template <int Words>
__device__ __forceinline__ void zero_words(uint32_t (&w)[Words]) {
#pragma unroll
  for (int i = 0; i < Words; ++i) w[i] = 0;
}

// Where a (row, KV head)'s keys are: slots, a run from `base`; paged, through the row's table.
struct key_rows {
  const int64_t* table;  // null for slots
  int64_t base;          // slots: first row of the slot's head; paged: first row of the head
  int64_t block;         // paged: block size
  // The row of key p, p the first of 16 keys that lie in one block.
  __device__ __forceinline__ int64_t row_of(int p) const {
    if (table == nullptr) return base + p;
    return base + __ldg(table + p / block) * block + p % block;
  }
};

// The lane's bytes of keys first..first + 15 (keys at or past `used` read as zeros), loaded into
// registers (e 128).
template <int E>
__device__ __forceinline__ void load_tile(tile_bytes<E>& t, const uint8_t* k_cache, const uint8_t* v_cache,
                                          const key_rows& rows, int first, int used, int gr, int qd) {
  if (first >= used) {
#pragma unroll
    for (int n = 0; n < 2; ++n) zero_words(t.k[n]);
#pragma unroll
    for (int j = 0; j < 4; ++j) zero_words(t.v[j]);
    return;
  }
  const int64_t row0 = rows.row_of(first);  // the 16 keys are consecutive rows of one block
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    const int key = 4 * (gr / 2) + 2 * n + gr % 2;
    if (first + key < used)
      load_words(t.k[n], k_cache + (row0 + key) * E + qd * (E / 4));
    else
      zero_words(t.k[n]);
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int key = 4 * qd + j;
    if (first + key < used)
      load_words(t.v[j], v_cache + (row0 + key) * E + gr * (E / 8));
    else
      zero_words(t.v[j]);
  }
}

// Staged tiles (cp.async): each warp keeps a ring of `stages` 16-key tiles in shared memory,
// stages - 1 of them loading while one is read; a lane then reads its fragments' bytes (above)
// from the stage. Rationale: the same words as loading them straight into registers (the kernel
// before the ring), so the same sums and bits, with more bytes in flight and fewer registers.
// A stage is the tile's keys (16 rows of e bytes), then its values; each 16-byte chunk c of row r
// is stored at chunk c ^ swizzle, so a read of the fragments' bytes (rows 4qd + j of values, rows
// 2n + {0, 1} of keys at e 128) hits few banks twice.
template <int E>
struct stage_layout {
  static constexpr int chunks = E / 16;  // 16-byte chunks a row
  static constexpr int bytes = 32 * E;   // a stage: 16 key rows, then 16 value rows
  __device__ __forceinline__ static int key_chunk(int r, int c) { return E == 128 ? c ^ (r & 1) : c; }
  __device__ __forceinline__ static int value_chunk(int r, int c) { return c ^ ((((r >> 2) & 3) << 1) & (chunks - 1)); }
};

// The warp's copies of keys first..first + 15 into `stage` (keys at or past `used` are not read;
// the reader zeroes them).
template <int E>
__device__ __forceinline__ void stage_tile(uint8_t* stage, const uint8_t* k_cache, const uint8_t* v_cache,
                                           const key_rows& rows, int first, int used, int lane) {
  using L = stage_layout<E>;
  if (first >= used) return;
  const int64_t row0 = rows.row_of(first);
#pragma unroll
  for (int i = 0; i < L::chunks / 2; ++i) {  // 16 rows x chunks = 32 lanes x chunks / 2
    const int idx = lane + warp * i, r = idx / L::chunks, c = idx % L::chunks;
    if (first + r < used) {
      copy_16(stage + (r * L::chunks + L::key_chunk(r, c)) * 16, k_cache + (row0 + r) * E + c * 16);
      copy_16(stage + 16 * E + (r * L::chunks + L::value_chunk(r, c)) * 16, v_cache + (row0 + r) * E + c * 16);
    }
  }
}

// Reads `count` words (2 or 4) at p (shared memory) into w.
template <int Words>
__device__ __forceinline__ void read_words(uint32_t* w, const uint8_t* p) {
  if constexpr (Words == 2) {
    const uint2 x = *reinterpret_cast<const uint2*>(p);
    w[0] = x.x, w[1] = x.y;
  } else {
    const uint4 x = *reinterpret_cast<const uint4*>(p);
    w[0] = x.x, w[1] = x.y, w[2] = x.z, w[3] = x.w;
  }
}

// The lane's words of a staged tile (keys at or past `used` as zeros).
template <int E>
__device__ __forceinline__ void read_tile(tile_bytes<E>& t, const uint8_t* stage, int first, int used, int gr, int qd) {
  using L = stage_layout<E>;
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    const int key = 4 * (gr / 2) + 2 * n + gr % 2;
    if (first + key < used) {
#pragma unroll
      for (int i = 0; i < E / 64; ++i)  // e/4 bytes: chunks qd * e/64 + i
        read_words<4>(t.k[n] + 4 * i, stage + (key * L::chunks + L::key_chunk(key, qd * (E / 64) + i)) * 16);
    } else {
      zero_words(t.k[n]);
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int key = 4 * qd + j;
    if (first + key < used) {
      const int byte = gr * (E / 8);  // e/8 bytes: half a chunk at e 64, a chunk at e 128
      read_words<E / 32>(t.v[j], stage + 16 * E + (key * L::chunks + L::value_chunk(key, byte / 16)) * 16 + byte % 16);
    } else {
      zero_words(t.v[j]);
    }
  }
}

// The running state of a lane: query head gr's max and partial sum (base 2), and its outputs
// (n-tile t: o[t][0], o[t][1], columns 2qd and 2qd + 1 of row gr). In place (e 64) they are
// P V's whole accumulator fragments: o[t][2], o[t][3] (row gr + 8) stay 0, P's rows 8..15 being
// zero, so no fragment is zeroed and no output copied a tile. At e 128 the four words would take
// the kernel past the registers of its blocks.
template <int E>
struct running {
  static constexpr bool in_place = E == 64;
  float m = -INFINITY, l = 0.0f;
  float o[E / 8][in_place ? 4 : 2] = {};
};

template <int E>
__device__ __forceinline__ void attend_tile(running<E>& r, const tile_bytes<E>& t, const uint32_t (&q)[E / 16][2],
                                            int first, int used, int qd, float scale_log2) {
  // S = Q K^T for the two n-tiles.
  float s[2][4];
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < E / 16; ++ks) {
      const uint32_t word = t.k[n][ks];
      mma_16816(s[n], q[ks][0], 0u, q[ks][1], 0u, fp8x2_to_half2(word), fp8x2_to_half2(word >> 16));
    }
  }
  // This lane's keys 4qd + 2n + j (j = 0, 1) of head gr, in base 2; masked past `used`.
  float x[4];
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int key = first + 4 * qd + 2 * n + j;
      x[2 * n + j] = key < used ? s[n][j] * scale_log2 : -INFINITY;
    }
  float mx = fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float m_new = fmaxf(r.m, mx);
  const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // no key yet: weights 0, nothing to rescale
  // In place, the outputs are rescaled here, and only when some row's max grew: every other
  // row's alpha is exp2(0) = 1, whose product changes no bit (a row with no key yet: outputs and
  // sum are 0, and so is alpha). Rationale: after a warp's first keys most tiles grow no max, and
  // the rescale was 16 multiplies a lane a tile with exp2 between the scores and P V.
  float alpha = 1.0f;
  if constexpr (running<E>::in_place) {
    if (__any_sync(0xffffffffu, m_new != r.m)) {
      alpha = exp2f(r.m - m_use);
#pragma unroll
      for (int nt = 0; nt < E / 8; ++nt) r.o[nt][0] *= alpha, r.o[nt][1] *= alpha;
    }
  } else {
    alpha = exp2f(r.m - m_use);
  }
  float p[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) p[i] = exp2f(x[i] - m_use);
  r.l = r.l * alpha + (p[0] + p[1]) + (p[2] + p[3]);
  r.m = m_new;
  // P as the A fragment: (row gr, k 2qd..) keys 4qd, 4qd + 1; (row gr, k 2qd + 8..) keys 4qd + 2, + 3.
  const uint32_t p01 = pack_half2(p[0], p[1]), p23 = pack_half2(p[2], p[3]);
#pragma unroll
  for (int nt = 0; nt < E / 8; ++nt) {
    // Values of keys 4qd .. 4qd + 3 at dimension gr * e/8 + nt: byte nt of each key's run.
    const int w = nt / 4, byte = nt % 4;
    const uint32_t sel = static_cast<uint32_t>(byte) | static_cast<uint32_t>(4 + byte) << 4;
    const uint32_t b0 = fp8x2_to_half2(__byte_perm(t.v[0][w], t.v[1][w], sel));
    const uint32_t b1 = fp8x2_to_half2(__byte_perm(t.v[2][w], t.v[3][w], sel));
    if constexpr (running<E>::in_place) {
      mma_16816(r.o[nt], p01, 0u, p23, 0u, b0, b1);
    } else {
      float acc[4] = {r.o[nt][0] * alpha, r.o[nt][1] * alpha, 0.0f, 0.0f};
      mma_16816(acc, p01, 0u, p23, 0u, b0, b1);
      r.o[nt][0] = acc[0];
      r.o[nt][1] = acc[1];
    }
  }
}

template <typename T, int E>
__global__ void __launch_bounds__(split_warps* warp, fp8_split_ring<E> ? fp8_split_blocks<E> : 1)
    fp8_split_kernel(const T* __restrict__ q_bhe, const uint8_t* __restrict__ k_cache,
                     const uint8_t* __restrict__ v_cache, const int64_t* __restrict__ positions_b,
                     const int64_t* __restrict__ tables_bm, float* __restrict__ part_o, float* __restrict__ part_lse,
                     int k, int g, int64_t c, int64_t blocks, int64_t m, float scale_log2) {
  allow_dependents();
  // dependency_wait() comes below: positions, block tables and the cache's keys before this step's
  // newest (position used - 1) are written before the step's kernels run, so a ring's first tiles
  // may load while the kernel before this one (the newest key's write, q) finishes. Measured on an
  // H100 (bench/results/2026-12-06-policy-h100-early-tiles-rope-gemv.md, call 2): the kernel alone
  // 7% slower at 1 x 131k (no kernel before it to overlap), the 131k decode 802.0 -> 838.3 tok/s.
  if constexpr (!fp8_split_ring<E>) dependency_wait();
  __shared__ float o_s[split_warps][fp8_attention_max_g][E];
  __shared__ float m_s[split_warps][fp8_attention_max_g];
  __shared__ float l_s[split_warps][fp8_attention_max_g];
  extern __shared__ __align__(16) uint8_t ring_s[];
  const int split = static_cast<int>(blockIdx.x), splits = static_cast<int>(gridDim.x);
  const int64_t pair = blockIdx.y;  // row * k + KV head
  const int64_t row = pair / k, head = pair % k;
  const int64_t position = positions_b[row];
  int64_t used64;
  key_rows rows{};
  if (tables_bm == nullptr) {
    used64 = position == c - 1 ? 1 : position + 1;  // a dummy row reads key 0 only
    rows.base = pair * c;
  } else {
    used64 = position + 1 < m * c ? position + 1 : m * c;
    rows.table = tables_bm + row * m;
    rows.base = head * blocks * c;
    rows.block = c;
  }
  const int used = static_cast<int>(used64);
  const int warp_keys = row_warp_keys(used64, splits);
  const int block_first = split * split_warps * warp_keys;
  if (block_first >= used) return;  // the join reads only splits with keys (this block writes nothing)
  const int lane = static_cast<int>(threadIdx.x) % warp, wid = static_cast<int>(threadIdx.x) / warp;
  const int gr = lane / 4, qd = lane % 4;
  const int first = block_first + wid * warp_keys;
  const int last = min(first + warp_keys, used);
  const int tiles = first < last ? (last - first + 15) / 16 : 0;
  constexpr int stages = fp8_split_stages<E>;
  uint8_t* ring = ring_s + wid * stages * 32 * E;  // the warp's stages of 32 e bytes (stage_layout)
  // The ring's first tiles, one commit group each (empty past the warp's keys): those before the
  // newest key's tile now, the rest after the wait.
  int staged = 0;
  if constexpr (fp8_split_ring<E>) {
    for (; staged < stages - 1 && staged < tiles && first + 16 * (staged + 1) <= used - 1; ++staged) {
      stage_tile<E>(ring + staged * stage_layout<E>::bytes, k_cache, v_cache, rows, first + 16 * staged, used, lane);
      copy_commit();
    }
    dependency_wait();
    for (; staged < stages - 1; ++staged) {
      if (staged < tiles)
        stage_tile<E>(ring + staged * stage_layout<E>::bytes, k_cache, v_cache, rows, first + 16 * staged, used, lane);
      copy_commit();
    }
  }
  // Query head gr's dimensions qd * e/4 + 4ks + {0, 1} and {2, 3} as fp16 pairs (rows past g zero).
  uint32_t q[E / 16][2];
  {
    const T* qh = q_bhe + (pair * g + gr) * E + qd * (E / 4);
#pragma unroll
    for (int ks = 0; ks < E / 16; ++ks) {
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (gr < g)
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = to_float(qh[4 * ks + i]);
      q[ks][0] = pack_half2(v[0], v[1]);
      q[ks][1] = pack_half2(v[2], v[3]);
    }
  }
  running<E> r;
  if (first < last) {
    if constexpr (fp8_split_ring<E>) {
      // Tile t is read from stage t % stages while tiles t + 1 .. t + stages - 1 load.
      for (int t = 0; t < tiles; ++t) {
        copy_wait<stages - 2>();  // this lane's copies of tile t landed
        __syncwarp();             // every lane's, and every lane done reading tile t - 1's stage
        const int ahead = t + stages - 1;
        if (ahead < tiles)
          stage_tile<E>(ring + (ahead % stages) * stage_layout<E>::bytes, k_cache, v_cache, rows, first + 16 * ahead,
                        used, lane);
        copy_commit();
        tile_bytes<E> tile;
        read_tile<E>(tile, ring + (t % stages) * stage_layout<E>::bytes, first + 16 * t, used, gr, qd);
        attend_tile<E>(r, tile, q, first + 16 * t, last, qd, scale_log2);
      }
    } else {
      // 16-key tiles loaded into registers ahead: one at e 128 (two at e 64 before the ring).
      constexpr int ahead = E == 64 ? 2 : 1, step = 16 * ahead;
      tile_bytes<E> cur[ahead], next[ahead];
#pragma unroll
      for (int i = 0; i < ahead; ++i) load_tile<E>(cur[i], k_cache, v_cache, rows, first + 16 * i, used, gr, qd);
      for (int key = first; key < last; key += step) {
        if (key + step < last)
#pragma unroll
          for (int i = 0; i < ahead; ++i)
            load_tile<E>(next[i], k_cache, v_cache, rows, key + step + 16 * i, used, gr, qd);
#pragma unroll
        for (int i = 0; i < ahead; ++i)
          if (key + 16 * i < last) attend_tile<E>(r, cur[i], q, key + 16 * i, last, qd, scale_log2);
#pragma unroll
        for (int i = 0; i < ahead; ++i) cur[i] = next[i];
      }
    }
  }
  // The quad's partial sums, then the warps' states through shared memory.
  r.l += __shfl_xor_sync(0xffffffffu, r.l, 1);
  r.l += __shfl_xor_sync(0xffffffffu, r.l, 2);
  if (gr < g) {
#pragma unroll
    for (int nt = 0; nt < E / 8; ++nt) {
      o_s[wid][gr][2 * qd * (E / 8) + nt] = r.o[nt][0];
      o_s[wid][gr][(2 * qd + 1) * (E / 8) + nt] = r.o[nt][1];
    }
    if (qd == 0) m_s[wid][gr] = r.m, l_s[wid][gr] = r.l;
  }
  __syncthreads();
  const int64_t part = pair * splits + split;
  for (int idx = static_cast<int>(threadIdx.x); idx < g * E; idx += split_warps * warp) {
    const int j = idx / E, d = idx % E;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < split_warps; ++w) mx = fmaxf(mx, m_s[w][j]);
    float o = 0.0f, l = 0.0f;
    if (mx != -INFINITY)
#pragma unroll
      for (int w = 0; w < split_warps; ++w) {
        const float wt = exp2f(m_s[w][j] - mx);
        o += wt * o_s[w][j][d];
        l += wt * l_s[w][j];
      }
    part_o[(part * g + j) * E + d] = l > 0.0f ? o / l : 0.0f;
    if (d == 0) part_lse[part * g + j] = l > 0.0f ? mx + log2f(l) : -INFINITY;
  }
}

template <typename T, int E, int Threads>
__global__ void __launch_bounds__(Threads)
    fp8_join_kernel(const float* __restrict__ part_o, const float* __restrict__ part_lse,
                    const int64_t* __restrict__ positions_b, const int64_t* __restrict__ tables_bm,
                    T* __restrict__ out_bhe, int k, int g, int64_t c, int64_t m, int splits) {
  allow_dependents();
  dependency_wait();
  constexpr int vecs = E / 4;            // float4s of an output
  constexpr int lanes = Threads / vecs;  // splits summed side by side
  __shared__ float w_s[fp8_attention_max_splits];
  __shared__ float4 acc_s[lanes][vecs];
  __shared__ float red_s[Threads / warp];
  const int64_t rh = blockIdx.x;  // row * h + query head
  const int h = k * g;
  const int64_t row = rh / h;
  const int qh = static_cast<int>(rh % h), head = qh / g, j = qh % g;
  const int64_t position = positions_b[row];
  const int64_t used =
      tables_bm == nullptr ? (position == c - 1 ? 1 : position + 1) : (position + 1 < m * c ? position + 1 : m * c);
  const int64_t split_keys = static_cast<int64_t>(split_warps) * row_warp_keys(used, splits);
  const int n = static_cast<int>((used + split_keys - 1) / split_keys);  // splits with keys (<= splits)
  const int64_t pair = row * k + head;
  const float* lse = part_lse + pair * splits * g + j;  // split s at s * g
  const int t = static_cast<int>(threadIdx.x), lane = t % warp, wid = t / warp;
  // The largest log-sum-exp, then each split's weight 2^(lse - max) and their total.
  float mx = -INFINITY;
  for (int s = t; s < n; s += Threads) mx = fmaxf(mx, lse[static_cast<int64_t>(s) * g]);
  for (int off = warp / 2; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  if (lane == 0) red_s[wid] = mx;
  __syncthreads();
  mx = red_s[0];
  for (int w = 1; w < Threads / warp; ++w) mx = fmaxf(mx, red_s[w]);
  __syncthreads();
  float total = 0.0f;
  for (int s = t; s < n; s += Threads) {
    const float v = lse[static_cast<int64_t>(s) * g];
    const float wt = v == -INFINITY ? 0.0f : exp2f(v - mx);
    w_s[s] = wt;
    total += wt;
  }
  for (int off = warp / 2; off > 0; off >>= 1) total += __shfl_xor_sync(0xffffffffu, total, off);
  if (lane == 0) red_s[wid] = total;
  __syncthreads();  // weights visible
  total = 0.0f;
  for (int w = 0; w < Threads / warp; ++w) total += red_s[w];
  // Outputs: thread t sums float4 t % vecs over splits t / vecs, t / vecs + lanes, ..
  const int vec = t % vecs, first = t / vecs;
  const float4* o = reinterpret_cast<const float4*>(part_o + (pair * splits * g + j) * E) + vec;
  const int64_t stride = static_cast<int64_t>(g) * E / 4;  // float4s between splits
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
  for (int s = first; s < n; s += lanes) {
    const float wt = w_s[s];
    const float4 v = o[s * stride];
    acc.x = fmaf(wt, v.x, acc.x);
    acc.y = fmaf(wt, v.y, acc.y);
    acc.z = fmaf(wt, v.z, acc.z);
    acc.w = fmaf(wt, v.w, acc.w);
  }
  acc_s[first][vec] = acc;
  __syncthreads();
  if (t < E) {
    const int v4 = t / 4, part = t % 4;
    float sum = 0.0f;
    for (int i = 0; i < lanes; ++i) {
      const float4 a = acc_s[i][v4];
      sum += part == 0 ? a.x : part == 1 ? a.y : part == 2 ? a.z : a.w;
    }
    out_bhe[rh * E + t] = from_float(total > 0.0f ? sum / total : 0.0f, T{});
  }
}

// The split kernel's ring may take more than the 48 KiB of dynamic shared memory a kernel gets
// without asking (its static arrays count against that too): asked once a kernel.
template <typename T, int E>
void allow_ring() {
  if constexpr (!fp8_split_ring<E>) return;
  static const bool asked = [] {
    cudaFuncSetAttribute(fp8_split_kernel<T, E>, cudaFuncAttributeMaxDynamicSharedMemorySize, fp8_split_ring_bytes<E>);
    prefer_max_shared(reinterpret_cast<const void*>(fp8_split_kernel<T, E>));  // before the occupancy query too
    return true;
  }();
  (void)asked;
}

template <typename T, int E>
void launch_attention(const void* q_bhe, const uint8_t* k_cache, const uint8_t* v_cache, const int64_t* positions_b,
                      const int64_t* tables_bm, void* out_bhe, float* part_o, float* part_lse, int64_t b, int64_t k,
                      int64_t g, int64_t c, int64_t blocks, int64_t m, int64_t splits, cudaStream_t stream) {
  const float scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(E)));
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(b * k));
  allow_ring<T, E>();
  launch(fp8_split_kernel<T, E>, grid, split_warps * warp, fp8_split_ring_bytes<E>, stream,
         static_cast<const T*>(q_bhe), k_cache, v_cache, positions_b, tables_bm, part_o, part_lse, static_cast<int>(k),
         static_cast<int>(g), c, blocks, m, scale_log2);
  const auto join = [&](auto threads) {
    constexpr int Threads = decltype(threads)::value;
    launch(fp8_join_kernel<T, E, Threads>, static_cast<unsigned>(b * k * g), Threads, 0, stream, part_o, part_lse,
           positions_b, tables_bm, static_cast<T*>(out_bhe), static_cast<int>(k), static_cast<int>(g), c, m,
           static_cast<int>(splits));
  };
  if (splits > join_many_splits)
    join(std::integral_constant<int, join_threads_many>{});
  else
    join(std::integral_constant<int, join_threads_few>{});
}

}  // namespace

namespace {

// Split blocks one multiprocessor holds at once at head_dim E (the kernel's registers and its ring;
// bf16 and fp16 alike): read once, outside a graph capture (no query is made while `stream`
// captures); until then the blocks its launch bounds promise.
template <int E>
int64_t resident_split_blocks(cudaStream_t stream) {
  static std::atomic<int> blocks{0};
  if (blocks.load() == 0) {
    int n = 0;
    if (stream_capturing(stream)) return fp8_split_blocks<E>;
    allow_ring<__nv_bfloat16, E>();
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fp8_split_kernel<__nv_bfloat16, E>, split_warps * warp,
                                                      fp8_split_ring_bytes<E>) != cudaSuccess) {
      cudaGetLastError();
      return fp8_split_blocks<E>;
    }
    blocks.store(std::max(1, n));
  }
  return blocks.load();
}

}  // namespace

int64_t fp8_attention_splits(int64_t pairs, int64_t row_keys, int64_t e, void* stream) {
  if (pairs < 1 || row_keys < 1 || (e != 64 && e != 128)) return 0;
  // Rationale: as many splits as fill the blocks the GPU holds at once, in one wave. The 1-row
  // 131k step first aimed at 16 warps a multiprocessor: 256 splits a KV head, 512 blocks where
  // 396 fit, so a second wave of 116 ran alone; the kernel read 1.4 TB/s
  // (bench/results/2026-12-05-policy-h200-e4m3-fused-gemv.md, call 1). Longer warps also write
  // fewer partial outputs for the join.
  const int64_t sms = multiprocessor_count() > 0 ? multiprocessor_count() : 132;
  const int64_t resident = e == 64 ? resident_split_blocks<64>(static_cast<cudaStream_t>(stream))
                                   : resident_split_blocks<128>(static_cast<cudaStream_t>(stream));
  const int fill = static_cast<int>(std::clamp<int64_t>(resident * sms / pairs, 1, fp8_attention_max_splits));
  // As many of those as a row of `row_keys` keys uses at row_warp_keys: a full row leaves none
  // empty (the 256 a KV head a key bucket of 131,072 gave the 1-row step on an H100, not 264).
  const int64_t split_keys = fp8_attention_warps * row_warp_keys(row_keys, fill);
  return std::min<int64_t>(fill, (row_keys + split_keys - 1) / split_keys);
}

bool fp8_attention_supports(int64_t g, int64_t e) {
  return g >= 1 && g <= fp8_attention_max_g && (e == 64 || e == 128);
}

int fp8_decode_attention(element dtype, const void* q_bhe, const uint8_t* k_cache, const uint8_t* v_cache,
                         const int64_t* positions_b, const int64_t* tables_bm, void* out_bhe, float* part_o,
                         float* part_lse, int64_t b, int64_t k, int64_t g, int64_t e, int64_t c, int64_t blocks,
                         int64_t m, int64_t splits, void* stream) {
  if (b == 0) return 0;
  // A row's keys (a slot's capacity, or its table's blocks) and the splits' last warp's end past
  // them (row_warp_keys rounds up) must fit the kernels' int offsets.
  const int64_t row_keys = tables_bm != nullptr ? m * c : c;
  if (b < 0 || k < 1 || c < 1 || !fp8_attention_supports(g, e) || dtype == element::fp32 || splits < 1 ||
      splits > fp8_attention_max_splits || b * k > 65535 || row_keys + splits * fp8_attention_warps * 64 > 0x7fffffff ||
      (tables_bm != nullptr && (c % 16 != 0 || m < 1)))
    return static_cast<int>(cudaErrorInvalidValue);
  const auto s = static_cast<cudaStream_t>(stream);
  const auto go = [&](auto tag, auto width) {
    using T = decltype(tag);
    launch_attention<T, decltype(width)::value>(q_bhe, k_cache, v_cache, positions_b, tables_bm, out_bhe, part_o,
                                                part_lse, b, k, g, c, blocks, m, splits, s);
  };
  using e64 = std::integral_constant<int, 64>;
  using e128 = std::integral_constant<int, 128>;
  if (dtype == element::bf16)
    e == 64 ? go(__nv_bfloat16{}, e64{}) : go(__nv_bfloat16{}, e128{});
  else
    e == 64 ? go(__half{}, e64{}) : go(__half{}, e128{});
  return static_cast<int>(cudaGetLastError());
}

}  // namespace caf_agent::policy::kernels
