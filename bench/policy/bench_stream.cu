// bench_stream: how fast a grid shaped like the e4m3 decode attention's split kernel
// (policy/model/fp8_kernels.cu) can stream two buffers (keys and values) through shared memory,
// by the way the bytes are copied in. Each warp reads its own contiguous part of both buffers in
// tiles (a tile: `keys` rows of 64 bytes from each buffer, as a 16-key tile of the kernel at head_dim
// 64 is 1 KiB of keys and 1 KiB of values), through a ring of `stages` tiles in shared memory, and
// reads every staged byte back from shared memory (each lane its share, summed into a checksum) before
// the stage is reused. The ways:
//   async16  cp.async.cg of 16 bytes a lane (the split kernel's staging): 2 KiB a 16-key tile is
//            4 copies a lane; a commit group a tile, cp.async.wait_group stages - 2, __syncwarp;
//   bulk     one lane issues cp.async.bulk (the Tensor Memory Accelerator's 1-D copy) of the tile's
//            keys and of its values, completing on the stage's mbarrier; every lane waits on it;
//   regs     no shared memory: each lane loads its share of `stages` tiles ahead into registers
//            (16-byte loads), the form before the ring.
// The grid is `blocks` a multiprocessor of 4 warps (the split kernel's 4 at head_dim 64), one wave;
// the bytes are each buffer's size, read once a launch; the rate is both buffers' bytes over the
// launch's time (cudaEvent around 8 launches back to back, each over its own copy of the buffers
// where they are small, so that every launch reads memory, not L2; the best and the median of --reps
// such timings after 3 not counted; at
// --mb-each 16 a launch reads what the 1-row 131k decode's split kernel reads in a layer, 33.6 MB,
// ~8 tiles a warp, where the start and the tail weigh as they do there). The
// checksum of every way must agree (the bytes read are the same), so a way that skips bytes fails.
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -o bench_stream bench/policy/bench_stream.cu
//   ./bench_stream [--mb-each 512] [--reps 20] [--blocks 4]
//
// Prints a markdown table: way, tile keys, stages, shared memory a block, TB/s best and median.
// Why: the split kernel reads the cache at ~74% of the H200's 4.8 TB/s (3.54 TB/s at 64 x 16,384
// keys, bench/results/2026-12-05-policy-fp8-ring.md); whether a way of copying reads faster at the
// same grid says whether restaging it is worth a kernel change.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int warp = 32;
constexpr int block_warps = 4;
constexpr int row_bytes = 64;

#define CHECK(call)                                                                  \
  do {                                                                               \
    const cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "bench_stream: %s: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Adds the lane's share of a staged tile (2 * keys * 64 bytes, 16 bytes a read) into acc.
template <int Keys>
__device__ __forceinline__ void read_stage(uint32_t& acc, const uint8_t* stage, int lane) {
  constexpr int reads = 2 * Keys * row_bytes / 16 / warp;
#pragma unroll
  for (int i = 0; i < reads; ++i) {
    const uint4 v = *reinterpret_cast<const uint4*>(stage + (i * warp + lane) * 16);
    acc += v.x ^ v.y ^ v.z ^ v.w;
  }
}

struct segment {
  const uint8_t* k;
  const uint8_t* v;
  int tiles;
};

template <int Keys>
__device__ __forceinline__ segment warp_segment(const uint8_t* k, const uint8_t* v, int64_t tiles_total) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * block_warps;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * block_warps + threadIdx.x / warp;
  const int64_t per = (tiles_total + warps - 1) / warps;
  const int64_t first = min(w * per, tiles_total), last = min(first + per, tiles_total);
  const int64_t tile_bytes = static_cast<int64_t>(Keys) * row_bytes;
  return {k + first * tile_bytes, v + first * tile_bytes, static_cast<int>(last - first)};
}

