// fused_kernels: see fused_kernels.hpp. Each kernel rounds where ATen's composite rounds (every
// intermediate the composite holds as a tensor of the model's dtype is rounded to that dtype
// here too), so results equal the composite's bit for bit except for the order of the RMSNorm's
// sum of squares.
#include "policy/model/async_copy.cuh"
#include "policy/model/element_math.cuh"
#include "policy/model/fused_kernels.hpp"
#include "policy/model/programmatic_launch.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <set>
#include <type_traits>
#include <utility>

namespace caf_agent::policy::kernels {
namespace {

constexpr int warp = 32;
constexpr int norm_threads = 128;

/// Whether p is null or 16-byte aligned.
bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

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
  allow_dependents();
  dependency_wait();
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
constexpr int norm_vecs_per_thread = 4;

// One row of it by a group of norm_threads threads (t: this thread's index in the group; partial_s:
// the group's norm_threads / warp floats of shared memory). Every thread of the block calls it
// together (it synchronises the block); a group whose `active` is false only takes part. The sum
// goes to `s` where not null; the normed row to `out` (global or shared memory). Shared by
// add_rms_norm_vec_kernel and the gemv's add_rms_norm input so that both give the same bits.
template <typename T, int V>
__device__ __forceinline__ void add_rms_norm_row(const uint4* r, const uint4* dl, const uint4* wt, uint4* s, uint4* out,
                                                 int64_t d, float eps, int t, float* partial_s, bool active) {
  constexpr int n = 16 / sizeof(T);
  const int64_t vecs = d / n;
  float vals[V][n];
  float squares = 0.0f;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int64_t at = t + static_cast<int64_t>(i) * norm_threads;
    if (!active || at >= vecs) break;
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
      if (s != nullptr) s[at] = sv;
    } else {
#pragma unroll
      for (int k = 0; k < n; ++k) vals[i][k] = to_f(re[k]);
    }
#pragma unroll
    for (int k = 0; k < n; ++k) squares += vals[i][k] * vals[i][k];
  }
  // The group's sum: across each warp, then its warps' sums (as block_sum over a block of the group).
  for (int offset = warp / 2; offset > 0; offset >>= 1) squares += __shfl_xor_sync(0xffffffffu, squares, offset);
  const int lane = t % warp;
  if (lane == 0) partial_s[t / warp] = squares;
  __syncthreads();
  float total = lane < norm_threads / warp ? partial_s[lane] : 0.0f;
  for (int offset = warp / 2; offset > 0; offset >>= 1) total += __shfl_xor_sync(0xffffffffu, total, offset);
  __syncthreads();  // partial_s read by all before it is written again
  const float inv = rsqrtf(total / static_cast<float>(d) + eps);
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int64_t at = t + static_cast<int64_t>(i) * norm_threads;
    if (!active || at >= vecs) break;
    const uint4 wv = wt[at];
    const T* we = reinterpret_cast<const T*>(&wv);
    uint4 ov;
    T* oe = reinterpret_cast<T*>(&ov);
#pragma unroll
    for (int k = 0; k < n; ++k) oe[k] = from_f<T>(to_f(we[k]) * round_to<T>(vals[i][k] * inv));
    out[at] = ov;
  }
}

template <typename T, int V>
__global__ void __launch_bounds__(norm_threads)
    add_rms_norm_vec_kernel(const T* __restrict__ residual, const T* __restrict__ delta, const T* __restrict__ weight,
                            T* __restrict__ sum, T* __restrict__ normed, int64_t d, float eps) {
  allow_dependents();
  dependency_wait();
  __shared__ float partial_s[norm_threads / warp];
  const int64_t row = blockIdx.x;
  const auto vec = [&](const T* p) { return reinterpret_cast<const uint4*>(p + row * d); };
  add_rms_norm_row<T, V>(vec(residual), delta != nullptr ? vec(delta) : nullptr, reinterpret_cast<const uint4*>(weight),
                         sum != nullptr ? reinterpret_cast<uint4*>(sum + row * d) : nullptr,
                         reinterpret_cast<uint4*>(normed + row * d), d, eps, threadIdx.x, partial_s, true);
}

template <typename T>
__global__ void silu_mul_kernel(const T* __restrict__ gate_up, T* __restrict__ out, int64_t rows, int64_t f) {
  allow_dependents();
  dependency_wait();
  const int64_t total = rows * f;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / f, j = i - row * f;
    const float g = to_f(gate_up[row * 2 * f + j]);
    const float u = to_f(gate_up[row * 2 * f + f + j]);
    out[i] = silu_times<T>(g, u);
  }
}

// x * cos + swap_halves(x) * (-sin, sin), each product rounded, as layers.cpp's rotate; q heads
// to q_bhe, k heads rotated and v heads as is into the caches. One entry a thread, blocks of
// rope_threads along y: a single round of loads (a block a row looping over its 1,152 entries
// took 3.3 us a call on the H200, bench/results/2026-12-03-policy-h200-packed-prefill).
constexpr int rope_threads = 128;

// A cache entry of type C from a value of the model's type T: T itself, or (C uint8_t) e4m3
// saturated at +-448, as ATen's clamp then cast to float8_e4m3fn rounds it.
template <typename C, typename T>
__device__ __forceinline__ C to_cache(T v) {
  if constexpr (std::is_same_v<C, uint8_t>)
    return static_cast<uint8_t>(__nv_cvt_float_to_fp8(to_f(v), __NV_SATFINITE, __NV_E4M3));
  else
    return v;
}

// Entry j of a rotated head from its value x and its partner's (entry j + e/2 when `lower`, else
// j - e/2), at the position's cos_j and sin_j: each product rounded, then the sum.
template <typename T>
__device__ __forceinline__ T rope_entry(float x, float partner, float cos_j, float sin_j, bool lower) {
  // __fmul_rn / __fadd_rn: never contracted into an fma, so fp32 rounds as ATen's mul then add.
  const float a = round_to<T>(__fmul_rn(x, cos_j));
  const float b = round_to<T>(__fmul_rn(partner, lower ? -sin_j : sin_j));
  return from_f<T>(__fadd_rn(a, b));
}

// Where a decode row's key (or value) of KV head kh lies in a cache: slot `row` [row, kh, pos]
// of [n, k, c, e] or, paged (rows not null), row rows[row] + kh * c of the flat cache [k * c, e]
// (c a KV head's rows). The index of the entry's first element.
__device__ __forceinline__ int64_t cache_entry(const int64_t* rows, int64_t row, int64_t pos, int64_t kh, int64_t k,
                                               int64_t c, int64_t e) {
  return ((rows ? rows[row] : row * k * c + pos) + kh * c) * e;
}

