// fused_kernels: see fused_kernels.hpp. Each kernel rounds where ATen's composite rounds (every
// intermediate the composite holds as a tensor of the model's dtype is rounded to that dtype
// here too), so results equal the composite's bit for bit except for the order of the RMSNorm's
// sum of squares.
#include "policy/model/fused_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace caf_agent::policy::kernels {
namespace {

__device__ __forceinline__ float to_f(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float to_f(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float to_f(float v) {
  return v;
}

template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}

/// v rounded to T and back: the value a composite holds in a tensor of dtype T.
template <typename T>
__device__ __forceinline__ float round_to(float v) {
  return to_f(from_f<T>(v));
}

constexpr int warp = 32;
constexpr int norm_threads = 128;

/// The sum of `v` over the block (blockDim.x a multiple of 32, at most 1024), in every thread.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  for (int offset = warp / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % warp, w = threadIdx.x / warp;
  if (lane == 0) partial[w] = v;
  __syncthreads();
  const int warps = blockDim.x / warp;
  v = lane < warps ? partial[lane] : 0.0f;
  for (int offset = warp / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// One block per row (a row's elements spread over the block's threads, so a decode step's 64
// rows keep 64 SMs busy; one warp per row left the loads of each row in series: 9.2 us a call
// on the H200). The sum (rounded, as the composite's add), its mean square in fp32, then
// normalised (rounded, as ATen's rms_norm) and scaled by the weight (rounded).
template <typename T>
__global__ void add_rms_norm_kernel(const T* __restrict__ residual, const T* __restrict__ delta,
                                    const T* __restrict__ weight, T* __restrict__ sum, T* __restrict__ normed,
                                    int64_t d, float eps) {
  const int64_t row = blockIdx.x;
  const T* r = residual + row * d;
  const T* dl = delta != nullptr ? delta + row * d : nullptr;
  T* s = sum != nullptr ? sum + row * d : nullptr;
  float squares = 0.0f;
#pragma unroll 4
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float v = to_f(r[j]);
    if (dl != nullptr) {
      v = round_to<T>(v + to_f(dl[j]));
      s[j] = from_f<T>(v);
    }
    squares += v * v;
  }
  const float inv = rsqrtf(block_sum(squares) / static_cast<float>(d) + eps);
  T* out = normed + row * d;
#pragma unroll 4
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = dl != nullptr ? to_f(s[j]) : to_f(r[j]);  // this thread's own write
    out[j] = from_f<T>(to_f(weight[j]) * round_to<T>(v * inv));
  }
}

// The same in one read: each thread loads up to `V` 16-byte vectors of the row, keeps the
// rounded sums in registers for the normalisation and stores 16 bytes at a time. For rows of
// whole vectors of at most norm_threads * V vectors (the 0.5B shape's 896 is 112 vectors of 8).
// Rationale: the H200 profile of a 64-row decode step put the scalar form at 4.7 us a call, 49
// calls a step; its loads of 2 bytes each, and the second pass reading the row again.
template <typename T, int V>
__global__ void add_rms_norm_vec_kernel(const T* __restrict__ residual, const T* __restrict__ delta,
                                        const T* __restrict__ weight, T* __restrict__ sum, T* __restrict__ normed,
                                        int64_t d, float eps) {
  constexpr int n = 16 / sizeof(T);
  const int64_t row = blockIdx.x, vecs = d / n;
  const uint4* r = reinterpret_cast<const uint4*>(residual + row * d);
  const uint4* dl = delta != nullptr ? reinterpret_cast<const uint4*>(delta + row * d) : nullptr;
  uint4* s = sum != nullptr ? reinterpret_cast<uint4*>(sum + row * d) : nullptr;
  float vals[V][n];
  float squares = 0.0f;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int64_t at = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (at >= vecs) break;
    const uint4 rv = r[at];
    const T* re = reinterpret_cast<const T*>(&rv);
    if (dl != nullptr) {
      const uint4 dv = dl[at];
      const T* de = reinterpret_cast<const T*>(&dv);
      uint4 sv;
      T* se = reinterpret_cast<T*>(&sv);
#pragma unroll
      for (int k = 0; k < n; ++k) {
        se[k] = from_f<T>(to_f(re[k]) + to_f(de[k]));
        vals[i][k] = to_f(se[k]);
      }
      s[at] = sv;
    } else {
#pragma unroll
      for (int k = 0; k < n; ++k) vals[i][k] = to_f(re[k]);
    }
#pragma unroll
    for (int k = 0; k < n; ++k) squares += vals[i][k] * vals[i][k];
  }
  const float inv = rsqrtf(block_sum(squares) / static_cast<float>(d) + eps);
  const uint4* wt = reinterpret_cast<const uint4*>(weight);
  uint4* out = reinterpret_cast<uint4*>(normed + row * d);
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int64_t at = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (at >= vecs) break;
    const uint4 wv = wt[at];
    const T* we = reinterpret_cast<const T*>(&wv);
    uint4 ov;
    T* oe = reinterpret_cast<T*>(&ov);
#pragma unroll
    for (int k = 0; k < n; ++k) oe[k] = from_f<T>(to_f(we[k]) * round_to<T>(vals[i][k] * inv));
    out[at] = ov;
  }
}