template <int Keys, int Stages>
__global__ void __launch_bounds__(block_warps* warp)
    async16_kernel(const uint8_t* k, const uint8_t* v, int64_t tiles_total, uint32_t* out) {
  extern __shared__ __align__(128) uint8_t ring_s[];
  constexpr int tile = Keys * row_bytes, stage = 2 * tile, copies = tile / 16 / warp;
  const int lane = threadIdx.x % warp, wid = threadIdx.x / warp;
  uint8_t* ring = ring_s + wid * Stages * stage;
  const segment s = warp_segment<Keys>(k, v, tiles_total);
  const auto issue = [&](int t) {
    uint8_t* dst = ring + (t % Stages) * stage;
#pragma unroll
    for (int i = 0; i < copies; ++i) {
      const int off = (i * warp + lane) * 16;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst + off)),
                   "l"(s.k + static_cast<int64_t>(t) * tile + off)
                   : "memory");
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst + tile + off)),
                   "l"(s.v + static_cast<int64_t>(t) * tile + off)
                   : "memory");
    }
  };
  for (int t = 0; t < Stages - 1; ++t) {
    if (t < s.tiles) issue(t);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
  uint32_t acc = 0;
  for (int t = 0; t < s.tiles; ++t) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Stages - 2) : "memory");
    __syncwarp();
    if (t + Stages - 1 < s.tiles) issue(t + Stages - 1);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    // Each lane reads what the whole warp copied (the copies of other lanes are visible after
    // their wait and the __syncwarp).
    read_stage<Keys>(acc, ring + (t % Stages) * stage, lane);
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  atomicAdd(out, acc);
}

template <int Keys, int Stages>
__global__ void __launch_bounds__(block_warps* warp)
    bulk_kernel(const uint8_t* k, const uint8_t* v, int64_t tiles_total, uint32_t* out) {
  extern __shared__ __align__(128) uint8_t ring_s[];
  __shared__ __align__(8) uint64_t bars[block_warps][Stages];
  constexpr int tile = Keys * row_bytes, stage = 2 * tile;
  const int lane = threadIdx.x % warp, wid = threadIdx.x / warp;
  uint8_t* ring = ring_s + wid * Stages * stage;
  const segment s = warp_segment<Keys>(k, v, tiles_total);
  if (lane == 0) {
    for (int i = 0; i < Stages; ++i)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(&bars[wid][i])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncwarp();
  const auto issue = [&](int t) {
    if (lane != 0) return;
    const int st = t % Stages;
    const uint32_t bar = smem_addr(&bars[wid][st]);
    uint8_t* dst = ring + st * stage;
    // Every lane's reads of this stage (the tile Stages before) happened before the __syncwarp
    // that precedes this; the proxy fence orders them before the async copy's writes.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(stage) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     smem_addr(dst)),
                 "l"(s.k + static_cast<int64_t>(t) * tile), "r"(tile), "r"(bar)
                 : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     smem_addr(dst + tile)),
                 "l"(s.v + static_cast<int64_t>(t) * tile), "r"(tile), "r"(bar)
                 : "memory");
  };
  for (int t = 0; t < Stages - 1 && t < s.tiles; ++t) issue(t);
  uint32_t acc = 0;
  for (int t = 0; t < s.tiles; ++t) {
    const int st = t % Stages;
    const uint32_t parity = static_cast<uint32_t>(t / Stages) & 1u;
    const uint32_t bar = smem_addr(&bars[wid][st]);
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "wait_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra wait_%=;\n"
        "}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
    __syncwarp();  // every lane done reading tile t - 1's stage, the one refilled next
    if (t + Stages - 1 < s.tiles) issue(t + Stages - 1);
    read_stage<Keys>(acc, ring + st * stage, lane);
  }
  atomicAdd(out, acc);
}

template <int Keys, int Stages>
__global__ void __launch_bounds__(block_warps* warp)
    regs_kernel(const uint8_t* k, const uint8_t* v, int64_t tiles_total, uint32_t* out) {
  constexpr int tile = Keys * row_bytes, reads = tile / 16 / warp;
  const int lane = threadIdx.x % warp;
  const segment s = warp_segment<Keys>(k, v, tiles_total);
  uint4 buf[Stages][2][reads];
  const auto load = [&](uint4(&b)[2][reads], int t) {
#pragma unroll
    for (int i = 0; i < reads; ++i) {
      const int off = (i * warp + lane) * 16;
      b[0][i] = __ldg(reinterpret_cast<const uint4*>(s.k + static_cast<int64_t>(t) * tile + off));
      b[1][i] = __ldg(reinterpret_cast<const uint4*>(s.v + static_cast<int64_t>(t) * tile + off));
    }
  };
  uint32_t acc = 0;
  // Stages tiles at a time: load the next group while the current one is summed.
  int t = 0;
#pragma unroll
  for (int i = 0; i < Stages; ++i)
    if (i < s.tiles) load(buf[i], i);
  for (; t < s.tiles; t += Stages) {
#pragma unroll
    for (int i = 0; i < Stages; ++i) {
      if (t + i < s.tiles) {
        // Every 16 bytes of the tile are read by some lane: this lane's are buf[i].
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int j = 0; j < reads; ++j) acc += buf[i][h][j].x ^ buf[i][h][j].y ^ buf[i][h][j].z ^ buf[i][h][j].w;
        if (t + i + Stages < s.tiles) load(buf[i], t + i + Stages);
      }
    }
  }
  atomicAdd(out, acc);
}

