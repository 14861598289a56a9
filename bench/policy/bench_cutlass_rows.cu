// bench_cutlass_rows: whether CUTLASS's sm90 GEMMs, launched programmatically, take the boundaries
// out of the 64-row decode step's projections where cuBLAS's calls leave them. The step's layer
// is four projections (y = x w^T, bf16, the 0.5B model's fused weights: q/k/v 1152 x 896, o 896 x
// 896, gate/up 9728 x 896, down 896 x 4864) with a small kernel of ours before each (RMSNorm,
// attention, RMSNorm, silu_mul). Our kernels are launched with programmatic stream serialization
// and wait on the kernel before (`griddepcontrol.wait`) only before reading its output; cuBLAS's
// kernels neither trigger their dependents nor wait, so each cuBLAS call costs a full boundary on
// both sides (docs/POLICY_MODEL_PERF.md, "the small kernels between the cuBLAS calls"). CUTLASS's
// TMA warp-specialized kernels built with CUTLASS_ENABLE_GDC_FOR_SM90 wait before their first
// load and trigger their dependents at their last tile's epilogue.
//
// The GEMMs: y^T = w x^T (M = the weight's rows, N = the 64 rows of x, K = d), so the weight is
// the A operand (row-major, K-major) and x the B operand (K-major); D is y, column-major in M.
// - `coop`: KernelTmaWarpSpecializedCooperative, tiles of 128 x 64 x 64, the stream-K scheduler
//   (`--splits` per shape: 1 is data-parallel, over 1 split-K over the splits in fp32 through a
//   workspace, `--reduction det|nondet`). A split GEMM's barrier counters must be zero at every
//   launch (CUTLASS zeroes them in `initialize`, with a memset a call): here one kernel of ours at
//   the start of the chain zeroes every split GEMM's counters (their addresses computed as CUTLASS
//   lays out its workspace: the fp32 partials, then the counters).
// - `ping`: KernelTmaWarpSpecializedPingpong, tiles of 64 x 64 x 64, persistent, no split.
//
// What it times, each a CUDA graph of `--layers` layers (each layer its own weights, 29.9 MB a
// layer, so they come from memory as a decode step's 24 layers do), the median of `--reps`
// replays (cudaEvent):
// 1. each projection alone, a launch a layer back to back (cuBLAS; CUTLASS without and with
//    programmatic launch): the kernels' own speed at 64 rows;
// 2. the layer chain (small kernel, q/k/v, small, o, small, gate/up, small, down), whose data
//    flows through all of it: with cuBLAS, with CUTLASS plain, with CUTLASS programmatic. The
//    difference of 2 and the sum of 1 is what the boundaries cost.
// Checks before timing: each CUTLASS form's projection at 64 and 7 rows against a float reference
// kernel (error over 2^-7 of the output's largest magnitude fails the run, exit code 3), and each
// chain's output after one layer against the cuBLAS chain's, after the timed replays and --reps
// + 2 replays of its own (a split GEMM whose counters were not reset hangs or is wrong: more than 0.1
// relative fails the run; the last of 24 layers is not comparable, see main). A graph that
// does not finish in 20 s ends the run (exit code 4). Bad arguments: exit code 2, naming the argument.
//
//   pip download nvidia-cutlass==4.2.0.0 --no-deps; unzip it; CUTLASS=<wheel>/cutlass_library/source
//   nvcc -std=c++17 -O3 -DNDEBUG -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr
//     -DCUTLASS_ENABLE_GDC_FOR_SM90 -I$CUTLASS/include -o bench_cutlass_rows
//     bench/policy/bench_cutlass_rows.cu -lcublas
//   ./bench_cutlass_rows [--layers 24] [--reps 20] [--rows 64]
//                        [--splits qkv,o,gate_up,down] (default 4,4,1,8)
//                        [--reduction det|nondet] [--kernel coop|ping|both]
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"

constexpr const char* bench_name = "bench_cutlass_rows";
#include "standalone_check.cuh"