// silu rounded (the composite's silu output), times up, rounded.
template <typename T>
__global__ void silu_mul_kernel(const T* __restrict__ gate_up, T* __restrict__ out, int64_t rows, int64_t f) {
  const int64_t total = rows * f;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / f, j = i - row * f;
    const float g = to_f(gate_up[row * 2 * f + j]);
    const float u = to_f(gate_up[row * 2 * f + f + j]);
    out[i] = from_f<T>(round_to<T>(g / (1.0f + expf(-g))) * u);
  }
}

// One block per row: x * cos + swap_halves(x) * (-sin, sin), each product rounded, as
// layers.cpp's rotate; q heads to q_bhe, k heads rotated and v heads as is into the caches.
template <typename T>
__global__ void rope_kv_decode_kernel(const T* __restrict__ qkv, const int64_t* __restrict__ positions,
                                      const T* __restrict__ cos_pe, const T* __restrict__ sin_pe, T* __restrict__ q,
                                      T* __restrict__ k_cache, T* __restrict__ v_cache, int64_t h, int64_t k, int64_t e,
                                      int64_t c) {
  const int64_t row = blockIdx.x;
  const int64_t pos = positions[row];
  const int64_t heads = h + 2 * k, half = e / 2;
  const T* in = qkv + row * heads * e;
  for (int64_t i = threadIdx.x; i < heads * e; i += blockDim.x) {
    const int64_t head = i / e, j = i - head * e;
    if (head >= h + k) {  // v: into the cache unrotated
      v_cache[((row * k + (head - h - k)) * c + pos) * e + j] = in[i];
      continue;
    }
    const int64_t swapped = j < half ? i + half : i - half;
    const float s = to_f(sin_pe[pos * e + j]);
    const float a = round_to<T>(to_f(in[i]) * to_f(cos_pe[pos * e + j]));
    const float b = round_to<T>(to_f(in[swapped]) * (j < half ? -s : s));
    const T y = from_f<T>(a + b);
    if (head < h)
      q[(row * h + head) * e + j] = y;
    else
      k_cache[((row * k + (head - h)) * c + pos) * e + j] = y;
  }
}

constexpr int sample_threads = 1024;