struct result {
  std::string way;
  int keys, stages;
  size_t smem;
  double best, median;
  uint32_t sum;
};

// Launches of one timing read different copies of the buffers (`copies` of `bytes_each` bytes each,
// together past the L2 cache), so a small launch reads memory, not what the launch before it left
// in L2, as each layer of a decode step reads its own cache.
int64_t copies = 1;

// TB/s (best, median) of `reps` timings of enqueue(r) after 3 not counted: cudaEvents around what
// it enqueues, which reads `bytes` bytes.
struct rates {
  double best, median;
};
template <typename Enqueue>
rates time_rates(Enqueue enqueue, double bytes, int reps) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<double> got;
  for (int r = 0; r < reps + 3; ++r) {
    CHECK(cudaEventRecord(a));
    enqueue(r);
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaGetLastError());
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    if (r >= 3) got.push_back(bytes / (ms * 1e-3) / 1e12);
  }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  std::sort(got.begin(), got.end());
  return {got.back(), got[got.size() / 2]};
}

template <typename Kernel>
result time_kernel(const char* way, int keys, int stages, Kernel kernel, size_t smem, int blocks_per_sm, int sms,
                   const uint8_t* k, const uint8_t* v, int64_t bytes_each, uint32_t* out, int reps) {
  // Asked for at every size: a kernel's static shared memory (the bulk kernel's mbarriers) counts
  // against the 48 KiB a block gets without asking, so a ring of exactly 48 KiB needs it too.
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  int fit = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kernel, block_warps * warp, smem));
  if (fit == 0) {
    std::fprintf(stderr,
                 "bench_stream: %s (%d keys a tile, %d stages): %zu bytes of shared memory do not fit a block\n", way,
                 keys, stages, smem);
    std::exit(1);
  }
  const int per_sm = std::min(fit, blocks_per_sm);
  const int64_t tiles = bytes_each / (static_cast<int64_t>(keys) * row_bytes);
  // The checksum: one launch over the first copy of the buffers.
  uint32_t sum = 0;
  CHECK(cudaMemset(out, 0, sizeof(uint32_t)));
  kernel<<<per_sm * sms, block_warps * warp, smem>>>(k, v, tiles, out);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    std::fprintf(
        stderr,
        "bench_stream: launching %s (%d keys a tile, %d stages, %zu bytes of shared memory, %d x %d blocks): %s\n", way,
        keys, stages, smem, per_sm, sms, cudaGetErrorString(e));
    std::exit(1);
  }
  CHECK(cudaMemcpy(&sum, out, sizeof(sum), cudaMemcpyDeviceToHost));
  // `batch` launches back to back between the events, so that a small launch's time is not the
  // host's launch latency.
  const int batch = 8;
  const rates t = time_rates(
      [&](int r) {
        for (int i = 0; i < batch; ++i) {
          const int64_t at = (static_cast<int64_t>(r) * batch + i) % copies * bytes_each;
          kernel<<<per_sm * sms, block_warps * warp, smem>>>(k + at, v + at, tiles, out);
        }
      },
      2.0 * static_cast<double>(bytes_each) * batch, reps);
  std::string w = way;
  if (per_sm != blocks_per_sm) w += " (" + std::to_string(per_sm) + " blocks a multiprocessor fit)";
  return {w, keys, stages, smem, t.best, t.median, sum};
}

template <int Keys, int Stages>
void run_ways(std::vector<result>& out, int blocks, int sms, const uint8_t* k, const uint8_t* v, int64_t bytes_each,
              uint32_t* sum, int reps) {
  const size_t ring = static_cast<size_t>(block_warps) * Stages * 2 * Keys * row_bytes;
  out.push_back(time_kernel("async16", Keys, Stages, async16_kernel<Keys, Stages>, ring, blocks, sms, k, v, bytes_each,
                            sum, reps));
  out.push_back(
      time_kernel("bulk", Keys, Stages, bulk_kernel<Keys, Stages>, ring, blocks, sms, k, v, bytes_each, sum, reps));
}

}  // namespace