// CUTLASS 4.2's stream-K scheduler does not compile with CUTLASS_ENABLE_GDC_FOR_SM90: its
// `is_last_tile` (asked only when the kernel triggers its dependents) is const and passes a member
// to a non-const reference. This scheduler is CUTLASS's with that one function asked of a copy,
// selected by a tag of its own; nothing else of the kernel changes.
namespace bench_stream_k {
struct tag {};
template <class TileShape, class ClusterShape>
struct scheduler : cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamK<TileShape, ClusterShape> {
  using base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamK<TileShape, ClusterShape>;
  using base::base;
  CUTLASS_DEVICE bool is_last_tile(typename base::WorkTileInfo work, uint32_t advance_count = 1) const {
    base next = *this;
    if (next.continue_current_work(work)) return false;
    next.advance_to_next_work(advance_count);
    return !next.get_current_work().is_valid();
  }
};
}  // namespace bench_stream_k

template <class TileShape, class ClusterShape, uint32_t Stages>
struct cutlass::gemm::kernel::detail::TileSchedulerSelector<bench_stream_k::tag, cutlass::arch::Sm90, TileShape,
                                                            ClusterShape, Stages> {
  using Scheduler = bench_stream_k::scheduler<TileShape, ClusterShape>;
};

namespace {

constexpr int max_rows = 64;
constexpr double error_limit = 1.0 / 128;  // of the output's largest magnitude
constexpr double chain_limit = 0.1;        // of the cuBLAS chain's largest magnitude

#define CHECK_CUTLASS(call)                                                               \
  do {                                                                                    \
    const cutlass::Status s_ = (call);                                                    \
    fail_if(s_ != cutlass::Status::kSuccess, #call, cutlass::cutlassGetStatusString(s_)); \
  } while (0)

// ---- the GEMM kernels ---------------------------------------------------------------------

using bf16 = cutlass::bfloat16_t;
using cute::_1;
using cute::_128;
using cute::_64;
using cute::Shape;

template <class Tile, class KernelSchedule, class EpilogueSchedule, class Scheduler>
struct cutlass_gemm {
  using LayoutA = cutlass::layout::RowMajor;     // the weight, n x d
  using LayoutB = cutlass::layout::ColumnMajor;  // x^T: d x rows, each row of x contiguous
  using LayoutD = cutlass::layout::ColumnMajor;  // y^T: n x rows, each row of y contiguous
  static constexpr int align = 8;                // 16 bytes of bf16: TMA's alignment
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Shape<_1, _1, _1>,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, bf16, LayoutD, align, bf16, LayoutD, align,
      EpilogueSchedule>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, bf16, LayoutA, align, bf16, LayoutB, align, float, Tile,
      Shape<_1, _1, _1>,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue, Scheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  static constexpr int tile_m = cute::size<0>(Tile{});
  static constexpr int tile_n = cute::size<1>(Tile{});
  static constexpr bool stream_k = std::is_same_v<Scheduler, bench_stream_k::tag>;
};

using coop = cutlass_gemm<Shape<_128, _64, _64>, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                          cutlass::epilogue::TmaWarpSpecializedCooperative, bench_stream_k::tag>;
using ping = cutlass_gemm<Shape<_64, _64, _64>, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                          cutlass::epilogue::TmaWarpSpecialized, cutlass::gemm::PersistentScheduler>;

// ---- our small kernels --------------------------------------------------------------------

__device__ __forceinline__ void wait_on_previous() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void trigger_next() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// out[r, :k] = RMSNorm of in[r, :k] (row stride ld): the stand-in for each kernel of ours between
// two projections, reading the previous output and writing the next input, so data flows through
// the whole chain and every boundary is a real dependency. With mul, out = silu(in[r, j]) *
// in[r, k + j] first (silu_mul's shape: gate then up in one row).
__global__ void rows_norm(const __nv_bfloat16* in, int ld, __nv_bfloat16* out, int k, int mul) {
  wait_on_previous();
  trigger_next();
  __shared__ float part[32];
  const int r = blockIdx.x;
  float ss = 0.f;
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    float v = __bfloat162float(in[static_cast<size_t>(r) * ld + j]);
    if (mul) v = v / (1.f + __expf(-v)) * __bfloat162float(in[static_cast<size_t>(r) * ld + k + j]);
    ss += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    ss = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (threadIdx.x == 0) part[0] = rsqrtf(ss / k + 1e-6f);
  }
  __syncthreads();
  const float scale = part[0];
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    float v = __bfloat162float(in[static_cast<size_t>(r) * ld + j]);
    if (mul) v = v / (1.f + __expf(-v)) * __bfloat162float(in[static_cast<size_t>(r) * ld + k + j]);
    out[static_cast<size_t>(r) * k + j] = __float2bfloat16(v * scale);
  }
}