// One block per row; every pass reads the row coalesced. Pass 1 (block-strided): the max of
// z = logits / temperature and the argmax of the logits. Pass 2: warp w owns the contiguous
// segment [w * seg, (w + 1) * seg) and sums exp(z - max) over it, its lanes reading 32 adjacent
// entries at a time; a scan of the 32 warp sums gives each segment's range of [0, total). The
// draw's target u * total falls in one segment, whose warp walks it 32 entries at a time (a warp
// scan, then a ballot for the first entry whose running sum passes the target); rounding that
// leaves the target past the segment's entries takes its last entry with weight (the
// composite's rule: a zero-weight entry is never drawn).
//
// Rationale: the earlier form gave each thread a contiguous chunk in pass 2 (a warp's loads 32
// chunks apart) and walked the drawn chunk in one thread, each load after the one before. On the
// H200 at 64 rows x 151,936 this form takes 144 us a step against that form's 129 us
// (bench/results/2026-12-03-policy-h200-norm-sample.md): both are bound by load latency, with
// one 4-byte load per thread in flight and one block per row on 64 of 132 SMs. 16-byte loads,
// several in flight, and more blocks per row are what is left to gain (not built).
__global__ void sample_rows_kernel(const float* __restrict__ logits, const float* __restrict__ params,
                                   int64_t* __restrict__ tokens, float* __restrict__ logprobs, int64_t b, int64_t v) {
  __shared__ float s_max[32];
  __shared__ int64_t s_arg[32];
  __shared__ float s_argval[32];
  __shared__ float s_incl[32];  // inclusive scan of the warps' segment sums
  __shared__ int64_t s_token;
  const int64_t row = blockIdx.x;
  const float* x = logits + row * v;
  const float temperature = params[row], uniform = params[b + row];
  const bool greedy = params[2 * b + row] != 0.0f;
  const float forced = params[3 * b + row];
  const int tid = threadIdx.x, lane = tid % warp, w = tid / warp, warps = blockDim.x / warp;
  // Pass 1.
  float m = -INFINITY, best = -INFINITY;
  int64_t arg = v;
  for (int64_t j = tid; j < v; j += blockDim.x) {
    const float xj = x[j];
    m = fmaxf(m, xj / temperature);
    if (xj > best) best = xj, arg = j;  // strided: a later j of this thread never wins a tie
  }
  for (int offset = warp / 2; offset > 0; offset >>= 1) {
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
    const float ob = __shfl_xor_sync(0xffffffffu, best, offset);
    const int64_t oa = __shfl_xor_sync(0xffffffffu, arg, offset);
    if (ob > best || (ob == best && oa < arg)) best = ob, arg = oa;
  }
  if (lane == 0) s_max[w] = m, s_argval[w] = best, s_arg[w] = arg;
  __syncthreads();
  if (tid == 0) {
    for (int i = 1; i < warps; ++i) {
      s_max[0] = fmaxf(s_max[0], s_max[i]);
      if (s_argval[i] > s_argval[0] || (s_argval[i] == s_argval[0] && s_arg[i] < s_arg[0]))
        s_argval[0] = s_argval[i], s_arg[0] = s_arg[i];
    }
  }
  __syncthreads();
  const float row_max = s_max[0];
  // Pass 2: this warp's segment, a multiple of 32 entries long.
  const int64_t seg = ((v + warps - 1) / warps + warp - 1) / warp * warp;
  const int64_t lo = min(static_cast<int64_t>(w) * seg, v), hi = min(lo + seg, v);
  float own = 0.0f;
  for (int64_t j = lo + lane; j < hi; j += warp) own += expf(x[j] / temperature - row_max);
  for (int offset = warp / 2; offset > 0; offset >>= 1) own += __shfl_xor_sync(0xffffffffu, own, offset);
  if (lane == 0) s_incl[w] = own;
  __syncthreads();
  if (w == 0) {  // inclusive scan of the (at most 32) warp sums
    float sum = lane < warps ? s_incl[lane] : 0.0f;
    for (int offset = 1; offset < warp; offset <<= 1) {
      const float add = __shfl_up_sync(0xffffffffu, sum, offset);
      if (lane >= offset) sum += add;
    }
    if (lane < warps) s_incl[lane] = sum;
  }
  if (tid == 0) s_token = forced >= 0.0f ? static_cast<int64_t>(forced) : greedy ? s_arg[0] : -1;
  __syncthreads();
  const float total = s_incl[warps - 1];
  const bool draw = s_token < 0;
  __syncthreads();  // every thread has read it before one writes it
  if (draw) {
    // Below total, so one segment holds it (u * total can round up to total). Segment w covers
    // [inclusive sum of w - 1, inclusive sum of w): the ranges tile [0, total).
    const float target = fminf(uniform * total, nextafterf(total, 0.0f));
    const float from = w > 0 ? s_incl[w - 1] : 0.0f, upto = s_incl[w];
    if (target >= from && target < upto) {  // this warp's segment only (uniform over the warp)
      float cum = from;
      int64_t pick = -1;
      for (int64_t base = lo; base < hi; base += warp) {
        const int64_t j = base + lane;
        const float p = j < hi ? expf(x[j] / temperature - row_max) : 0.0f;
        float run = p;  // inclusive scan over the lanes
        for (int offset = 1; offset < warp; offset <<= 1) {
          const float add = __shfl_up_sync(0xffffffffu, run, offset);
          if (lane >= offset) run += add;
        }
        const unsigned weighted = __ballot_sync(0xffffffffu, p > 0.0f);  // never draw a zero weight
        const unsigned passed = __ballot_sync(0xffffffffu, p > 0.0f && cum + run > target);
        if (passed != 0u) {
          pick = base + __ffs(passed) - 1;
          break;
        }
        if (weighted != 0u) pick = base + (warp - 1 - __clz(weighted));
        cum += __shfl_sync(0xffffffffu, run, warp - 1);
      }
      if (lane == 0) s_token = pick;  // past the segment by rounding: its last entry with weight
    }
  }
  __syncthreads();
  if (tid == 0) {
    // No segment claimed the target only if rounding emptied every range: the most likely token.
    const int64_t token = s_token >= 0 ? s_token : s_arg[0];
    tokens[row] = token;
    logprobs[row] = x[token] / temperature - row_max - logf(total);
  }
}