template <typename T, typename C>
__global__ void rope_kv_decode_kernel(const T* __restrict__ qkv, const int64_t* __restrict__ positions,
                                      const int64_t* __restrict__ rows, const T* __restrict__ cos_pe,
                                      const T* __restrict__ sin_pe, T* __restrict__ q, C* __restrict__ k_cache,
                                      C* __restrict__ v_cache, int64_t h, int64_t k, int64_t e, int64_t c) {
  allow_dependents();
  dependency_wait();
  const int64_t row = blockIdx.x;
  const int heads = static_cast<int>(h + 2 * k), width = static_cast<int>(e), half = width / 2;
  const int i = static_cast<int>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (i >= heads * width) return;
  const int64_t pos = positions[row];
  const T* in = qkv + row * heads * e;
  const int head = i / width, j = i - head * width;
  const auto at = [&](int64_t kh) { return cache_entry(rows, row, pos, kh, k, c, e) + j; };
  if (head >= h + k) {  // v: into the cache unrotated
    v_cache[at(head - h - k)] = to_cache<C>(in[i]);
    return;
  }
  const int swapped = j < half ? i + half : i - half;
  const T y =
      rope_entry<T>(to_f(in[i]), to_f(in[swapped]), to_f(cos_pe[pos * e + j]), to_f(sin_pe[pos * e + j]), j < half);
  if (head < h)
    q[(row * h + head) * e + j] = y;
  else
    k_cache[at(head - h)] = to_cache<C>(y);
}

// sample_rows in three launches over a row cut into S segments (fused_kernels.hpp). Rationale:
// one block a row (the earlier form) left 68 of 132 SMs idle at 64 rows and was bound by load
// latency, 144 us a step on the H200 at 64 x 151,936 (bench/results/2026-12-03-policy-h200-norm-sample.md);
// here the first two passes run S blocks a row, each thread with several loads in flight.
// 1. segment_max_kernel, a block per (segment, row): the segment's largest logit and its first
//    index. The row's max of z = logits / temperature is the largest logit / temperature
//    (correctly rounded division by a positive number keeps the order).
// 2. segment_sum_kernel, a block per (segment, row): the row's max from the S records, then the
//    segment's sum of exp(z - max).
// 3. sample_pick_kernel, a block per row: the S sums scanned into ranges of [0, total); the
//    draw's target u * total falls in one segment; the block's warps sum that segment's 32
//    sub-segments, a scan picks the sub-segment, and its warp walks it 32 entries at a time (a
//    warp scan, then a ballot for the first entry whose running sum passes the target).
//    Rounding that leaves the target past a range's entries takes the range's last entry with
//    weight (the composite's rule: a zero-weight entry is never drawn).
constexpr int segment_threads = 256;
constexpr int pick_threads = 1024;
constexpr int max_segments = 32;  // the pick kernel scans the segments' sums in one warp
constexpr int64_t segment_min_entries = 4096;

struct segment_stats {
  float max;    // largest logit (raw)
  float sum;    // sum of exp(z - row max)
  int64_t arg;  // first index of the largest logit; v when the segment has none above -inf
};

__device__ __forceinline__ void better(float& best, int64_t& arg, float ob, int64_t oa) {
  if (ob > best || (ob == best && oa < arg)) best = ob, arg = oa;
}

// A warp's (max, first argmax) in every lane.
__device__ __forceinline__ void warp_argmax(float& best, int64_t& arg) {
  for (int offset = warp / 2; offset > 0; offset >>= 1)
    better(best, arg, __shfl_xor_sync(0xffffffffu, best, offset), __shfl_xor_sync(0xffffffffu, arg, offset));
}

// A block's (max, first argmax) into thread 0's registers (blockDim.x a multiple of 32, <= 1024).
__device__ void block_argmax(float& best, int64_t& arg) {
  __shared__ float s_best[32];
  __shared__ int64_t s_arg[32];
  const int lane = threadIdx.x % warp, w = threadIdx.x / warp, warps = blockDim.x / warp;
  warp_argmax(best, arg);
  if (lane == 0) s_best[w] = best, s_arg[w] = arg;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int i = 1; i < warps; ++i) better(best, arg, s_best[i], s_arg[i]);
}

template <typename T>
__global__ void __launch_bounds__(segment_threads)
    segment_max_kernel(const T* __restrict__ logits, segment_stats* __restrict__ stats, int64_t v, int64_t seg) {
  allow_dependents();
  dependency_wait();
  const int s = blockIdx.x, segments = gridDim.x;
  const int64_t row = blockIdx.y;
  const T* x = logits + row * v;
  const int64_t lo = min(static_cast<int64_t>(s) * seg, v), hi = min(lo + seg, v);
  float best = -INFINITY;
  int64_t arg = v;
#pragma unroll 8
  for (int64_t j = lo + threadIdx.x; j < hi; j += segment_threads) {
    const float xj = to_f(x[j]);
    if (xj > best) best = xj, arg = j;  // strided: a later j of this thread never wins a tie
  }
  block_argmax(best, arg);
  if (threadIdx.x == 0) {
    segment_stats& out = stats[row * segments + s];
    out.max = best, out.arg = arg;
  }
}

template <typename T>
__global__ void __launch_bounds__(segment_threads)
    segment_sum_kernel(const T* __restrict__ logits, const float* __restrict__ params,
                       segment_stats* __restrict__ stats, int64_t b, int64_t v, int64_t seg) {
  allow_dependents();
  dependency_wait();
  const int s = blockIdx.x, segments = gridDim.x;
  const int64_t row = blockIdx.y;
  const T* x = logits + row * v;
  const float temperature = params[row];
  float m = -INFINITY;
  for (int i = 0; i < segments; ++i) m = fmaxf(m, stats[row * segments + i].max);
  const float row_max = m / temperature;
  const int64_t lo = min(static_cast<int64_t>(s) * seg, v), hi = min(lo + seg, v);
  float own = 0.0f;
#pragma unroll 8
  for (int64_t j = lo + threadIdx.x; j < hi; j += segment_threads) own += expf(to_f(x[j]) / temperature - row_max);
  const float total = block_sum(own);  // its __syncthreads: every thread has read the records
  if (threadIdx.x == 0) stats[row * segments + s].sum = total;
}

// Warp w's inclusive scan of `value` over its lanes.
__device__ __forceinline__ float warp_inclusive_scan(float value) {
  const int lane = threadIdx.x % warp;
  for (int offset = 1; offset < warp; offset <<= 1) {
    const float add = __shfl_up_sync(0xffffffffu, value, offset);
    if (lane >= offset) value += add;
  }
  return value;
}