// Zeroes the split GEMMs' barrier counters (n regions of 32-bit words) in one launch.
__global__ void zero_counters(uint32_t* const* regions, const uint32_t* words, int n) {
  wait_on_previous();
  for (int i = blockIdx.x; i < n; i += gridDim.x)
    for (uint32_t j = threadIdx.x; j < words[i]; j += blockDim.x) regions[i][j] = 0;
  __threadfence();
  trigger_next();
}

__global__ void fill_uniform(__nv_bfloat16* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    p[i] = __float2bfloat16(scale * (static_cast<float>(z >> 40) / 8388608.f - 1.f));
  }
}

// y_ref[r, n] = sum_k x[r, k] w[n, k] in fp32.
__global__ void reference(const __nv_bfloat16* x, int ldx, const __nv_bfloat16* w, float* y, int rows, int n, int d) {
  const int f = blockIdx.x * blockDim.x + threadIdx.x;
  if (f >= n) return;
  for (int r = 0; r < rows; ++r) {
    float s = 0.f;
    for (int k = 0; k < d; ++k)
      s += __bfloat162float(x[static_cast<size_t>(r) * ldx + k]) * __bfloat162float(w[static_cast<size_t>(f) * d + k]);
    y[static_cast<size_t>(r) * n + f] = s;
  }
}

void launch_small(cudaStream_t st, const __nv_bfloat16* in, int ld, __nv_bfloat16* out, int k, int mul, int rows) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(rows);
  cfg.blockDim = dim3(256);
  cfg.stream = st;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CHECK(cudaLaunchKernelEx(&cfg, rows_norm, in, ld, out, k, mul));
}

// ---- the layer ----------------------------------------------------------------------------

struct shape {
  const char* name;
  int n, d;
};
constexpr shape shapes[4] = {{"qkv", 1152, 896}, {"o", 896, 896}, {"gate_up", 9728, 896}, {"down", 896, 4864}};

enum class backend { cublas, coop_plain, coop_pdl, ping_plain, ping_pdl };
const char* backend_name(backend b) {
  switch (b) {
    case backend::cublas:
      return "cuBLAS";
    case backend::coop_plain:
      return "CUTLASS coop";
    case backend::coop_pdl:
      return "CUTLASS coop, programmatic";
    case backend::ping_plain:
      return "CUTLASS ping";
    default:
      return "CUTLASS ping, programmatic";
  }
}

struct options {
  int layers = 24, reps = 20, rows = 64;
  int splits[4] = {4, 4, 1, 8};
  bool deterministic = true;
  bool coop = true, ping = true;
};

// One projection y[rows, n] = x[rows, :d] (row stride ldx) w^T of one layer, in every form.
struct projection {
  shape s{};
  const __nv_bfloat16* w = nullptr;
  const __nv_bfloat16* x = nullptr;
  int ldx = 0;
  __nv_bfloat16* y = nullptr;
  int rows = 0;
  coop::Gemm coop_gemm;
  ping::Gemm ping_gemm;
  void* coop_ws = nullptr;
  void* ping_ws = nullptr;
  uint32_t* counters = nullptr;  // the split GEMM's barrier counters (inside coop_ws)
  uint32_t counter_words = 0;
};