// Split-KV decode attention (see fused_kernels.hpp). Pass 1: a block of split_warps warps per
// (split, KV head, row); its keys [lo, hi) are the split's even share of the row's used keys.
// Each warp takes 32 keys at a time. Its loads go out together: a lane reads its own key's row
// in 16-byte vectors, and the tile's value rows (a lane's per_lane dimensions of each key, one
// vector a key) for as many keys as fit in 32 registers. The lane scores its key against the g
// query heads (in shared memory, pre-scaled by scale * log2(e), so exp2 is the softmax's exp),
// a warp max per head updates the warp's running max, each lane keeps its own running sum, and
// the keys' weights go to shared memory, from where every lane reads them (broadcast) to
// accumulate its dimensions. The warps' states merge in shared memory into the block's (max,
// sum, accumulator) per head, written to the work buffer. Pass 2: a block per (query head, row)
// merges the splits, its warps taking every split_warps-th split, and rounds to T once.
constexpr int split_warps = 4;

// A lane's dimensions of one value row, loaded as one vector.
template <typename T, int N>
struct alignas(sizeof(T) * N) lane_values {
  T v[N];
};

template <typename T, int N>
__device__ __forceinline__ lane_values<T, N> load_lane_values(const T* row, int d0, bool valid) {
  lane_values<T, N> out;
  if (valid) return *reinterpret_cast<const lane_values<T, N>*>(row + d0);
#pragma unroll
  for (int d = 0; d < N; ++d) out.v[d] = from_f<T>(0.0f);
  return out;
}