template <typename T>
__global__ void __launch_bounds__(pick_threads)
    sample_pick_kernel(const T* __restrict__ logits, const float* __restrict__ params,
                       const segment_stats* __restrict__ stats, int64_t* __restrict__ tokens,
                       float* __restrict__ logprobs, int64_t b, int64_t v, int64_t seg, int segments) {
  allow_dependents();
  dependency_wait();
  __shared__ float s_seg_incl[max_segments];  // inclusive scan of the segments' sums
  __shared__ float s_sub_incl[32];            // inclusive scan of the drawn segment's sub-segment sums
  __shared__ int64_t s_token, s_arg;
  __shared__ float s_max;
  __shared__ int s_drawn_segment;
  const int64_t row = blockIdx.x;
  const T* x = logits + row * v;
  const segment_stats* st = stats + row * segments;
  const float temperature = params[row], uniform = params[b + row];
  const bool greedy = params[2 * b + row] != 0.0f;
  const float forced = params[3 * b + row];
  const int tid = threadIdx.x, lane = tid % warp, w = tid / warp, warps = blockDim.x / warp;
  if (w == 0) {
    float best = lane < segments ? st[lane].max : -INFINITY;
    int64_t arg = lane < segments ? st[lane].arg : v;
    warp_argmax(best, arg);
    const float incl = warp_inclusive_scan(lane < segments ? st[lane].sum : 0.0f);
    if (lane < segments) s_seg_incl[lane] = incl;
    if (lane == 0) {
      s_max = best / temperature;
      s_arg = arg < v ? arg : 0;  // a row of -inf only: index 0
      s_token = forced >= 0.0f ? static_cast<int64_t>(forced) : greedy ? s_arg : -1;
    }
  }
  __syncthreads();
  const float row_max = s_max, total = s_seg_incl[segments - 1];
  if (s_token < 0) {
    // Below total, so one segment's range holds it (u * total can round up to total).
    const float target = fminf(uniform * total, nextafterf(total, 0.0f));
    if (tid == 0) {
      int drawn = -1;
      for (int i = 0; i < segments && drawn < 0; ++i)
        if (target < s_seg_incl[i] && st[i].sum > 0.0f) drawn = i;
      for (int i = segments - 1; i >= 0 && drawn < 0; --i)  // past every range by rounding
        if (st[i].sum > 0.0f) drawn = i;
      s_drawn_segment = drawn;
    }
    __syncthreads();
    const int s = s_drawn_segment;
    if (s >= 0) {
      const float from = s > 0 ? s_seg_incl[s - 1] : 0.0f;
      const int64_t seg_lo = min(static_cast<int64_t>(s) * seg, v), seg_hi = min(seg_lo + seg, v);
      const int64_t sub = ((seg_hi - seg_lo + warps - 1) / warps + warp - 1) / warp * warp;
      const int64_t lo = min(seg_lo + w * sub, seg_hi), hi = min(lo + sub, seg_hi);
      float own = 0.0f;
      for (int64_t j = lo + lane; j < hi; j += warp) own += expf(to_f(x[j]) / temperature - row_max);
      for (int offset = warp / 2; offset > 0; offset >>= 1) own += __shfl_xor_sync(0xffffffffu, own, offset);
      if (lane == 0) s_sub_incl[w] = own;
      __syncthreads();
      if (w == 0) s_sub_incl[lane] = warp_inclusive_scan(lane < warps ? s_sub_incl[lane] : 0.0f);
      __syncthreads();
      // The target within the segment, kept below the sub-segments' total (their sums are this
      // block's, in another order than segment_sum_kernel's).
      const float sub_total = s_sub_incl[warps - 1];
      const float local = fminf(fmaxf(target - from, 0.0f), nextafterf(sub_total, 0.0f));
      const float sub_from = w > 0 ? s_sub_incl[w - 1] : 0.0f, sub_upto = s_sub_incl[w];
      if (local >= sub_from && local < sub_upto) {  // this warp's sub-segment only (uniform over the warp)
        float cum = sub_from;
        int64_t pick = -1;
        for (int64_t base = lo; base < hi; base += warp) {
          const int64_t j = base + lane;
          const float p = j < hi ? expf(to_f(x[j]) / temperature - row_max) : 0.0f;
          const float run = warp_inclusive_scan(p);
          const unsigned weighted = __ballot_sync(0xffffffffu, p > 0.0f);  // never draw a zero weight
          const unsigned passed = __ballot_sync(0xffffffffu, p > 0.0f && cum + run > local);
          if (passed != 0u) {
            pick = base + __ffs(passed) - 1;
            break;
          }
          if (weighted != 0u) pick = base + (warp - 1 - __clz(weighted));
          cum += __shfl_sync(0xffffffffu, run, warp - 1);
        }
        if (lane == 0) s_token = pick;  // past the sub-segment by rounding: its last entry with weight
      }
    }
  }
  __syncthreads();
  if (tid == 0) {
    // No range claimed the target only if rounding emptied every one: the most likely token.
    const int64_t token = s_token >= 0 ? s_token : s_arg;
    tokens[row] = token;
    logprobs[row] = to_f(x[token]) / temperature - row_max - logf(total);
  }
}

// merge_shares (fused_kernels.hpp): a block per (row, query head). Its threads are `groups` groups
// of `cols` consecutive dimensions; group k sums shares k, k + groups, ... so a row's shares are
// read in parallel (one thread looping over 128 shares cost 18 us a call on the H200,
// bench/results/2026-12-04-policy-h200-shares-gemv.md). Weights exp(lse_s - max) of the shares
// holding keys, fp32 sums joined in group order, then one rounding.
constexpr int merge_threads = 1024;