template <class G>
typename G::Gemm::Arguments arguments(const projection& p, int splits, bool deterministic, int sms) {
  using Kernel = typename G::Kernel;
  typename Kernel::StrideA sa{};
  typename Kernel::StrideB sb{};
  typename Kernel::StrideD sd{};
  cute::get<0>(sa) = p.s.d;  // weight rows are d apart
  cute::get<0>(sb) = p.ldx;  // x's rows are ldx apart
  cute::get<1>(sd) = p.s.n;  // y's rows are n apart
  typename G::Gemm::Arguments a{cutlass::gemm::GemmUniversalMode::kGemm,
                                {p.s.n, p.rows, p.s.d, 1},
                                {reinterpret_cast<const bf16*>(p.w), sa, reinterpret_cast<const bf16*>(p.x), sb},
                                {{1.f, 0.f}, reinterpret_cast<const bf16*>(p.y), sd, reinterpret_cast<bf16*>(p.y), sd}};
  a.hw_info.device_id = 0;
  a.hw_info.sm_count = sms;
  if constexpr (G::stream_k) {
    using Sched = typename Kernel::TileScheduler;
    a.scheduler.splits = splits;
    a.scheduler.decomposition_mode =
        splits > 1 ? Sched::DecompositionMode::SplitK : Sched::DecompositionMode::DataParallel;
    a.scheduler.reduction_mode =
        deterministic ? Sched::ReductionMode::Deterministic : Sched::ReductionMode::Nondeterministic;
  }
  return a;
}

void setup(projection& p, const options& o, int which, int sms) {
  auto ca = arguments<coop>(p, o.splits[which], o.deterministic, sms);
  CHECK_CUTLASS(p.coop_gemm.can_implement(ca));
  const size_t cws = coop::Gemm::get_workspace_size(ca);
  if (cws) CHECK(cudaMalloc(&p.coop_ws, cws));
  CHECK_CUTLASS(p.coop_gemm.initialize(ca, p.coop_ws));
  if (o.splits[which] > 1) {
    // CUTLASS's split-K workspace: the partials of every output tile (fp32, rounded up to its L2
    // alignment), then the counters (one a consumer warpgroup and tile), to the end.
    fail_if(coop::Epilogue::get_workspace_size(ca.problem_shape, ca.epilogue) != 0, "split-K workspace",
            "the epilogue takes workspace of its own (the scheduler's would not start at 0)");
    using Params = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamKParams;
    const uint64_t tiles =
        static_cast<uint64_t>((p.s.n + coop::tile_m - 1) / coop::tile_m) * ((p.rows + coop::tile_n - 1) / coop::tile_n);
    const size_t partials =
        Params::get_reduction_workspace_size(tiles, cutlass::gemm::GemmCoord(coop::tile_m, coop::tile_n, 64), 32);
    fail_if(partials >= cws, "split-K workspace", "the partials fill the whole workspace (no counters found)");
    p.counters = reinterpret_cast<uint32_t*>(static_cast<char*>(p.coop_ws) + partials);
    p.counter_words = static_cast<uint32_t>((cws - partials) / 4);
  }
  auto pa = arguments<ping>(p, 1, true, sms);
  CHECK_CUTLASS(p.ping_gemm.can_implement(pa));
  const size_t pws = ping::Gemm::get_workspace_size(pa);
  if (pws) CHECK(cudaMalloc(&p.ping_ws, pws));
  CHECK_CUTLASS(p.ping_gemm.initialize(pa, p.ping_ws));
}

void run(projection& p, backend b, cublasHandle_t h, cudaStream_t st) {
  switch (b) {
    case backend::cublas: {
      const float one = 1.f, zero = 0.f;
      CHECK_CUBLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, p.s.n, p.rows, p.s.d, &one, p.w, CUDA_R_16BF, p.s.d, p.x,
                                CUDA_R_16BF, p.ldx, &zero, p.y, CUDA_R_16BF, p.s.n, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
      return;
    }
    case backend::coop_plain:
      CHECK_CUTLASS(p.coop_gemm.run(st, nullptr, false));
      return;
    case backend::coop_pdl:
      CHECK_CUTLASS(p.coop_gemm.run(st, nullptr, true));
      return;
    case backend::ping_plain:
      CHECK_CUTLASS(p.ping_gemm.run(st, nullptr, false));
      return;
    case backend::ping_pdl:
      CHECK_CUTLASS(p.ping_gemm.run(st, nullptr, true));
      return;
  }
}