int main(int argc, char** argv) {
  int64_t mb_each = 512;
  int reps = 20, blocks = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--mb-each" && has)
      mb_each = std::atoll(argv[++i]);
    else if (a == "--reps" && has)
      reps = std::atoi(argv[++i]);
    else if (a == "--blocks" && has)
      blocks = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "bench_stream: unknown or incomplete argument '%s' (--mb-each N, --reps N, --blocks N)\n",
                   a.c_str());
      return 2;
    }
  }
  if (mb_each < 8 || reps < 1 || blocks < 1) {
    std::fprintf(stderr, "bench_stream: --mb-each >= 8, --reps >= 1 and --blocks >= 1\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int64_t bytes_each = mb_each << 20;
  copies = std::max<int64_t>(1, (int64_t{512} << 20) / bytes_each);
  const int64_t span = copies * bytes_each;
  uint8_t *k = nullptr, *v = nullptr;
  uint32_t* sum = nullptr;
  CHECK(cudaMalloc(&k, span));
  CHECK(cudaMalloc(&v, span));
  CHECK(cudaMalloc(&sum, sizeof(uint32_t)));
  // Bytes that differ along the buffers, so a skipped or repeated tile changes the checksum.
  {
    std::vector<uint32_t> h(static_cast<size_t>(span / 4));
    uint32_t x = 2463534242u;
    for (auto& w : h) x ^= x << 13, x ^= x >> 17, x ^= x << 5, w = x;
    CHECK(cudaMemcpy(k, h.data(), span, cudaMemcpyHostToDevice));
    for (auto& w : h) x ^= x << 13, x ^= x >> 17, x ^= x << 5, w = x;
    CHECK(cudaMemcpy(v, h.data(), span, cudaMemcpyHostToDevice));
  }
  const int sms = prop.multiProcessorCount;
  std::vector<result> rs;
  run_ways<16, 5>(rs, blocks, sms, k, v, bytes_each, sum, reps);  // the split kernel's ring
  run_ways<16, 8>(rs, blocks, sms, k, v, bytes_each, sum, reps);
  run_ways<32, 3>(rs, blocks, sms, k, v, bytes_each, sum, reps);
  run_ways<32, 5>(rs, blocks, sms, k, v, bytes_each, sum, reps);
  run_ways<64, 3>(rs, blocks, sms, k, v, bytes_each, sum, reps);
  rs.push_back(time_kernel("regs", 16, 2, regs_kernel<16, 2>, 0, blocks, sms, k, v, bytes_each, sum, reps));
  rs.push_back(time_kernel("regs", 16, 4, regs_kernel<16, 4>, 0, blocks, sms, k, v, bytes_each, sum, reps));
  // cudaMemcpy device to device of one buffer: it reads and writes, so its rate is 2 x bytes / time
  // (only where one buffer is past L2).
  if (copies == 1) {
    uint8_t* dst = nullptr;
    CHECK(cudaMalloc(&dst, bytes_each));
    const rates t = time_rates([&](int) { CHECK(cudaMemcpyAsync(dst, k, bytes_each, cudaMemcpyDeviceToDevice)); },
                               2.0 * static_cast<double>(bytes_each), reps);
    rs.push_back({"cudaMemcpy d2d (read + write)", 0, 0, 0, t.best, t.median, rs[0].sum});
    CHECK(cudaFree(dst));
  }
  std::printf("%s, %d multiprocessors, %d blocks of %d warps a multiprocessor, %lld MiB each of keys and values\n\n",
              prop.name, sms, blocks, block_warps, static_cast<long long>(mb_each));
  std::printf("| way | tile keys | stages | shared KiB a block | TB/s best | TB/s median | checksum |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  bool agree = true;
  for (const auto& r : rs) {
    std::printf("| %s | %d | %d | %.0f | %.2f | %.2f | %08x |\n", r.way.c_str(), r.keys, r.stages, r.smem / 1024.0,
                r.best, r.median, r.sum);
    if (r.keys > 0 && r.sum != rs[0].sum) agree = false;
  }
  if (!agree) {
    std::fprintf(stderr, "bench_stream: the ways' checksums differ: some way did not read every byte once\n");
    return 1;
  }
  return 0;
}
