// bench_rows_wgmma: whether a projection of our own on Hopper's asynchronous tensor-core path (TMA
// tiles into a ring of shared memory, wgmma reading them there) beats cuBLAS at the cached agent
// workload's decode shapes: y = x w^T for 64 rows of x (bf16) and the 0.5B model's four fused
// weights (q/k/v 1152 x 896, o 896 x 896, gate/up 9728 x 896, down 896 x 4864), where cuBLAS reads
// the weights at ~1.2-2.3 TB/s of the H200's 4.8 (docs/POLICY_MODEL.md, "What the open targets
// need"), and where policy/model/mma_kernels.cu's mma.sync form was 3.3x slower than cuBLAS.
//
// The kernel (`rows_wgmma`): y^T = w x^T, the weight the wgmma's A operand (64 features a tile,
// m64), the rows its B operand (n64: rows past `rows` are the tensor map's zero fill), k16 steps.
// A block is two consumer warpgroups (each `Tiles` m64 tiles of features, so a block has
// 128 * Tiles features) and one producer warp whose lane 0 issues the tensor copies (`cp.async.bulk.
// tensor`, 128-byte swizzle) of each 64-element chunk of d: the block's weight rows and the 64 rows
// of x, into a ring of `stages` stages, each completing on its stage's mbarrier; the consumers'
// warps free a stage on another mbarrier once their wgmma on it are done. The weights' first stages
// are issued before the programmatic wait (`--pdl 1`: they do not depend on the kernel before), the
// x tiles after it. d is cut into S shares (1-16; over 8 a non-portable cluster size, skipped where
// cudaOccupancyMaxActiveClusters says none fits), a thread-block cluster of S blocks along d whose fp32
// sums meet in distributed shared memory: block r of a cluster adds the S blocks' sums for its
// slice of the rows in rank order, so every output is one fixed sum, rounded once to bf16.
//
// What it prints: a markdown table, a row a (shape, tiles, shares) and cuBLAS's (cublasGemmEx, bf16
// in and out, fp32 compute, the algorithm cuBLAS picks: what torch::linear calls), with a launch's
// median time over `--reps` timings of 24 launches back to back (cudaEvent), each launch over its
// own copy of the weights (the copies span 256 MB, so they come from memory, not L2, as a decode
// step's 24 layers do), the weights' and x's bytes over that time, and the largest error against a
// float reference kernel, relative to the output's largest magnitude. Before timing, every launch
// is checked at rows 1, 7, 33 and 64 (the tensor map's zero fill); a launch whose error exceeds
// 2^-7 of the output's scale fails the run (exit code 3).
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -o bench_rows_wgmma bench/policy/bench_rows_wgmma.cu -lcublas
//   ./bench_rows_wgmma [--rows 64] [--reps 10] [--pdl 1] [--shape qkv|o|gate_up|down]
#include <cooperative_groups.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace cg = cooperative_groups;