bool is_coop(backend b) {
  return b == backend::coop_plain || b == backend::coop_pdl;
}

struct model {
  std::vector<__nv_bfloat16*> weights;  // layer-major, 4 a layer
  __nv_bfloat16 *x0, *a, *qkv, *att, *h, *n2, *gu, *s, *dn;
  std::vector<std::unique_ptr<projection>> chain;  // 4 a layer, x and y the chain's buffers
  std::vector<std::unique_ptr<projection>> alone;  // 4 a layer, x from x0-sized inputs
  // The split GEMMs' counters, for zero_counters: [0] the chain's, [1 + i] projection i's alone.
  struct counter_list {
    std::vector<uint32_t*> regions;
    std::vector<uint32_t> words;
    uint32_t** d_regions = nullptr;
    uint32_t* d_words = nullptr;
  } counters[5];
};

// Zeroes every split GEMM's counters of a graph at its start: one kernel, as an engine would.
void zero_all(const model::counter_list& c, cudaStream_t st) {
  if (c.regions.empty()) return;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(std::min<int>(static_cast<int>(c.regions.size()), 132));
  cfg.blockDim = dim3(256);
  cfg.stream = st;
  CHECK(cudaLaunchKernelEx(&cfg, zero_counters, static_cast<uint32_t* const*>(c.d_regions),
                           static_cast<const uint32_t*>(c.d_words), static_cast<int>(c.regions.size())));
}