template <typename T>
__global__ void __launch_bounds__(merge_threads)
    merge_shares_kernel(const T* __restrict__ out_xge, const float* __restrict__ lse_gx,
                        const int32_t* __restrict__ used_x, T* __restrict__ merged_yge, int shares, int g, int e,
                        bool share_major) {
  allow_dependents();
  dependency_wait();
  __shared__ float acc_s[merge_threads];
  __shared__ float total_s[merge_threads];
  __shared__ float max_s[merge_threads / warp];
  const int64_t y = blockIdx.x / g;
  const int q = static_cast<int>(blockIdx.x % g);
  const int64_t y_count = static_cast<int64_t>(gridDim.x) / g, x_count = y_count * shares;
  // Share s of row y is sequence y * shares + s, or share-major s * y_count + y.
  const int64_t first = share_major ? y : y * shares, stride = share_major ? y_count : 1;
  const float* lse_s = lse_gx + q * x_count + first;
  const int32_t* used_s = used_x + first;
  float m = -INFINITY;
  for (int s = static_cast<int>(threadIdx.x); s < shares; s += static_cast<int>(blockDim.x))
    if (used_s[s * stride] > 0) m = fmaxf(m, lse_s[s * stride]);
  for (int offset = warp / 2; offset > 0; offset >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if (threadIdx.x % warp == 0) max_s[threadIdx.x / warp] = m;
  __syncthreads();
  m = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x) / warp; ++w) m = fmaxf(m, max_s[w]);
  const int cols = min(e, static_cast<int>(blockDim.x)), groups = static_cast<int>(blockDim.x) / cols;
  const int col = static_cast<int>(threadIdx.x) % cols, group = static_cast<int>(threadIdx.x) / cols;
  for (int d0 = 0; d0 < e; d0 += cols) {
    const int d = d0 + col;
    float acc = 0.0f, total = 0.0f;
    if (group < groups && d < e)
      for (int s = group; s < shares; s += groups) {
        if (used_s[s * stride] <= 0) continue;
        const float w = expf(lse_s[s * stride] - m);
        total += w;
        acc += w * to_f(out_xge[((first + s * stride) * g + q) * e + d]);
      }
    acc_s[threadIdx.x] = acc;
    total_s[threadIdx.x] = total;
    __syncthreads();
    if (group == 0 && d < e) {
      float a = 0.0f, t = 0.0f;
      for (int k = 0; k < groups; ++k) {
        a += acc_s[k * cols + col];
        t += total_s[k * cols + col];
      }
      merged_yge[(y * g + q) * e + d] = from_f<T>(t > 0.0f ? a / t : 0.0f);
    }
    __syncthreads();
  }
}

// gemv_rows (fused_kernels.hpp): `split` warps per output feature (1, 2, 4 or 8), each over its
// share of the input dimension. Each lane streams the weight row in 16-byte vectors, gemv_unroll
// of them in flight, and reads the input rows' matching vectors (the same few rows for every
// warp, so they stay in L1 / L2); fp32 sums reduced across the warp, then across the row's warps
// through shared memory, the bias added, one rounding. Rationale: a warp per feature left an
// output of 896 features (a 0.5B model's o and down projections) at 112 blocks on 132 SMs with a
// few loads in flight each: 480 us a 1-row step for 715 MB of weights, ~1.5 TB/s on the H200;
// split, 455 us (bench/results/2026-12-04-policy-h200-paged-in-place.md, calls 3 and 4). The rest
// is per call: 96 calls a step, the q/k/v and o ones ~2 MB each.
constexpr int gemv_threads = 256;
constexpr int gemv_warps = gemv_threads / 32;
constexpr int gemv_unroll = 4;
constexpr int64_t gemv_first_bytes = 16 * gemv_unroll * gemv_threads;  // a block's first weight vectors

// Two forms save the step's kernel around a gemv. Norm: the input rows are add_rms_norm's normed
// rows, made by each block into shared memory first (x_bd the residual rows, delta_bd added first
// where not null, norm_d the norm's weight; the block of index 0 writes the sum to sum_bd); the norm
// needs whole rows, so b x d elements of shared memory, gemv_staged_bytes at most, a few KB read
// from L2 a block. Silu: w_nd is a fused gate/up projection (n = 2f: gate rows, then up rows) and
// the output is silu_mul's [b, f]: a block's warps take gate features j.. and the matching up
// features f + j.., and the up feature's warp writes silu(gate) * up. Rope: w_nd is a fused q/k/v
// projection (n = (h + 2k) e) and the output is rope_kv_decode's: a block's warps take entries i..
// of a head and the matching i + e/2.., and the second's warp rotates both (q and k heads) and
// writes them to q (y_bn as [b, h, e]) or the k cache, or (v heads) writes both to the v cache.
// Each gives the bits of the kernels one by one. Rationale: a 1-row decode step of the 0.5B shape ran ten kernels a
// layer, a norm or silu_mul ~2-3 us each plus the gap before the next (bench/results/2026-12-04-policy-h200-shares-
// gemv.md: 1,620 us busy of 1,880 us a 131k step); Norm and Silu leave seven, Rope six.
template <typename T>
struct gemv_args {
  const T* x_bd;
  const T* delta_bd;
  const T* norm_d;
  T* sum_bd;
  float eps;
  const T* w_nd;
  const T* bias_n;
  T* y_bn;
  int64_t n, d;
  int split;
  // Rope only (rope_kv_decode's arguments): the rows' positions, paged rows (null: slots), the
  // tables, the caches (e4m3 bytes where fp8_cache, else T) and the heads' shape.
  const int64_t* positions_b = nullptr;
  const int64_t* rows_b = nullptr;
  const T* cos_pe = nullptr;
  const T* sin_pe = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  int64_t h = 0, k = 0, e = 0, c = 0;
  bool fp8_cache = false;
};

// The epilogues of gemv_rows_kernel: the product as is, silu_mul's or rope_kv_decode's of it.
// The last two pair the block's features (pair_features).
enum class gemv_epilogue { plain, silu_mul, rope_kv };

// The feature of pair p that slot half `which` (0, 1) computes, of n: silu_mul pairs gate p with
// up n/2 + p; rope_kv pairs entry i of a head with entry i + e/2 (p = head * e/2 + i).
template <gemv_epilogue Epi, typename T>
__device__ __forceinline__ int64_t pair_feature(const gemv_args<T>& a, int64_t p, int which) {
  if constexpr (Epi == gemv_epilogue::silu_mul) return p + which * (a.n / 2);
  const int64_t half = a.e / 2;
  return p / half * a.e + p % half + which * half;
}

// Writes rope_kv_decode's two entries of pair p for row r: x0 the first (entry i), x1 the
// second (i + e/2), both rounded to T.
template <typename T>
__device__ __forceinline__ void write_rope_pair(const gemv_args<T>& a, int r, int64_t p, float x0, float x1) {
  const int64_t half = a.e / 2, head = p / half, i = p % half, pos = a.positions_b[r];
  const auto put = [&](void* cache, int64_t kh, T lo, T hi) {
    const int64_t at = cache_entry(a.rows_b, r, pos, kh, a.k, a.c, a.e) + i;
    if (a.fp8_cache) {
      static_cast<uint8_t*>(cache)[at] = to_cache<uint8_t>(lo);
      static_cast<uint8_t*>(cache)[at + half] = to_cache<uint8_t>(hi);
    } else {
      static_cast<T*>(cache)[at] = lo;
      static_cast<T*>(cache)[at + half] = hi;
    }
  };
  if (head >= a.h + a.k) {  // v: unrotated
    put(a.v_cache, head - a.h - a.k, from_f<T>(x0), from_f<T>(x1));
    return;
  }
  const T* cos_p = a.cos_pe + pos * a.e;
  const T* sin_p = a.sin_pe + pos * a.e;
  const T y0 = rope_entry<T>(x0, x1, to_f(cos_p[i]), to_f(sin_p[i]), true);
  const T y1 = rope_entry<T>(x1, x0, to_f(cos_p[i + half]), to_f(sin_p[i + half]), false);
  if (head < a.h) {
    a.y_bn[(r * a.h + head) * a.e + i] = y0;
    a.y_bn[(r * a.h + head) * a.e + i + half] = y1;
  } else {
    put(a.k_cache, head - a.h, y0, y1);
  }
}