namespace {

constexpr int chunk = 64;          // d elements a stage: 128 bytes of bf16, one 128-byte swizzle row
constexpr int n_rows = 64;         // the wgmma's n: rows of x, padded with the tensor map's zeros
constexpr int consumer_warps = 8;  // two warpgroups
constexpr int threads = (consumer_warps + 1) * 32;
constexpr int smem_limit = 227 * 1024;

#define CHECK(call)                                                                      \
  do {                                                                                   \
    const cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "bench_rows_wgmma: %s: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

#define CHECK_CUBLAS(call)                                                       \
  do {                                                                           \
    const cublasStatus_t s_ = (call);                                            \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                           \
      std::fprintf(stderr, "bench_rows_wgmma: %s: status %d\n", #call, int(s_)); \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

// Shared memory of a block: the ring's stages (the weights' 128 * Tiles rows, then x's 64 rows, each
// row one 128-byte chunk of d, swizzled), the sums a row (fp32, padded), the stages' mbarriers.
template <int Tiles>
struct layout {
  static constexpr int features = 2 * 64 * Tiles;
  static constexpr int w_bytes = features * chunk * 2;
  static constexpr int x_bytes = n_rows * chunk * 2;
  static constexpr int stage_bytes = w_bytes + x_bytes;
  static constexpr int sums_stride = features + 4;  // floats: a warp's stores fall on 32 banks
  static constexpr int sums_bytes = n_rows * sums_stride * 4;
  static constexpr int max_stages = 8;
  static constexpr int stages = std::min(max_stages, (smem_limit - 1024 - sums_bytes - 16 * max_stages) / stage_bytes);
  static constexpr int bytes = 1024 + stages * stage_bytes + sums_bytes + 16 * stages;
  static_assert(stages >= 2, "the ring needs two stages");
  static_assert(w_bytes % 1024 == 0 && stage_bytes % 1024 == 0, "a 128-byte swizzle tile starts at 1 KiB");
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

template <int Tiles>
__global__ void __launch_bounds__(threads, 1)
    rows_wgmma(const __grid_constant__ CUtensorMap w_map, const __grid_constant__ CUtensorMap x_map,
               __nv_bfloat16* __restrict__ y, int rows, int n_features, int chunks, int pdl) {
  using L = layout<Tiles>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  float* sums = reinterpret_cast<float*>(smem + L::stages * L::stage_bytes);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L::stages * L::stage_bytes + L::sums_bytes);
  uint64_t* empty = full + L::stages;

  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int shares = static_cast<int>(cluster.num_blocks());
  const int c0 = rank * chunks / shares;
  const int n = (rank + 1) * chunks / shares - c0;
  const int f0 = blockIdx.y * L::features;
  const int warp_id = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;

  if (pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (threadIdx.x == 0) {
    for (int s = 0; s < L::stages; ++s) {
      bar_init(&full[s], 1);
      bar_init(&empty[s], consumer_warps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp_id == consumer_warps) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&w_map)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&x_map)) : "memory");
      const int early = n < L::stages ? n : L::stages;
      for (int i = 0; i < early; ++i) {
        bar_expect(&full[i], L::stage_bytes);
        tile_copy(smem + i * L::stage_bytes, &w_map, (c0 + i) * chunk, f0, &full[i]);
      }
      if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
      for (int i = 0; i < early; ++i)
        tile_copy(smem + i * L::stage_bytes + L::w_bytes, &x_map, (c0 + i) * chunk, 0, &full[i]);
      for (int i = early; i < n; ++i) {
        const int s = i % L::stages;
        bar_wait(&empty[s], ((i / L::stages) & 1) ^ 1);
        bar_expect(&full[s], L::stage_bytes);
        tile_copy(smem + s * L::stage_bytes, &w_map, (c0 + i) * chunk, f0, &full[s]);
        tile_copy(smem + s * L::stage_bytes + L::w_bytes, &x_map, (c0 + i) * chunk, 0, &full[s]);
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
    for (int i = 0; i < n; ++i) {
      const int s = i % L::stages;
      bar_wait(&full[s], (i / L::stages) & 1);
      const uint8_t* w_stage = smem + s * L::stage_bytes;
      const uint8_t* x_stage = w_stage + L::w_bytes;
#pragma unroll
      for (int t = 0; t < Tiles; ++t) fence_operands(acc[t]);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int k = 0; k < chunk / 16; ++k) {
        const uint64_t b = sw128_desc(x_stage + k * 32);
#pragma unroll
        for (int t = 0; t < Tiles; ++t)
          wgmma_64x64x16(acc[t], sw128_desc(w_stage + (wg * Tiles + t) * 64 * 128 + k * 32), b);
      }
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
      for (int t = 0; t < Tiles; ++t) fence_operands(acc[t]);
      if (lane == 0) bar_arrive(&empty[s]);
    }
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
  constexpr int pairs = L::features / 2;
  for (int idx = threadIdx.x; idx < (r1 - r0) * pairs; idx += threads) {
    const int r = r0 + idx / pairs;
    const int f = (idx % pairs) * 2;
    float s0 = 0.f, s1 = 0.f;
    for (int q = 0; q < shares; ++q) {
      const float* peer = cluster.map_shared_rank(sums, q);
      const float2 v = *reinterpret_cast<const float2*>(peer + r * L::sums_stride + f);
      s0 += v.x;
      s1 += v.y;
    }
    if (f0 + f < n_features)
      *reinterpret_cast<__nv_bfloat162*>(y + static_cast<int64_t>(r) * n_features + f0 + f) =
          __floats2bfloat162_rn(s0, s1);
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
  int n_features;
  int d;
};

struct launch {
  int tiles;   // m64 tiles a consumer warpgroup
  int shares;  // blocks along d (a cluster)
};

// The launch of `l` at shape `s` (the cluster its only attribute: it points at a static), its kernel
// readied for the shared memory and cluster size it takes.
template <int Tiles>
cudaLaunchConfig_t launch_config(const launch& l, const shape& s, cudaStream_t stream) {
  using L = layout<Tiles>;
  static bool ready = false;
  if (!ready) {
    CHECK(cudaFuncSetAttribute(rows_wgmma<Tiles>, cudaFuncAttributeMaxDynamicSharedMemorySize, L::bytes));
    CHECK(cudaFuncSetAttribute(rows_wgmma<Tiles>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    ready = true;
  }
  static cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = l.shares;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(l.shares, (s.n_features + L::features - 1) / L::features, 1);
  cfg.blockDim = dim3(threads, 1, 1);
  cfg.dynamicSmemBytes = L::bytes;
  cfg.stream = stream;
  cfg.attrs = &cluster;
  cfg.numAttrs = 1;
  return cfg;
}

// How many clusters of the launch the device holds at once (0: it cannot run).
int clusters_at_once(const launch& l, const shape& s) {
  int n = 0;
  if (l.tiles == 1) {
    const cudaLaunchConfig_t cfg = launch_config<1>(l, s, nullptr);
    CHECK(cudaOccupancyMaxActiveClusters(&n, rows_wgmma<1>, &cfg));
  } else {
    const cudaLaunchConfig_t cfg = launch_config<2>(l, s, nullptr);
    CHECK(cudaOccupancyMaxActiveClusters(&n, rows_wgmma<2>, &cfg));
  }
  return n;
}

template <int Tiles>
void run_kernel(const launch& l, const shape& s, const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                int rows, int pdl, cudaStream_t stream) {
  using L = layout<Tiles>;
  const CUtensorMap w_map = tensor_map(w, s.d, s.n_features, L::features);
  const CUtensorMap x_map = tensor_map(x, s.d, rows, n_rows);
  const int chunks = (s.d + chunk - 1) / chunk;
  cudaLaunchConfig_t cfg = launch_config<Tiles>(l, s, stream);
  cudaLaunchAttribute attrs[2];
  attrs[0] = cfg.attrs[0];
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = pdl;
  cfg.attrs = attrs;
  cfg.numAttrs = 2;
  CHECK(cudaLaunchKernelEx(&cfg, rows_wgmma<Tiles>, w_map, x_map, y, rows, s.n_features, chunks, pdl));
}

void run_launch(const launch& l, const shape& s, const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                int rows, int pdl, cudaStream_t stream) {
  if (l.tiles == 1)
    run_kernel<1>(l, s, x, w, y, rows, pdl, stream);
  else
    run_kernel<2>(l, s, x, w, y, rows, pdl, stream);
}

void run_cublas(cublasHandle_t h, const shape& s, const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                int rows) {
  const float one = 1.f, zero = 0.f;
  // Column-major: y^T (n_features x rows) = w (stored d x n_features, transposed) x^T (d x rows).
  CHECK_CUBLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, s.n_features, rows, s.d, &one, w, CUDA_R_16BF, s.d, x,
                            CUDA_R_16BF, s.d, &zero, y, CUDA_R_16BF, s.n_features, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
}

// The largest |y - ref| over the largest |ref|.
double error_of(const __nv_bfloat16* y_dev, const float* ref_dev, int64_t n) {
  std::vector<__nv_bfloat16> y(n);
  std::vector<float> ref(n);
  CHECK(cudaMemcpy(y.data(), y_dev, n * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(ref.data(), ref_dev, n * sizeof(float), cudaMemcpyDeviceToHost));
  double scale = 0.0, worst = 0.0;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(static_cast<double>(ref[i])));
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(__bfloat162float(y[i]));
    if (!std::isfinite(v)) return INFINITY;
    worst = std::max(worst, std::fabs(v - ref[i]));
  }
  return scale > 0 ? worst / scale : worst;
}

}  // namespace

int main(int argc, char** argv) {
  int rows = 64, reps = 10, pdl = 1;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--rows" && has_value) {
      rows = std::atoi(argv[++i]);
    } else if (a == "--reps" && has_value) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--pdl" && has_value) {
      pdl = std::atoi(argv[++i]);
    } else if (a == "--shape" && has_value) {
      only = argv[++i];
    } else {
      std::fprintf(stderr,
                   "bench_rows_wgmma: unknown or incomplete argument '%s' (--rows N, --reps N, --pdl 0|1, --shape "
                   "qkv|o|gate_up|down)\n",
                   a.c_str());
      return 2;
    }
  }
  const std::vector<shape> all = {{"qkv", 1152, 896}, {"o", 896, 896}, {"gate_up", 9728, 896}, {"down", 896, 4864}};
  std::vector<shape> shapes;
  for (const shape& s : all)
    if (only.empty() || only == s.name) shapes.push_back(s);
  if (rows < 1 || rows > n_rows || reps < 1 || (pdl != 0 && pdl != 1) || shapes.empty()) {
    std::fprintf(stderr,
                 "bench_rows_wgmma: --rows 1..64, --reps >= 1, --pdl 0 or 1, --shape one of qkv, o, gate_up, down\n");
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
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  std::printf("# bench_rows_wgmma on %s (%d multiprocessors), %d rows, programmatic launch %s\n\n", prop.name,
              prop.multiProcessorCount, rows, pdl ? "on" : "off");
  std::printf("| shape | features x d | kernel | blocks | ring stages | us a launch (median) | TB/s | error |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  bool all_ok = true;
  constexpr int launches = 24;
  for (const shape& s : shapes) {
    const int64_t w_elems = static_cast<int64_t>(s.n_features) * s.d;
    const int64_t w_bytes = w_elems * 2;
    const int copies = static_cast<int>(std::max<int64_t>(2, (256ll << 20) / w_bytes));
    __nv_bfloat16 *w = nullptr, *x = nullptr, *y = nullptr;
    float* ref = nullptr;
    CHECK(cudaMalloc(&w, w_bytes * copies));
    CHECK(cudaMalloc(&x, static_cast<int64_t>(n_rows) * s.d * 2));
    CHECK(cudaMalloc(&y, static_cast<int64_t>(n_rows) * s.n_features * 2));
    CHECK(cudaMalloc(&ref, static_cast<int64_t>(n_rows) * s.n_features * 4));
    fill<<<1024, 256, 0, stream>>>(x, static_cast<int64_t>(n_rows) * s.d, 17u, 1.f);
    for (int c = 0; c < copies; ++c)
      fill<<<1024, 256, 0, stream>>>(w + c * w_elems, w_elems, 29u, 1.f / std::sqrt(static_cast<float>(s.d)));
    CHECK(cudaGetLastError());

    std::vector<launch> ls;
    const int chunks = (s.d + chunk - 1) / chunk;
    for (int tiles : {1, 2})
      for (int shares : {1, 2, 3, 4, 6, 8, 12, 16})
        if (shares <= chunks) ls.push_back({tiles, shares});

    auto check = [&](auto&& run_one) {
      double worst = 0.0;
      for (int r : {1, 7, 33, 64}) {
        CHECK(cudaMemsetAsync(y, 0xFF, static_cast<int64_t>(n_rows) * s.n_features * 2, stream));
        reference<<<(r * s.n_features + 255) / 256, 256, 0, stream>>>(x, w, ref, r, s.n_features, s.d);
        run_one(r, w);
        CHECK(cudaStreamSynchronize(stream));
        CHECK(cudaGetLastError());
        worst = std::max(worst, error_of(y, ref, static_cast<int64_t>(r) * s.n_features));
      }
      return worst;
    };
    auto time_us = [&](auto&& run_one) {
      for (int c = 0; c < copies; ++c) run_one(rows, w + (c % copies) * w_elems);
      std::vector<float> t;
      for (int rep = 0; rep < reps; ++rep) {
        CHECK(cudaEventRecord(start, stream));
        for (int i = 0; i < launches; ++i) run_one(rows, w + ((rep * launches + i) % copies) * w_elems);
        CHECK(cudaEventRecord(stop, stream));
        CHECK(cudaEventSynchronize(stop));
        float ms = 0.f;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        t.push_back(ms * 1000.f / launches);
      }
      std::sort(t.begin(), t.end());
      return static_cast<double>(t[t.size() / 2]);
    };
    const double bytes = static_cast<double>(w_bytes) + static_cast<double>(rows) * s.d * 2 +
                         static_cast<double>(rows) * s.n_features * 2;
    auto row = [&](const std::string& name, int blocks, int stages, double us, double err) {
      const bool ok = err <= 1.0 / 128;
      all_ok = all_ok && ok;
      std::printf("| %s | %d x %d | %s | %d | %s | %.2f | %.2f | %.2e%s |\n", s.name, s.n_features, s.d, name.c_str(),
                  blocks, stages > 0 ? std::to_string(stages).c_str() : "-", us, bytes / us / 1e6, err,
                  ok ? "" : " FAILED");
    };
    {
      auto one = [&](int r, const __nv_bfloat16* wc) { run_cublas(handle, s, x, wc, y, r); };
      const double err = check(one);
      row("cuBLAS", 0, 0, time_us(one), err);
    }
    for (const launch& l : ls) {
      const int features = 128 * l.tiles;
      const int blocks = l.shares * ((s.n_features + features - 1) / features);
      const std::string name =
          "wgmma " + std::to_string(features) + " features, " + std::to_string(l.shares) + " shares";
      const int at_once = clusters_at_once(l, s);
      if (at_once == 0) {
        std::printf("| %s | %d x %d | %s | %d | - | no cluster of this size fits | - | - |\n", s.name, s.n_features,
                    s.d, name.c_str(), blocks);
        continue;
      }
      auto one = [&](int r, const __nv_bfloat16* wc) { run_launch(l, s, x, wc, y, r, pdl, stream); };
      const double err = check(one);
      const int stages = l.tiles == 1 ? layout<1>::stages : layout<2>::stages;
      row(name + " (" + std::to_string(at_once) + " clusters at once)", blocks, stages, time_us(one), err);
    }
    CHECK(cudaFree(w));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    CHECK(cudaFree(ref));
  }
  std::printf("\n%s\n", all_ok ? "every launch within 2^-7 of the float reference" : "some launch FAILED its check");
  return all_ok ? 0 : 3;
}