void upload(model::counter_list& c) {
  if (c.regions.empty()) return;
  CHECK(cudaMalloc(&c.d_regions, c.regions.size() * sizeof(uint32_t*)));
  CHECK(cudaMalloc(&c.d_words, c.words.size() * sizeof(uint32_t)));
  CHECK(cudaMemcpy(c.d_regions, c.regions.data(), c.regions.size() * sizeof(uint32_t*), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(c.d_words, c.words.data(), c.words.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
}

__nv_bfloat16* alloc(size_t n) {
  __nv_bfloat16* p;
  CHECK(cudaMalloc(&p, n * sizeof(__nv_bfloat16)));
  return p;
}

void fill(__nv_bfloat16* p, size_t n, uint64_t seed, float scale) {
  fill_uniform<<<1024, 256>>>(p, n, seed, scale);
  CHECK(cudaGetLastError());
}

// Records the layer chain (or one projection a layer with `only` >= 0) on the stream.
void record(model& m, const options& o, backend b, int only, cublasHandle_t h, cudaStream_t st) {
  if (is_coop(b)) zero_all(m.counters[only < 0 ? 0 : 1 + only], st);
  for (int l = 0; l < o.layers; ++l) {
    std::unique_ptr<projection>* layer = &(only >= 0 ? m.alone : m.chain)[4 * l];
    if (only >= 0) {
      run(*layer[only], b, h, st);
      continue;
    }
    const int r = o.rows;
    launch_small(st, l == 0 ? m.x0 : m.dn, 896, m.a, 896, 0, r);  // RMSNorm
    run(*layer[0], b, h, st);
    launch_small(st, m.qkv, 1152, m.att, 896, 0, r);  // attention's stand-in
    run(*layer[1], b, h, st);
    launch_small(st, m.h, 896, m.n2, 896, 0, r);  // RMSNorm
    run(*layer[2], b, h, st);
    launch_small(st, m.gu, 9728, m.s, 4864, 1, r);  // silu_mul
    run(*layer[3], b, h, st);
  }
}

float time_graph(cudaGraphExec_t exec, cudaStream_t st, int reps, const char* what) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < reps + 2; ++i) {
    CHECK(cudaEventRecord(e0, st));
    CHECK(cudaGraphLaunch(exec, st));
    CHECK(cudaEventRecord(e1, st));
    const auto start = std::chrono::steady_clock::now();
    while (cudaEventQuery(e1) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) {
        fail_if(true, what, "a replay did not finish in 20 s (a split GEMM's counters not reset?)", 4);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    CHECK(cudaEventSynchronize(e1));
    float t;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (i >= 2) ms.push_back(t);
  }
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

float time_recorded(model& m, const options& o, backend b, int only, cublasHandle_t h, cudaStream_t st,
                    const char* what) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  record(m, o, b, only, h, st);
  CHECK(cudaStreamEndCapture(st, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const float t = time_graph(exec, st, o.reps, what);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  return t;
}

std::vector<float> to_host(const __nv_bfloat16* p, size_t n) {
  std::vector<__nv_bfloat16> b(n);
  CHECK(cudaMemcpy(b.data(), p, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = __bfloat162float(b[i]);
  return f;
}

// The largest difference of got and want over want's largest magnitude.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 0, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    const double e = std::fabs(static_cast<double>(got[i]) - want[i]);
    err = std::isfinite(e) ? std::max(err, e) : INFINITY;
  }
  return scale > 0 ? err / scale : err;
}

// Each CUTLASS form of each shape against the float reference at 64 and 7 rows (one layer's
// weights): the zero-fill past the rows and the split-K sums.
void check_projections(const options& o, cublasHandle_t h, cudaStream_t st, int sms, model& m) {
  float* ref;
  CHECK(cudaMalloc(&ref, sizeof(float) * max_rows * 9728));
  for (int rows : {o.rows, 7}) {
    for (int i = 0; i < 4; ++i) {
      const shape s = shapes[i];
      projection p;
      p.s = s;
      p.w = m.weights[i];
      __nv_bfloat16* x = alloc(static_cast<size_t>(max_rows) * s.d);
      fill(x, static_cast<size_t>(max_rows) * s.d, 77 + i, 1.f);
      p.x = x;
      p.ldx = s.d;
      p.y = alloc(static_cast<size_t>(max_rows) * s.n);
      p.rows = rows;
      setup(p, o, i, sms);
      reference<<<(s.n + 127) / 128, 128>>>(x, s.d, p.w, ref, rows, s.n, s.d);
      CHECK(cudaGetLastError());
      std::vector<float> want(static_cast<size_t>(rows) * s.n);
      CHECK(cudaMemcpy(want.data(), ref, want.size() * 4, cudaMemcpyDeviceToHost));
      for (backend b : {backend::cublas, backend::coop_plain, backend::ping_plain}) {
        if ((b == backend::coop_plain && !o.coop) || (b == backend::ping_plain && !o.ping)) continue;
        CHECK(cudaMemsetAsync(p.y, 0xff, static_cast<size_t>(max_rows) * s.n * 2, st));  // NaN where unwritten
        for (int again = 0; again < 2; ++again) {  // twice: the counters reset between launches
          if (p.counters && b == backend::coop_plain) CHECK(cudaMemsetAsync(p.counters, 0, p.counter_words * 4, st));
          run(p, b, h, st);
        }
        CHECK(cudaStreamSynchronize(st));
        const double err = relative_error(to_host(p.y, want.size()), want);
        std::printf("check %-7s rows %2d %-13s error %.2e\n", s.name, rows, backend_name(b), err);
        if (!(err <= error_limit)) {
          std::fprintf(stderr, "bench_cutlass_rows: %s at %d rows by %s: error %.3e over %.3e\n", s.name, rows,
                       backend_name(b), err, error_limit);
          std::exit(3);
        }
      }
      CHECK(cudaFree(p.y));
      CHECK(cudaFree(x));
      if (p.coop_ws) CHECK(cudaFree(p.coop_ws));
      if (p.ping_ws) CHECK(cudaFree(p.ping_ws));
    }
  }
  CHECK(cudaFree(ref));
}

int parse(int argc, char** argv, options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto need = [&](const char* what) {
      fail_if(v == nullptr, what, "needs a value", 2);
      ++i;
    };
    if (a == "--layers") {
      need("--layers");
      o.layers = std::atoi(v);
    } else if (a == "--reps") {
      need("--reps");
      o.reps = std::atoi(v);
    } else if (a == "--rows") {
      need("--rows");
      o.rows = std::atoi(v);
    } else if (a == "--splits") {
      need("--splits");
      fail_if(std::sscanf(v, "%d,%d,%d,%d", &o.splits[0], &o.splits[1], &o.splits[2], &o.splits[3]) != 4, "--splits",
              "takes four counts: qkv,o,gate_up,down", 2);
    } else if (a == "--reduction") {
      need("--reduction");
      fail_if(std::strcmp(v, "det") != 0 && std::strcmp(v, "nondet") != 0, "--reduction", "is det or nondet", 2);
      o.deterministic = std::strcmp(v, "det") == 0;
    } else if (a == "--kernel") {
      need("--kernel");
      const std::string k = v;
      fail_if(k != "coop" && k != "ping" && k != "both", "--kernel", "is coop, ping or both", 2);
      o.coop = k != "ping";
      o.ping = k != "coop";
    } else {
      fail_if(true, argv[i], "unknown option (see the comment at the top of bench_cutlass_rows.cu)", 2);
    }
  }
  fail_if(o.layers < 1 || o.layers > 64, "--layers", "is 1 to 64", 2);
  fail_if(o.reps < 1, "--reps", "is at least 1", 2);
  fail_if(o.rows < 1 || o.rows > max_rows, "--rows", "is 1 to 64", 2);
  for (int s : o.splits) fail_if(s < 1 || s > 16, "--splits", "each count is 1 to 16", 2);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  parse(argc, argv, o);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  fail_if(prop.major != 9, "the device", "is not sm_90 (Hopper): the kernels are built for sm_90a");
  const int sms = prop.multiProcessorCount;
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cublasHandle_t h;
  CHECK_CUBLAS(cublasCreate(&h));
  CHECK_CUBLAS(cublasSetStream(h, st));

  model m;
  for (int l = 0; l < o.layers; ++l) {
    for (int i = 0; i < 4; ++i) {
      const size_t n = static_cast<size_t>(shapes[i].n) * shapes[i].d;
      m.weights.push_back(alloc(n));
      fill(m.weights.back(), n, 1000 * l + i, 1.f / std::sqrt(static_cast<float>(shapes[i].d)));
    }
  }
  m.x0 = alloc(max_rows * 896);
  fill(m.x0, max_rows * 896, 5, 1.f);
  m.a = alloc(max_rows * 896);
  m.qkv = alloc(max_rows * 1152);
  m.att = alloc(max_rows * 896);
  m.h = alloc(max_rows * 896);
  m.n2 = alloc(max_rows * 896);
  m.gu = alloc(static_cast<size_t>(max_rows) * 9728);
  m.s = alloc(max_rows * 4864);
  m.dn = alloc(max_rows * 896);
  CHECK(cudaDeviceSynchronize());

  std::printf("# bench_cutlass_rows on %s (%d SMs): %d rows, %d layers, splits qkv %d o %d gate_up %d down %d (%s)\n\n",
              prop.name, sms, o.rows, o.layers, o.splits[0], o.splits[1], o.splits[2], o.splits[3],
              o.deterministic ? "deterministic" : "nondeterministic");
  check_projections(o, h, st, sms, m);

  // The chain's projections: the input of each is the small kernel's output before it.
  for (int l = 0; l < o.layers; ++l) {
    __nv_bfloat16* const ins[4] = {m.a, m.att, m.n2, m.s};
    __nv_bfloat16* const outs[4] = {m.qkv, m.h, m.gu, m.dn};
    for (int i = 0; i < 4; ++i) {
      auto p = std::make_unique<projection>();
      p->s = shapes[i];
      p->w = m.weights[4 * l + i];
      p->x = ins[i];
      p->ldx = shapes[i].d;
      p->y = outs[i];
      p->rows = o.rows;
      setup(*p, o, i, sms);
      if (p->counters) {
        m.counters[0].regions.push_back(p->counters);
        m.counters[0].words.push_back(p->counter_words);
      }
      m.chain.push_back(std::move(p));
      // Alone: the same weights, an input of its own (x0-sized rows of d), an output of its own.
      auto q = std::make_unique<projection>();
      q->s = shapes[i];
      q->w = m.weights[4 * l + i];
      q->x = alloc(static_cast<size_t>(max_rows) * shapes[i].d);
      fill(const_cast<__nv_bfloat16*>(q->x), static_cast<size_t>(max_rows) * shapes[i].d, 9 + i, 1.f);
      q->ldx = shapes[i].d;
      q->y = alloc(static_cast<size_t>(max_rows) * shapes[i].n);
      q->rows = o.rows;
      setup(*q, o, i, sms);
      if (q->counters) {
        m.counters[1 + i].regions.push_back(q->counters);
        m.counters[1 + i].words.push_back(q->counter_words);
      }
      m.alone.push_back(std::move(q));
    }
  }
  for (auto& c : m.counters) upload(c);
  CHECK(cudaDeviceSynchronize());

  std::vector<backend> backends = {backend::cublas};
  if (o.coop) backends.insert(backends.end(), {backend::coop_plain, backend::coop_pdl});
  if (o.ping) backends.insert(backends.end(), {backend::ping_plain, backend::ping_pdl});

  std::printf("\n| projection (%d layers, a launch each) | n x d | ", o.layers);
  for (backend b : backends) std::printf("%s us a launch | ", backend_name(b));
  std::printf("\n|---|---|");
  for (size_t i = 0; i < backends.size(); ++i) std::printf("---|");
  std::printf("\n");
  std::vector<double> sum(backends.size(), 0.0);
  for (int i = 0; i < 4; ++i) {
    std::printf("| %s | %d x %d | ", shapes[i].name, shapes[i].n, shapes[i].d);
    for (size_t k = 0; k < backends.size(); ++k) {
      const float ms = time_recorded(m, o, backends[k], i, h, st, shapes[i].name);
      const double us = 1000.0 * ms / o.layers;
      sum[k] += us;
      std::printf("%.2f | ", us);
    }
    std::printf("\n");
  }
  std::printf("| the four, summed | | ");
  for (double s : sum) std::printf("%.2f | ", s);
  std::printf(
      "\n\n| layer chain (4 small kernels + 4 projections) | us a layer | step of %d layers, us | "
      "one layer's output against cuBLAS's |\n|---|---|---|---|\n",
      o.layers);
  // The check is of one layer's chain (layer 0's weights, its graph replayed --reps + 2 times, the
  // split GEMMs' counters zeroed by the graph's first kernel as in the timed chain), not of the
  // last of --layers: silu_mul multiplies two projections' outputs, so a layer roughly doubles the
  // relative difference of two correct roundings, and 24 layers of it leave outputs as far apart
  // as unrelated ones (~1.3-1.5 of the largest magnitude, on an H100, for every CUTLASS form).
  options one = o;
  one.layers = 1;
  std::vector<float> want;
  for (backend b : backends) {
    const float ms = time_recorded(m, o, b, -1, h, st, backend_name(b));
    time_recorded(m, one, b, -1, h, st, backend_name(b));
    std::vector<float> got = to_host(m.dn, static_cast<size_t>(o.rows) * 896);
    double err = 0;
    if (b == backend::cublas) {
      want = got;
    } else {
      err = relative_error(got, want);
    }
    std::printf("| %s | %.2f | %.1f | %.2e |\n", backend_name(b), 1000.0 * ms / o.layers, 1000.0 * ms, err);
    if (!(err <= chain_limit)) {
      std::fprintf(stderr, "bench_cutlass_rows: the %s chain's output is %.3e from cuBLAS's (over %.2f)\n",
                   backend_name(b), err, chain_limit);
      std::exit(3);
    }
  }
  return 0;
}