// The norm's R rows (vecs 16-byte vectors each) into x_s: every thread of the block calls it.
// Groups of norm_threads threads take a row each at a time, as add_rms_norm_vec_kernel's blocks.
template <typename T, int R>
__device__ __forceinline__ void stage_normed_rows(const gemv_args<T>& a, uint4* x_s) {
  constexpr int per_vec = 16 / sizeof(T), groups = gemv_threads / norm_threads;
  const int64_t d = a.d, vecs = d / per_vec;
  __shared__ float partial_s[groups][norm_threads / warp];
  const int group = threadIdx.x / norm_threads;
  for (int first = 0; first < R; first += groups) {
    const int r = first + group;
    const bool active = r < R;
    const int64_t row = (active ? r : 0) * d;
    const auto vec = [&](const T* p) { return reinterpret_cast<const uint4*>(p + row); };
    add_rms_norm_row<T, norm_vecs_per_thread>(
        vec(a.x_bd), a.delta_bd != nullptr ? vec(a.delta_bd) : nullptr, reinterpret_cast<const uint4*>(a.norm_d),
        a.sum_bd != nullptr && blockIdx.x == 0 ? reinterpret_cast<uint4*>(a.sum_bd + row) : nullptr,
        x_s + (active ? r : 0) * vecs, d, a.eps, threadIdx.x % norm_threads, partial_s[group], active);
  }
  __syncthreads();
}

// Blocks loop over the groups of features (a block's gemv_warps / split features; Silu: its
// pairs), gridDim.x apart, and load the next group's first weight vectors before reducing the
// current one, so a block's loads stream from one group into the next. Rationale: one group a
// block left the 0.5B gate/up projection at 1,216 blocks where 396 fit at once (3 waves, the
// last nearly empty) and each block with one round of loads; the GEMVs read 1.25 TB/s in the
// 1-row 131k step (bench/results/2026-12-05-policy-h200-e4m3-fused-gemv.md, call 1).
// Blocks a multiprocessor should hold of the R-row kernel (its registers capped to fit them).
// Rationale: uncapped, the 1-row forms took 61-95 registers a thread, 2 or 3 blocks of 8 warps a
// multiprocessor for the norm's forms, each warp with one feature's 4 vectors a lane in flight:
// too few loads in flight to stream the weights at the bandwidth. Measured with the RoPE form
// (bench/results/2026-12-06-policy-h100-early-tiles-rope-gemv.md, call 3, an H100): gate/up 10.12
// -> 9.65 us, down 6.47 -> 6.15 us alone; the 131k decode 799.2 -> 810.8 tok/s (three rounds each).
// The RoPE form (its epilogue's positions, tables and cache addresses) spilled 72-80 bytes at 3
// (80 registers, ptxas sm_90, 1 and 2 rows): 2, with the small GEMVs' two blocks a multiprocessor.
__host__ __device__ constexpr int gemv_min_blocks(int rows, bool norm, bool rope = false) {
  return rows > 2 ? 1 : rope ? 2 : norm ? 3 : 4;
}