template <typename T, int E>
__global__ void __launch_bounds__(split_warps* warp)
    split_kv_partial_kernel(const T* __restrict__ q, const T* __restrict__ k_cache, const T* __restrict__ v_cache,
                            const int32_t* __restrict__ used, float* __restrict__ work, int64_t h, int64_t kv,
                            int64_t c, int g, float scale_log2) {
  constexpr int G = split_kv_max_group;
  constexpr int per_lane = E >= warp ? E / warp : 1;  // value dimensions a lane owns
  constexpr int n = 16 / sizeof(T), vectors = E / n;  // a key row in 16-byte vectors
  constexpr int row_regs = (per_lane * static_cast<int>(sizeof(T)) + 3) / 4;
  constexpr int chunk = 32 / row_regs < warp ? 32 / row_regs : warp;  // value rows held at once
  using values = lane_values<T, per_lane>;
  const int split = blockIdx.x, head = blockIdx.y, splits = gridDim.x;
  const int64_t row = blockIdx.z;
  const int lane = threadIdx.x % warp, w = threadIdx.x / warp;
  __shared__ float q_s[G][E];
  __shared__ float p_s[split_warps][warp][G];
  __shared__ float st_m[split_warps][G], st_l[split_warps][G];
  __shared__ float st_acc[split_warps][G][E];
  for (int i = threadIdx.x; i < g * E; i += blockDim.x)
    q_s[i / E][i % E] = to_f(q[(row * h + head * g + i / E) * E + i % E]) * scale_log2;
  __syncthreads();
  const int64_t keys = used[row], share = (keys + splits - 1) / splits;
  const int64_t lo = min(static_cast<int64_t>(split) * share, keys), hi = min(lo + share, keys);
  const T* kb = k_cache + (row * kv + head) * c * E;
  const T* vb = v_cache + (row * kv + head) * c * E;
  const int d0 = lane * per_lane;
  const bool owns = d0 < E;  // E = 16: half the lanes own no dimension
  float m[G], l[G], acc[G][per_lane];
#pragma unroll
  for (int j = 0; j < G; ++j) {
    m[j] = -INFINITY, l[j] = 0.0f;
#pragma unroll
    for (int d = 0; d < per_lane; ++d) acc[j][d] = 0.0f;
  }
  for (int64_t base = lo + static_cast<int64_t>(w) * warp; base < hi;
       base += static_cast<int64_t>(split_warps) * warp) {
    const int64_t t = base + lane;
    const int in_tile = static_cast<int>(min(static_cast<int64_t>(warp), hi - base));
    uint4 key_row[vectors];
    if (t < hi) {
      const uint4* kr = reinterpret_cast<const uint4*>(kb + t * E);
#pragma unroll
      for (int v4 = 0; v4 < vectors; ++v4) key_row[v4] = kr[v4];
    } else {
#pragma unroll
      for (int v4 = 0; v4 < vectors; ++v4) key_row[v4] = make_uint4(0, 0, 0, 0);
    }
    values vals[chunk];
#pragma unroll
    for (int i = 0; i < chunk; ++i) vals[i] = load_lane_values<T, per_lane>(vb + (base + i) * E, d0, owns && i < in_tile);
    float score[G];
#pragma unroll
    for (int j = 0; j < G; ++j) score[j] = 0.0f;
#pragma unroll
    for (int v4 = 0; v4 < vectors; ++v4) {
      const T* ke = reinterpret_cast<const T*>(&key_row[v4]);
#pragma unroll
      for (int i = 0; i < n; ++i) {
        const float kf = to_f(ke[i]);
#pragma unroll
        for (int j = 0; j < G; ++j)
          if (j < g) score[j] += q_s[j][v4 * n + i] * kf;
      }
    }
#pragma unroll
    for (int j = 0; j < G; ++j) {
      if (j >= g) break;
      float tile_max = t < hi ? score[j] : -INFINITY;
#pragma unroll
      for (int offset = warp / 2; offset > 0; offset >>= 1)
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, offset));
      const float new_m = fmaxf(m[j], tile_max);  // finite: the tile has a key
      const float p = t < hi ? exp2f(score[j] - new_m) : 0.0f;
      const float rescale = exp2f(m[j] - new_m);  // 0 for the first tile (m = -inf)
      l[j] = l[j] * rescale + p;                  // this lane's keys only; summed over the warp at the end
#pragma unroll
      for (int d = 0; d < per_lane; ++d) acc[j][d] *= rescale;
      m[j] = new_m;
      p_s[w][lane][j] = p;
    }
    __syncwarp();
#pragma unroll
    for (int c0 = 0; c0 < warp; c0 += chunk) {
      if (c0 > 0) {
#pragma unroll
        for (int i = 0; i < chunk; ++i)
          vals[i] = load_lane_values<T, per_lane>(vb + (base + c0 + i) * E, d0, owns && c0 + i < in_tile);
      }
#pragma unroll
      for (int i = 0; i < chunk; ++i) {
        float vf[per_lane];
#pragma unroll
        for (int d = 0; d < per_lane; ++d) vf[d] = to_f(vals[i].v[d]);
        const float* pk = p_s[w][c0 + i];
#pragma unroll
        for (int j = 0; j < G; ++j) {
          if (j >= g) break;
          const float pj = pk[j];
#pragma unroll
          for (int d = 0; d < per_lane; ++d) acc[j][d] += pj * vf[d];
        }
      }
    }
    __syncwarp();  // p_s is the next tile's
  }
  // The warps' states into the block's.