template <typename T, int R, bool Norm, gemv_epilogue Epi>
__global__ void __launch_bounds__(gemv_threads, gemv_min_blocks(R, Norm, Epi == gemv_epilogue::rope_kv))
    gemv_rows_kernel(const gemv_args<T> a) {
  constexpr bool paired = Epi != gemv_epilogue::plain;
  allow_dependents();
  extern __shared__ uint4 gemv_x_s[];  // Norm: the normed rows
  constexpr int per_vec = 16 / sizeof(T);
  __shared__ float part_s[gemv_warps][R];
  __shared__ float gate_s[gemv_warps][R];  // paired: the first features' rounded values
  const int64_t n = a.n, d = a.d;
  const int split = a.split, per_block = gemv_warps / split, pairs = per_block / 2;
  const int lane = threadIdx.x % warp, wid = threadIdx.x / warp, slot = wid / split;
  const int64_t groups = paired ? (n / 2 + pairs - 1) / pairs : (n + per_block - 1) / per_block;
  // The warp's output feature in a group (n when none). Paired: the block's first half of slots
  // take the pairs' first features, the second half their second (pair_feature).
  const auto feature = [&](int64_t group) -> int64_t {
    if (group >= groups) return n;
    if constexpr (paired) {
      const int64_t pair = group * pairs + slot % pairs;
      return pair < n / 2 ? pair_feature<Epi>(a, pair, slot / pairs) : n;
    }
    return group * per_block + slot;
  };
  const int part = wid % split;
  const int64_t vecs = d / per_vec, chunk = (vecs + split - 1) / split;
  const int64_t first = part * chunk, last = first + chunk < vecs ? first + chunk : vecs;
  uint4 wv[gemv_unroll];
  const auto load_weights = [&](int64_t j, int64_t base) {
    const uint4* w = reinterpret_cast<const uint4*>(a.w_nd + (j < n ? j : 0) * d);
#pragma unroll
    for (int u = 0; u < gemv_unroll; ++u) {
      const int64_t at = base + u * warp + lane;
      wv[u] = j < n && at < last ? __ldg(w + at) : make_uint4(0, 0, 0, 0);
    }
  };
  int64_t group = blockIdx.x, j = feature(group);
  // The first vectors of the weight row: no kernel of a step writes weights, so they load before
  // the wait for the kernel before this one (programmatic_launch.cuh), overlapping its tail. As
  // copies into shared memory (each thread its own slots): ptxas issued plain loads of them after
  // griddepcontrol.wait in every form (cuobjdump -sass, sm_90), so they never overlapped the kernel
  // before; async copies stay before it, as the e4m3 split kernel's ring tiles do.
  __shared__ uint4 first_w_s[gemv_unroll][gemv_threads];
  {
    const uint4* w = reinterpret_cast<const uint4*>(a.w_nd + (j < n ? j : 0) * d);
#pragma unroll
    for (int u = 0; u < gemv_unroll; ++u) {
      const int64_t at = first + u * warp + lane;
      const bool valid = j < n && at < last;
      copy_16_or_zero(&first_w_s[u][threadIdx.x], valid ? w + at : w, valid);
    }
    copy_commit();
  }
  dependency_wait();
  copy_wait<0>();
#pragma unroll
  for (int u = 0; u < gemv_unroll; ++u) wv[u] = first_w_s[u][threadIdx.x];
  if constexpr (Norm) stage_normed_rows<T, R>(a, gemv_x_s);
  for (; group < groups; group += gridDim.x) {
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    if (j < n) {
      for (int64_t base = first; base < last; base += warp * gemv_unroll) {
        if (base != first) load_weights(j, base);
#pragma unroll
        for (int u = 0; u < gemv_unroll; ++u) {
          const int64_t at = base + u * warp + lane;
          if (at < last) {
            const T* we = reinterpret_cast<const T*>(&wv[u]);
#pragma unroll
            for (int r = 0; r < R; ++r) {
              uint4 xv;
              if constexpr (Norm)
                xv = gemv_x_s[r * vecs + at];
              else
                xv = __ldg(reinterpret_cast<const uint4*>(a.x_bd + r * d) + at);
              const T* xe = reinterpret_cast<const T*>(&xv);
#pragma unroll
              for (int i = 0; i < per_vec; ++i) acc[r] = fmaf(to_f(we[i]), to_f(xe[i]), acc[r]);
            }
          }
        }
      }
    }
    const int64_t this_j = j;
    j = feature(group + gridDim.x);
    load_weights(j, first);  // the next group's, in flight while this one is reduced
#pragma unroll
    for (int r = 0; r < R; ++r)
      for (int offset = warp / 2; offset > 0; offset >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], offset);
    if (split > 1) {
      if (lane == 0)
#pragma unroll
        for (int r = 0; r < R; ++r) part_s[wid][r] = acc[r];
      __syncthreads();
      if (lane == 0 && part == 0)
#pragma unroll
        for (int r = 0; r < R; ++r) {
          acc[r] = 0.0f;
          for (int k = 0; k < split; ++k) acc[r] += part_s[wid + k][r];
        }
    }
    const bool writes = lane == 0 && part == 0 && this_j < n;
    const float bias = writes && a.bias_n != nullptr ? to_f(a.bias_n[this_j]) : 0.0f;
    if constexpr (paired) {
      // The first feature's rounded value to the second's warp (slot + pairs), which writes both.
      const bool first_half = slot < pairs;
      if (writes && first_half)
#pragma unroll
        for (int r = 0; r < R; ++r) gate_s[slot][r] = round_to<T>(acc[r] + bias);
      __syncthreads();
      if (writes && !first_half) {
        if constexpr (Epi == gemv_epilogue::silu_mul) {
          const int64_t f = n / 2;
#pragma unroll
          for (int r = 0; r < R; ++r)
            a.y_bn[r * f + this_j - f] = silu_times<T>(gate_s[slot - pairs][r], round_to<T>(acc[r] + bias));
        } else {
          const int64_t pair = group * pairs + slot % pairs;
#pragma unroll
          for (int r = 0; r < R; ++r)
            write_rope_pair<T>(a, r, pair, gate_s[slot - pairs][r], round_to<T>(acc[r] + bias));
        }
      }
    } else if (writes) {
#pragma unroll
      for (int r = 0; r < R; ++r) a.y_bn[r * n + this_j] = from_f<T>(acc[r] + bias);
    }
    if (paired || split > 1) __syncthreads();  // part_s and gate_s read before the next group writes them
  }
}

// Shared memory a multiprocessor has for blocks (read once; the H200's 228 KiB until then).
int64_t shared_memory_per_multiprocessor() {
  static const int64_t bytes = [] {
    int device = 0, value = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) != cudaSuccess ||
        value <= 0) {
      cudaGetLastError();
      return int64_t{228 * 1024};
    }
    return static_cast<int64_t>(value);
  }();
  return bytes;
}

// Warps per output feature: doubled (to 8 at most) while the blocks would not fill the GPU four
// times over and each warp would still have a vector per lane.
int gemv_split(int64_t n, int64_t vecs) {
  const int64_t sms = multiprocessor_count() > 0 ? multiprocessor_count() : 132;
  int split = 1;
  while (split < gemv_warps && n * split / gemv_warps < 4 * sms && vecs / (2 * split) >= warp) split *= 2;
  return split;
}

// The kernel for b rows (1 <= b <= gemv_max_rows), an instance per row count. Paired epilogues: at
// most gemv_warps / 2 warps a feature, so that a block holds whole pairs. As many blocks as
// the device holds at once (the kernel's occupancy with its shared memory), fewer when there are
// fewer groups.
template <typename T, bool Norm, gemv_epilogue Epi, int R = 1>
void launch_gemv(int64_t b, gemv_args<T> a, cudaStream_t stream) {
  if constexpr (R < gemv_max_rows) {
    if (b > R) return launch_gemv<T, Norm, Epi, R + 1>(b, a, stream);
  }
  constexpr bool paired = Epi != gemv_epilogue::plain;
  a.split = gemv_split(a.n, a.d / (16 / static_cast<int64_t>(sizeof(T))));
  if (paired && a.split > gemv_warps / 2) a.split = gemv_warps / 2;
  // Small weights (q/k/v, o: one round of loads over the device): a warp a whole feature, so a
  // feature needs no reduction across warps, and few blocks (bench_boundaries.py: a 1.6-2.1 MB
  // phase ends ~1 us sooner at one block a multiprocessor than at four).
  const bool small = a.n * a.d * static_cast<int64_t>(sizeof(T)) <= (int64_t{4} << 20);
  if (small) a.split = 1;
  const int64_t per_block = gemv_warps / a.split, taken = paired ? per_block / 2 : per_block;
  const int64_t groups = ((paired ? a.n / 2 : a.n) + taken - 1) / taken;
  const size_t staged = Norm ? static_cast<size_t>(R * a.d) * sizeof(T) : 0;
  // The staged rows (up to gemv_staged_bytes) beside the first weights' static 16 KiB pass the 48
  // KiB a block gets without asking: asked once a kernel.
  if constexpr (Norm) {
    static const bool asked = [] {
      cudaFuncSetAttribute(gemv_rows_kernel<T, R, Norm, Epi>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(gemv_staged_bytes));
      return true;
    }();
    (void)asked;
  }
  // Blocks a multiprocessor holds: the kernel's occupancy without the staged rows (read once,
  // outside a graph capture; 3 until then), then as many as the staged rows leave room for.
  static std::atomic<int> by_registers{0};
  if (by_registers.load() == 0 && !stream_capturing(stream)) {
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, gemv_rows_kernel<T, R, Norm, Epi>, gemv_threads, 0) !=
            cudaSuccess ||
        blocks < 1) {
      cudaGetLastError();
      blocks = 1;
    }
    by_registers = blocks;
  }
  int64_t resident = by_registers.load() > 0 ? by_registers.load() : 3;
  if (staged > 0)
    resident =
        std::max<int64_t>(1, std::min<int64_t>(resident, shared_memory_per_multiprocessor() /
                                                             static_cast<int64_t>(staged + gemv_first_bytes + 4096)));
  const int64_t sms = multiprocessor_count() > 0 ? multiprocessor_count() : 132;
  int64_t cap = resident * sms;
  if (small) cap = std::min<int64_t>(cap, 2 * sms);
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(groups, cap));
  launch(gemv_rows_kernel<T, R, Norm, Epi>, blocks, gemv_threads, staged, stream, a);
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
    constexpr int n = 16 / sizeof(T), vec_per_thread = norm_vecs_per_thread;
    const bool vec = d % n == 0 && d / n <= static_cast<int64_t>(norm_threads) * vec_per_thread &&
                     aligned16(residual_xd) && aligned16(delta_xd) && aligned16(weight_d) && aligned16(sum_xd) &&
                     aligned16(normed_xd);
    const auto grid = static_cast<unsigned>(x);
    const auto cuda_stream = static_cast<cudaStream_t>(stream);
    if (vec)
      launch(add_rms_norm_vec_kernel<T, vec_per_thread>, grid, norm_threads, 0, cuda_stream,
             static_cast<const T*>(residual_xd), static_cast<const T*>(delta_xd), static_cast<const T*>(weight_d),
             static_cast<T*>(sum_xd), static_cast<T*>(normed_xd), d, eps);
    else
      launch(add_rms_norm_kernel<T>, grid, norm_threads, 0, cuda_stream, static_cast<const T*>(residual_xd),
             static_cast<const T*>(delta_xd), static_cast<const T*>(weight_d), static_cast<T*>(sum_xd),
             static_cast<T*>(normed_xd), d, eps);
  });
}

int silu_mul(element dtype, const void* gate_up_x2f, void* out_xf, int64_t x, int64_t f, void* stream) {
  const int64_t total = x * f;
  if (total == 0) return 0;
  constexpr int threads = 256;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((total + threads - 1) / threads, 65535));
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    launch(silu_mul_kernel<T>, blocks, threads, 0, static_cast<cudaStream_t>(stream),
           static_cast<const T*>(gate_up_x2f), static_cast<T*>(out_xf), x, f);
  });
}

int rope_kv_decode(element dtype, const void* qkv_bne, const int64_t* positions_b, const int64_t* rows_b,
                   const void* cos_pe, const void* sin_pe, void* q_bhe, void* k_cache_nkce, void* v_cache_nkce,
                   int64_t b, int64_t h, int64_t k, int64_t e, int64_t c, bool fp8_cache, void* stream) {
  if (b == 0) return 0;
  const int64_t n = (h + 2 * k) * e;  // entries a row
  if (b > 0x7fffffff || n > 0x7fffffff) return static_cast<int>(cudaErrorInvalidConfiguration);
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    const dim3 grid(static_cast<unsigned>(b), static_cast<unsigned>((n + rope_threads - 1) / rope_threads));
    const auto for_cache = [&](auto cache_tag) {
      using C = decltype(cache_tag);
      launch(rope_kv_decode_kernel<T, C>, grid, rope_threads, 0, static_cast<cudaStream_t>(stream),
             static_cast<const T*>(qkv_bne), positions_b, rows_b, static_cast<const T*>(cos_pe),
             static_cast<const T*>(sin_pe), static_cast<T*>(q_bhe), static_cast<C*>(k_cache_nkce),
             static_cast<C*>(v_cache_nkce), h, k, e, c);
    };
    if (fp8_cache)
      for_cache(uint8_t{});
    else
      for_cache(T{});
  });
}

namespace {
int64_t sample_segments(int64_t v) {
  return std::clamp<int64_t>((v + segment_min_entries - 1) / segment_min_entries, 1, max_segments);
}
}  // namespace

int64_t sample_rows_work_bytes(int64_t b, int64_t v) {
  return b * sample_segments(v) * static_cast<int64_t>(sizeof(segment_stats));
}

int sample_rows(element dtype, const void* logits_bv, const float* params_4b, int64_t* tokens_b, float* logprobs_b,
                void* segments_work, int64_t b, int64_t v, void* stream) {
  if (b == 0) return 0;
  if (v <= 0 || b > 65535) return static_cast<int>(cudaErrorInvalidValue);
  const int64_t segments = sample_segments(v);
  const int64_t seg = ((v + segments - 1) / segments + warp - 1) / warp * warp;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  auto* stats = static_cast<segment_stats*>(segments_work);
  const dim3 grid(static_cast<unsigned>(segments), static_cast<unsigned>(b));
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto* logits = static_cast<const T*>(logits_bv);
    launch(segment_max_kernel<T>, grid, segment_threads, 0, cuda_stream, logits, stats, v, seg);
    launch(segment_sum_kernel<T>, grid, segment_threads, 0, cuda_stream, logits, params_4b, stats, b, v, seg);
    launch(sample_pick_kernel<T>, static_cast<unsigned>(b), pick_threads, 0, cuda_stream, logits, params_4b, stats,
           tokens_b, logprobs_b, b, v, seg, static_cast<int>(segments));
  });
}

int merge_shares(element dtype, const void* out_xge, const float* lse_gx, const int32_t* used_x, void* merged_yge,
                 int64_t y, int64_t shares, int64_t g, int64_t e, bool share_major, void* stream) {
  if (y == 0) return 0;
  if (shares < 1 || g < 1 || e < 1 || y * g > 0x7fffffff || shares > 0x7fffffff)
    return static_cast<int>(cudaErrorInvalidValue);
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    // Enough threads for every (dimension, share) pair, in whole warps, at most merge_threads.
    const int64_t pairs = std::min<int64_t>(e * shares, merge_threads);
    const int threads = static_cast<int>((pairs + warp - 1) / warp * warp);
    launch(merge_shares_kernel<T>, static_cast<unsigned>(y * g), threads, 0, static_cast<cudaStream_t>(stream),
           static_cast<const T*>(out_xge), lse_gx, used_x, static_cast<T*>(merged_yge), static_cast<int>(shares),
           static_cast<int>(g), static_cast<int>(e), share_major);
  });
}