#pragma unroll
  for (int j = 0; j < G; ++j) {
    if (j >= g) break;
    float lj = l[j];
#pragma unroll
    for (int offset = warp / 2; offset > 0; offset >>= 1) lj += __shfl_xor_sync(0xffffffffu, lj, offset);
    if (lane == 0) st_m[w][j] = m[j], st_l[w][j] = lj;
#pragma unroll
    for (int d = 0; d < per_lane; ++d)
      if (owns) st_acc[w][j][d0 + d] = acc[j][d];
  }
  __syncthreads();
  float* out = work + ((row * kv + head) * splits + split) * g * (E + 2);
  for (int i = threadIdx.x; i < g * E; i += blockDim.x) {
    const int j = i / E, d = i % E;
    float bm = -INFINITY;
    for (int x = 0; x < split_warps; ++x) bm = fmaxf(bm, st_m[x][j]);
    float bl = 0.0f, ba = 0.0f;
    for (int x = 0; x < split_warps; ++x) {
      if (st_m[x][j] == -INFINITY) continue;  // a warp with no keys
      const float f = exp2f(st_m[x][j] - bm);
      bl += st_l[x][j] * f;
      ba += st_acc[x][j][d] * f;
    }
    out[j * (E + 2) + 2 + d] = ba;
    if (d == 0) out[j * (E + 2)] = bm, out[j * (E + 2) + 1] = bl;
  }
}

template <typename T, int E>
__global__ void __launch_bounds__(split_warps* warp)
    split_kv_merge_kernel(const float* __restrict__ work, T* __restrict__ out, int64_t h, int64_t kv, int g,
                          int splits) {
  constexpr int per_lane = (E + warp - 1) / warp;
  const int qh = blockIdx.x, head = qh / g, j = qh % g;
  const int64_t row = blockIdx.y;
  const int lane = threadIdx.x % warp, w = threadIdx.x / warp;
  __shared__ float w_m[split_warps], w_l[split_warps], w_acc[split_warps][E];
  const int64_t stride = static_cast<int64_t>(g) * (E + 2);
  const float* base = work + (row * kv + head) * splits * stride + static_cast<int64_t>(j) * (E + 2);
  float m = -INFINITY, l = 0.0f, acc[per_lane];
#pragma unroll
  for (int d = 0; d < per_lane; ++d) acc[d] = 0.0f;
  for (int x = w; x < splits; x += split_warps) {
    const float* st = base + x * stride;
    const float sm = st[0];
    if (sm == -INFINITY) continue;  // a split with no keys
    const float new_m = fmaxf(m, sm), a = exp2f(m - new_m), f = exp2f(sm - new_m);
    l = l * a + st[1] * f;
#pragma unroll
    for (int d = 0; d < per_lane; ++d)
      if (lane + d * warp < E) acc[d] = acc[d] * a + st[2 + lane + d * warp] * f;
    m = new_m;
  }
  if (lane == 0) w_m[w] = m, w_l[w] = l;
#pragma unroll
  for (int d = 0; d < per_lane; ++d)
    if (lane + d * warp < E) w_acc[w][lane + d * warp] = acc[d];
  __syncthreads();
  for (int d = threadIdx.x; d < E; d += blockDim.x) {
    float mm = -INFINITY;
    for (int x = 0; x < split_warps; ++x) mm = fmaxf(mm, w_m[x]);
    float sum = 0.0f, val = 0.0f;
    for (int x = 0; x < split_warps; ++x) {
      if (w_m[x] == -INFINITY) continue;  // a warp with no split's keys
      const float f = exp2f(w_m[x] - mm);
      sum += w_l[x] * f;
      val += w_acc[x][d] * f;
    }
    out[(row * h + qh) * E + d] = from_f<T>(val / sum);
  }
}

template <typename F>
int dispatch(element dtype, F&& f) {
  switch (dtype) {
    case element::bf16:
      f(__nv_bfloat16{});
      break;
    case element::fp16:
      f(__half{});
      break;
    case element::fp32:
      f(float{});
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int add_rms_norm(element dtype, const void* residual_xd, const void* delta_xd, const void* weight_d, void* sum_xd,
                 void* normed_xd, int64_t x, int64_t d, float eps, void* stream) {
  if (x == 0) return 0;
  if (x > 0x7fffffff) return static_cast<int>(cudaErrorInvalidConfiguration);
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int n = 16 / sizeof(T), vec_per_thread = 4;
    const auto aligned = [](const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const bool vec = d % n == 0 && d / n <= static_cast<int64_t>(norm_threads) * vec_per_thread &&
                     aligned(residual_xd) && aligned(delta_xd) && aligned(weight_d) && aligned(sum_xd) &&
                     aligned(normed_xd);
    const auto grid = static_cast<unsigned>(x);
    const auto cuda_stream = static_cast<cudaStream_t>(stream);
    if (vec)
      add_rms_norm_vec_kernel<T, vec_per_thread><<<grid, norm_threads, 0, cuda_stream>>>(
          static_cast<const T*>(residual_xd), static_cast<const T*>(delta_xd), static_cast<const T*>(weight_d),
          static_cast<T*>(sum_xd), static_cast<T*>(normed_xd), d, eps);
    else
      add_rms_norm_kernel<T><<<grid, norm_threads, 0, cuda_stream>>>(
          static_cast<const T*>(residual_xd), static_cast<const T*>(delta_xd), static_cast<const T*>(weight_d),
          static_cast<T*>(sum_xd), static_cast<T*>(normed_xd), d, eps);
  });
}

int silu_mul(element dtype, const void* gate_up_x2f, void* out_xf, int64_t x, int64_t f, void* stream) {
  const int64_t total = x * f;
  if (total == 0) return 0;
  constexpr int threads = 256;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((total + threads - 1) / threads, 65535));
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    silu_mul_kernel<T><<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const T*>(gate_up_x2f),
                                                                                  static_cast<T*>(out_xf), x, f);
  });
}

int rope_kv_decode(element dtype, const void* qkv_bne, const int64_t* positions_b, const void* cos_pe,
                   const void* sin_pe, void* q_bhe, void* k_cache_nkce, void* v_cache_nkce, int64_t b, int64_t h,
                   int64_t k, int64_t e, int64_t c, void* stream) {
  if (b == 0) return 0;
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    rope_kv_decode_kernel<T><<<static_cast<unsigned>(b), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(qkv_bne), positions_b, static_cast<const T*>(cos_pe), static_cast<const T*>(sin_pe),
        static_cast<T*>(q_bhe), static_cast<T*>(k_cache_nkce), static_cast<T*>(v_cache_nkce), h, k, e, c);
  });
}

int sample_rows(const float* logits_bv, const float* params_4b, int64_t* tokens_b, float* logprobs_b, int64_t b,
                int64_t v, void* stream) {
  if (b == 0) return 0;
  if (v <= 0 || b > 0x7fffffff) return static_cast<int>(cudaErrorInvalidValue);
  sample_rows_kernel<<<static_cast<unsigned>(b), sample_threads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits_bv, params_4b, tokens_b, logprobs_b, b, v);
  return static_cast<int>(cudaGetLastError());
}

int split_kv_decode(element dtype, const void* q_bhe, const void* k_cache_nkce, const void* v_cache_nkce,
                    const int32_t* used_b, void* out_bhe, float* work_f, int64_t b, int64_t h, int64_t k, int64_t e,
                    int64_t c, int64_t splits, float scale, void* stream) {
  if (b == 0) return 0;
  const int64_t g = k > 0 ? h / k : 0;
  if (g < 1 || g * k != h || g > split_kv_max_group || !split_kv_head_dim(e) || splits < 1 || splits > 65535 ||
      b > 65535 || k > 65535)
    return static_cast<int>(cudaErrorInvalidValue);
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(k), static_cast<unsigned>(b));
  const dim3 merge_grid(static_cast<unsigned>(h), static_cast<unsigned>(b));
  const float scale_log2 = scale * 1.4426950408889634f;  // exp(x) = exp2(x * log2(e))
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto launch = [&](auto head_dim) {
      constexpr int E = decltype(head_dim)::value;
      split_kv_partial_kernel<T, E><<<grid, split_warps * warp, 0, cuda_stream>>>(
          static_cast<const T*>(q_bhe), static_cast<const T*>(k_cache_nkce), static_cast<const T*>(v_cache_nkce),
          used_b, work_f, h, k, c, static_cast<int>(g), scale_log2);
      split_kv_merge_kernel<T, E><<<merge_grid, split_warps * warp, 0, cuda_stream>>>(
          work_f, static_cast<T*>(out_bhe), h, k, static_cast<int>(g), static_cast<int>(splits));
    };
    if (e == 16) launch(std::integral_constant<int, 16>{});
    if (e == 32) launch(std::integral_constant<int, 32>{});
    if (e == 64) launch(std::integral_constant<int, 64>{});
    if (e == 128) launch(std::integral_constant<int, 128>{});
  });
}

}  // namespace caf_agent::policy::kernels