namespace {

bool gemv_shape_fits(element dtype, const void* x_bd, const void* w_nd, int64_t b, int64_t n, int64_t d) {
  const int per_vec = dtype == element::fp32 ? 4 : 8;
  return b >= 0 && b <= gemv_max_rows && n >= 0 && d >= 1 && d % per_vec == 0 && aligned16(x_bd) && aligned16(w_nd) &&
         (n + 7) / 8 <= 0x7fffffff;
}

// rope_kv_decode's arguments beyond the product's (gemv_epilogue::rope_kv).
struct rope_kv_args {
  const int64_t* positions_b;
  const int64_t* rows_b;
  const void* cos_pe;
  const void* sin_pe;
  void* k_cache;
  void* v_cache;
  int64_t h, k, e, c;
  bool fp8_cache;
};

template <bool Norm, gemv_epilogue Epi>
int run_gemv(element dtype, const void* x_bd, const void* delta_bd, const void* norm_d, void* sum_bd, float eps,
             const void* w_nd, const void* bias_n, void* y_bn, int64_t b, int64_t n, int64_t d, void* stream,
             const rope_kv_args* rope = nullptr) {
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    gemv_args<T> a{static_cast<const T*>(x_bd),
                   static_cast<const T*>(delta_bd),
                   static_cast<const T*>(norm_d),
                   static_cast<T*>(sum_bd),
                   eps,
                   static_cast<const T*>(w_nd),
                   static_cast<const T*>(bias_n),
                   static_cast<T*>(y_bn),
                   n,
                   d,
                   1};
    if (rope != nullptr) {
      a.positions_b = rope->positions_b;
      a.rows_b = rope->rows_b;
      a.cos_pe = static_cast<const T*>(rope->cos_pe);
      a.sin_pe = static_cast<const T*>(rope->sin_pe);
      a.k_cache = rope->k_cache;
      a.v_cache = rope->v_cache;
      a.h = rope->h, a.k = rope->k, a.e = rope->e, a.c = rope->c;
      a.fp8_cache = rope->fp8_cache;
    }
    launch_gemv<T, Norm, Epi>(b, a, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace

int gemv_rows(element dtype, const void* x_bd, const void* w_nd, const void* bias_n, void* y_bn, int64_t b, int64_t n,
              int64_t d, bool silu_mul, void* stream) {
  if (b == 0 || n == 0) return 0;
  if (!gemv_shape_fits(dtype, x_bd, w_nd, b, n, d) || (silu_mul && n % 2 != 0))
    return static_cast<int>(cudaErrorInvalidValue);
  return silu_mul ? run_gemv<false, gemv_epilogue::silu_mul>(dtype, x_bd, nullptr, nullptr, nullptr, 0.0f, w_nd, bias_n,
                                                             y_bn, b, n, d, stream)
                  : run_gemv<false, gemv_epilogue::plain>(dtype, x_bd, nullptr, nullptr, nullptr, 0.0f, w_nd, bias_n,
                                                          y_bn, b, n, d, stream);
}

bool gemv_stages(element dtype, int64_t b, int64_t d) {
  const int64_t size = dtype == element::fp32 ? 4 : 2, per_vec = 16 / size;
  return b >= 1 && b <= gemv_max_rows && d >= 1 && d % per_vec == 0 && b * d * size <= gemv_staged_bytes &&
         d / per_vec <= static_cast<int64_t>(norm_threads) * norm_vecs_per_thread;
}

int add_rms_norm_gemv_rows(element dtype, const void* residual_bd, const void* delta_bd, const void* norm_d, float eps,
                           void* sum_bd, const void* w_nd, const void* bias_n, void* y_bn, int64_t b, int64_t n,
                           int64_t d, bool silu_mul, void* stream) {
  if (b == 0 || n == 0) return 0;
  if (!gemv_stages(dtype, b, d) || !gemv_shape_fits(dtype, residual_bd, w_nd, b, n, d) || !aligned16(delta_bd) ||
      !aligned16(norm_d) || !aligned16(sum_bd) || (delta_bd == nullptr) != (sum_bd == nullptr) ||
      (silu_mul && n % 2 != 0))
    return static_cast<int>(cudaErrorInvalidValue);
  return silu_mul ? run_gemv<true, gemv_epilogue::silu_mul>(dtype, residual_bd, delta_bd, norm_d, sum_bd, eps, w_nd,
                                                            bias_n, y_bn, b, n, d, stream)
                  : run_gemv<true, gemv_epilogue::plain>(dtype, residual_bd, delta_bd, norm_d, sum_bd, eps, w_nd,
                                                         bias_n, y_bn, b, n, d, stream);
}

int add_rms_norm_gemv_rope_kv(element dtype, const void* residual_bd, const void* delta_bd, const void* norm_d,
                              float eps, void* sum_bd, const void* w_nd, const void* bias_n, void* q_bhe, int64_t b,
                              int64_t d, const int64_t* positions_b, const int64_t* rows_b, const void* cos_pe,
                              const void* sin_pe, void* k_cache, void* v_cache, int64_t h, int64_t k, int64_t e,
                              int64_t c, bool fp8_cache, void* stream) {
  if (b == 0) return 0;
  const int64_t n = (h + 2 * k) * e;
  if (!gemv_stages(dtype, b, d) || !gemv_shape_fits(dtype, residual_bd, w_nd, b, n, d) || !aligned16(delta_bd) ||
      !aligned16(norm_d) || !aligned16(sum_bd) || (delta_bd == nullptr) != (sum_bd == nullptr) || h < 1 || k < 1 ||
      e < 2 || e % 2 != 0 || c < 1 || positions_b == nullptr || cos_pe == nullptr || sin_pe == nullptr ||
      k_cache == nullptr || v_cache == nullptr || q_bhe == nullptr || (fp8_cache && dtype == element::fp32))
    return static_cast<int>(cudaErrorInvalidValue);
  const rope_kv_args rope{positions_b, rows_b, cos_pe, sin_pe, k_cache, v_cache, h, k, e, c, fp8_cache};
  return run_gemv<true, gemv_epilogue::rope_kv>(dtype, residual_bd, delta_bd, norm_d, sum_bd, eps, w_nd, bias_n, q_bhe,
                                                b, n, d, stream, &rope);
}

namespace {
std::atomic<bool> programmatic{false};
}  // namespace

bool programmatic_launch() {
  return programmatic.load(std::memory_order_relaxed);
}

void set_programmatic_launch(bool on) {
  programmatic.store(on, std::memory_order_relaxed);
}

void prefer_max_shared(const void* kernel) {
  // Once a (device, kernel): the attribute is the current device's.
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  static std::mutex mutex;
  static std::set<std::pair<int, const void*>> done;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!done.emplace(device, kernel).second) return;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared) !=
      cudaSuccess)
    cudaGetLastError();
}

bool stream_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

int multiprocessor_count() {
  static const int count = [] {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
      return 0;
    return sms;
  }();
  return count;
}

}  // namespace caf_agent::policy::kernels
